#!/bin/sh
# harmonia-netsim speed (docs/benchmarks.md): the full-size case (1,224 I/O clients x 1,000
# requests of 4 MiB on the paper's fabric), one run at a time: checkpoint started at once
# (lockstep), checkpoint with starts spread over 1 ms, and 1 ms intervals (+/-5 % jitter).
set -eu
cd "$(dirname "$0")/.."
out=${1:-results/bench-netsim}
mkdir -p "$out"
base=examples/network/full-size.toml
sed -e 's/^interval = "0 s"/interval = "0 s"\nstart_spread = "1 ms"/' \
  -e 's/^name = "network-full-size"/name = "network-full-size-spread"/' "$base" > "$out/spread.toml"
sed -e 's/^interval = "0 s"/interval = "1 ms"/' \
  -e 's/^name = "network-full-size"/name = "network-full-size-1ms"/' "$base" > "$out/interval.toml"
.venv/bin/harmonia netsim "$base" --out "$out/lockstep" --jobs 1
.venv/bin/harmonia netsim "$out/spread.toml" --out "$out/spread" --jobs 1
.venv/bin/harmonia netsim "$out/interval.toml" --out "$out/interval" --jobs 1
for run in lockstep spread interval; do
  echo "$run: $(tr -d '\n ' < "$out/$run/perf-baseline-io.json")"
done
