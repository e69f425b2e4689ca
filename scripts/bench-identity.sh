#!/usr/bin/env bash
# Connection set-up and per-request round trips of harmonia-schedd by how it knows its peers'
# users (docs/benchmarks.md, "Identity"): a Unix socket (SO_PEERCRED), loopback TCP with the
# kernel's socket table (--auth peer) and TCP with a MUNGE credential (--auth munge). Runs REPEAT
# times (default 5) with COUNT fresh jobs each (default 1000) and prints one JSON line per run
# and way:
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
start_schedd() {  # NAME AUTH [OPTIONS...]: prints the TCP port
  name=$1 auth=$2
  shift 2
  "$build/src/schedd/harmonia-schedd" --tcp 127.0.0.1:0 --auth "$auth" --munge-socket "$socket" \
    "$@" >"$work/schedd-$name.out" 2>"$work/schedd-$name.err" &
  pids+=($!)
  for _ in $(seq 100); do
    grep -q tcp_port= "$work/schedd-$name.out" 2>/dev/null && break
    sleep 0.05
  done
  sed -n 's/^tcp_port=//p' "$work/schedd-$name.out"
}
peer=$(start_schedd peer peer --socket "$work/schedd.sock")
munge=$(start_schedd munge munge --socket "")
rtt() {  # WAY ADDRESS MUNGE_SOCKET
  echo "{\"run\": $run, \"auth\": \"$1\", \"result\": $(HARMONIA_MUNGE_SOCKET=$3 \
    "$build/src/schedd/harmonia-schedctl" --address "$2" rtt --count "$count")}"
}
for run in $(seq "$repeat"); do
  # Without munged at the client no credential is made: the kernel names the peer.
  rtt unix "$work/schedd.sock" "$work/none"
  rtt peer "tcp:127.0.0.1:$peer" "$work/none"
  rtt munge "tcp:127.0.0.1:$munge" "$socket"
done
