#!/bin/sh
# harmonia-netsim speed (docs/benchmarks.md): the full-size case, checkpoint-style in lockstep and
# desynchronised (1 ms interval, +/-5 % jitter), each alone on the machine.
set -eu
cd "$(dirname "$0")/.."
out=${1:-results/bench-netsim}
mkdir -p "$out"
.venv/bin/harmonia netsim examples/network/full-size.toml --out "$out/lockstep" --jobs 1
sed -e 's/^interval = "0 s"/interval = "1 ms"/' -e 's/^name = "network-full-size"/name = "network-full-size-1ms"/' \
  examples/network/full-size.toml > "$out/full-size-1ms.toml"
.venv/bin/harmonia netsim "$out/full-size-1ms.toml" --out "$out/desync" --jobs 1
for run in lockstep desync; do
  echo "$run: $(cat "$out/$run/perf-baseline-io.json" | tr -d '\n ')"
done
