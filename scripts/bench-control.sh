#!/usr/bin/env bash
# Control-plane speed of harmonia-schedd on loopback (docs/control.md): round trips of the calls
# a job makes (register, phase begin, phase end) over the Unix socket and over TCP, and phase
# events per second with 10,000 registered jobs. Figures go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
schedd=build/src/schedd/harmonia-schedd
ctl=build/src/schedd/harmonia-schedctl
dir=$(mktemp -d -p "${TMPDIR:-/tmp}")
strategy=${BENCH_STRATEGY:-2a}
# A long lease: the load generator keeps thousands of connections silent while others talk.
"$schedd" --socket "$dir/s.sock" --tcp 127.0.0.1:0 --strategy "$strategy" --lease 600 \
  >"$dir/out" 2>/dev/null &
daemon=$!
trap 'kill $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [[ -S $dir/s.sock ]] && grep -q tcp_port "$dir/out" && break; sleep 0.05; done
port=$(sed -n 's/^tcp_port=//p' "$dir/out")
echo "strategy $strategy"
echo "unix socket round trips: $("$ctl" --address "$dir/s.sock" rtt --count 5000)"
echo "tcp loopback round trips: $("$ctl" --address "tcp:127.0.0.1:$port" rtt --count 5000)"
echo "load: $("$ctl" --address "$dir/s.sock" load --jobs 10000 --events 500000 --active 64 --depth 16)"
echo "load, all 2,000 jobs in phases: $("$ctl" --address "$dir/s.sock" load --jobs 2000 --events 20000 --active 2000 --depth 1)"
