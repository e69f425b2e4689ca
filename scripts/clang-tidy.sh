#!/usr/bin/env bash
# clang-tidy (checks in .clang-tidy) over the simulation kit and the three simulators, with the
# compile commands of BUILD (configured if needed; nothing is compiled). Exits non-zero on any
# finding. Two files at a time: the machine's two cores are shared.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -f $build/compile_commands.json ]] || cmake -S . -B "$build" -G Ninja >/dev/null
git ls-files 'src/simkit/*.cpp' 'src/sim/*.cpp' 'src/netsim/*.cpp' 'src/fwdsim/*.cpp' |
  xargs -P 2 -n 4 clang-tidy -p "$build" --quiet
