#!/usr/bin/env bash
# Connection set-up and per-request round trips of harmonia-schedd over TCP, without and with
# MUNGE authentication (docs/benchmarks.md, "Identity"). Runs REPEAT times (default 5) with COUNT
# fresh jobs each (default 1000) and prints one JSON line per run:
#   scripts/bench-identity.sh [BUILD] [REPEAT] [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
repeat=${2:-5}
count=${3:-1000}
work=$(mktemp -d /tmp/harmonia-bench-identity-XXXXXX)
chmod 0711 "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  scripts/munged.sh stop "$work/munged" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
socket=$(scripts/munged.sh start "$work/munged")
start_schedd() {  # AUTH: prints the TCP port
  "$build/src/schedd/harmonia-schedd" --socket "" --tcp 127.0.0.1:0 --auth "$1" \
    --munge-socket "$socket" >"$work/schedd-$1.out" 2>"$work/schedd-$1.err" &
  pids+=($!)
  for _ in $(seq 100); do
    grep -q tcp_port= "$work/schedd-$1.out" 2>/dev/null && break
    sleep 0.05
  done
  sed -n 's/^tcp_port=//p' "$work/schedd-$1.out"
}
plain=$(start_schedd none)
munge=$(start_schedd munge)
for run in $(seq "$repeat"); do
  # Without munged at the client no credential is made: the connection carries no identity.
  echo "{\"run\": $run, \"auth\": \"none\", \"result\": $(HARMONIA_MUNGE_SOCKET=$work/none \
    "$build/src/schedd/harmonia-schedctl" --address "tcp:127.0.0.1:$plain" rtt --count "$count")}"
  echo "{\"run\": $run, \"auth\": \"munge\", \"result\": $(HARMONIA_MUNGE_SOCKET=$socket \
    "$build/src/schedd/harmonia-schedctl" --address "tcp:127.0.0.1:$munge" rtt --count "$count")}"
done
