#!/usr/bin/env bash
# Everyday programs through the buffer nodes against plain I/O, measured in one run: a git
# repository of 30 files (init, two commits, gc, clone), make of a two-file C program (built,
# touched, rebuilt), rsync -a of a small tree (copied, changed, copied again), and 10,000 small
# files written by one process, copied, archived and extracted. Each workload runs in a plain
# directory, then under `harmonia up --buffers 2` with env.sh sourced (no job key set: the
# session is the job), BENCH_RUNS times alternated (default 3); prints median and range of
# seconds. Uses build/ (HARMONIA_BUILD to choose another tree); BENCH_WORKLOADS picks some of
# git, make, rsync and small_files.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(realpath "${HARMONIA_BUILD:-build}")
export HARMONIA_LIBRARY=$tree/src/runtime/bbio/libharmonia.so
export HARMONIA_BBD=$tree/src/bbd/harmonia-bbd HARMONIA_BBCTL=$tree/src/bbd/harmonia-bbctl
export HARMONIA_SCHEDD_BIN=$tree/src/schedd/harmonia-schedd
export HARMONIA_SCHEDCTL=$tree/src/schedd/harmonia-schedctl
runs=${BENCH_RUNS:-3}
read -r -a workloads <<<"${BENCH_WORKLOADS:-git make rsync small_files}"
scratch=$(mktemp -d -p "${TMPDIR:-/tmp}")
up_dir=$scratch/up
.venv/bin/harmonia up --buffers 2 --dir "$up_dir" >"$scratch/up.log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$scratch"' EXIT
for _ in $(seq 1 100); do [[ -e $up_dir/env.sh ]] && break; sleep 0.2; done
[[ -e $up_dir/env.sh ]] || { echo "harmonia up did not start: $scratch/up.log" >&2; exit 1; }

git_work() {
  local g="git -c user.name=b -c user.email=b@x -c init.defaultBranch=main -c gc.auto=0"
  mkdir r && cd r && $g init -q . && for i in $(seq 1 30); do echo "line $i" >"f$i"; done
  $g add . && $g commit -qm one && for i in $(seq 1 30); do echo "more $i" >>"f$i"; done
  $g commit -qam two && $g gc -q && cd .. && $g clone -q r c
}
make_work() {
  printf '#include <stdio.h>\nint f(void);\nint main(void){printf("%%d\\n", f());}\n' >main.c
  printf 'int f(void){return 42;}\n' >f.c
  printf 'app: main.o f.o\n\tcc -o app main.o f.o\n%%.o: %%.c\n\tcc -c -O1 -o $@ $<\n' >Makefile
  make -s && touch -d '+1 second' f.c && make -s && ./app >/dev/null
}
rsync_work() {
  mkdir -p s/a && for i in 1 2 3 4 5 6; do head -c $((i * 20000)) /dev/urandom >"s/a/f$i"; done
  rsync -a s/ d/ && head -c 5000 /dev/urandom | dd of=s/a/f2 bs=1 seek=100 conv=notrunc status=none
  touch -d '2004-04-04' s/a/f2 && rsync -a s/ d/ && rsync -a --inplace s/ e/
}
small_files_work() {
  python3 -c "
import os
os.mkdir('many')
for i in range(10000):
    with open(f'many/f{i:05d}', 'w') as f:
        f.write(f'{i}\n')"
  cp -r many copy && tar cf many.tar many && rm -rf many && tar xf many.tar
}

declare -A times
for _ in $(seq 1 "$runs"); do
  for work in "${workloads[@]}"; do
    for mode in plain buffers; do
      dir=$([[ $mode == plain ]] && echo "$scratch/plain" || echo "$up_dir/pfs/bench")
      rm -rf "$dir" && mkdir -p "$dir"
      start=$(date +%s.%N)
      if [[ $mode == plain ]]; then
        (cd "$dir" && "${work}_work") >/dev/null 2>&1
      else
        (. "$up_dir/env.sh" && cd "$dir" && "${work}_work") >/dev/null 2>&1
      fi
      times[$work.$mode]+="$(python3 -c "import time; print(f'{time.time() - $start:.3f}')") "
    done
  done
done
printf '%-12s %-28s %-28s %s\n' workload "plain: median (range) s" "buffers: median (range) s" ratio
for work in "${workloads[@]}"; do
  python3 - "$work" "${times[$work.plain]}" "${times[$work.buffers]}" <<'PY'
import statistics, sys
work, plain, buffers = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
show = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
print(f"{work:<12} {show(plain):<28} {show(buffers):<28} {statistics.median(buffers) / statistics.median(plain):.1f}")
PY
done
