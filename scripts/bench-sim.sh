#!/usr/bin/env bash
# Wall time, simulated events per second and peak memory of the full section V scenario
# (8 instances, balanced) for every policy, run one after another on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
.venv/bin/harmonia sim examples/section-v/balanced-8.toml --policy datawarp --out "$out/validate" >/dev/null
sim=build/src/sim/harmonia-sim
printf '%-24s %10s %12s %14s %12s\n' policy wall_s events events_per_s peak_rss_MB
start=$(date +%s.%N)
for policy in $($sim --list-policies); do
  $sim --scenario "$out/validate/scenario.json" --policy "$policy" --out "$out/$policy.json" \
    --perf "$out/$policy.perf.json"
  python3 - "$policy" "$out/$policy.perf.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]:<24} {p['wall_s']:10.3f} {p['events']:12d} {p['events_per_s']:14.0f} "
      f"{p['peak_rss_kb'] / 1024:12.1f}")
PY
done
end=$(date +%s.%N)
python3 -c "print(f'all six policies, sequential: {float($end) - float($start):.2f} s wall')"
