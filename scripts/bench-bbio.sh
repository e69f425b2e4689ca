#!/usr/bin/env bash
# Speed of libharmonia against the same machine's baselines, all measured in this one run:
# pass-through overhead per call, staging 1 MiB writes to RAM against memcpy, and flushing a
# staged file against a plain program's same writes and fio's sequential write to the same
# directory.
# Last, the cost per call of small pwrite(2) calls, with and without the library (the write plan).
set -euo pipefail
cd "$(dirname "$0")/.."
bench=build/bench/bbio_bench
lib=$(realpath build/src/runtime/bbio/libharmonia.so)
dir=${BENCH_DIR:-$(mktemp -d -p "${TMPDIR:-/tmp}")}
trap 'rm -rf "$dir"' EXIT
mib=${BENCH_MIB:-1024}

best() {  # the lowest of five runs of a command printing one number (ns: lower is better)
  for _ in 1 2 3 4 5; do "$@"; done | sort -g | head -1
}
highest() {  # the highest of three runs, per output line (GB/s: higher is better)
  for _ in 1 2 3; do "$@" | paste -sd' '; done | sort -g -k1,1 | tail -1
}
plain_ns=$(best $bench passthrough 20000000)
preload_ns=$(best env LD_PRELOAD="$lib" $bench passthrough 20000000)
echo "pass-through write(2) to /dev/null: plain ${plain_ns} ns, preloaded ${preload_ns} ns," \
     "overhead $(python3 -c "print(f'{$preload_ns - $plain_ns:.2f}')") ns per call"

memcpy_gbs=$(highest $bench memcpy "$mib")
read -r stage_gbs _ <<<"$(highest env LD_PRELOAD="$lib" \
  HARMONIA_STAGE_SIZE=$((mib + 64))M $bench stage "$dir/staged.bin" "$mib")"
echo "staging ${mib} x 1 MiB writes to RAM: ${stage_gbs} GB/s; memcpy into fresh memory:" \
     "${memcpy_gbs} GB/s; ratio $(python3 -c "print(f'{$stage_gbs / $memcpy_gbs:.2f}')")"

# Flush against a plain program making the same pwritev(2) calls from memory and fsyncing, and
# against fio's sequential write to the same directory, alternating the three five times (the
# device's write-back rate drifts) and comparing medians. fio uses 64 MiB requests, the largest a
# flush issues, and syncs at the end like the flush does.
flushes=() plains=() fios=()
for _ in 1 2 3 4 5; do
  flushes+=("$(env LD_PRELOAD="$lib" HARMONIA_STAGE_SIZE=$((mib + 64))M \
    $bench stage "$dir/staged.bin" "$mib" | tail -1)")
  rm -f "$dir/staged.bin"
  plains+=("$($bench pwritev "$dir/plain.bin" "$mib")")
  rm -f "$dir/plain.bin"
  fios+=("$(fio --name=seq --directory="$dir" --rw=write --bs=64m --size="${mib}m" \
    --ioengine=sync --end_fsync=1 --output-format=json --verify_state_save=0 |
    python3 -c "import json,sys; print(json.load(sys.stdin)['jobs'][0]['write']['bw_bytes'] / 1e9)")")
  rm -f "$dir"/seq.*
done
python3 - "${flushes[*]}" "${plains[*]}" "${fios[*]}" <<'PY'
import statistics, sys
flush, plain, fio = ([float(x) for x in arg.split()] for arg in sys.argv[1:4])
def runs(values):
    return f"median {statistics.median(values):.3f} GB/s (runs {', '.join(f'{x:.2f}' for x in values)})"
print(f"flush of the staged file (pwritev + fsync): {runs(flush)}")
# This VM's page-cache writes run 0.2 s or 1.5 s a GiB from one run to the next, whichever
# program makes them: noise only ever slows a run, so the best runs are compared too.
print(f"the same pwritev calls and fsync from a plain program: {runs(plain)}; flush / plain: "
      f"median of the rounds {statistics.median(f / p for f, p in zip(flush, plain)):.2f}, "
      f"best against best {max(flush) / max(plain):.2f}")
print(f"fio sequential write (64 MiB, end_fsync): {runs(fio)}; "
      f"ratio of medians {statistics.median(flush) / statistics.median(fio):.2f}")
PY

# The per-file write plan's cost: small pwrite(2) calls to a file on $dir
# without the library, and preloaded with staging off (each call written through) and on (each
# call copied into the RAM staging area, after the plan's one atomic check); 5 runs each,
# alternated, median and range of ns per call.
calls=${BENCH_PWRITES:-1000000} bytes=${BENCH_PWRITE_BYTES:-64}
plain=() off=() on=()
for _ in 1 2 3 4 5; do
  plain+=("$($bench pwrite "$dir/small.bin" "$calls" "$bytes")")
  off+=("$(env LD_PRELOAD="$lib" HARMONIA_STAGE=0 $bench pwrite "$dir/small.bin" "$calls" "$bytes")")
  on+=("$(env LD_PRELOAD="$lib" HARMONIA_STAGE=1 HARMONIA_STAGE_SIZE=$((calls * bytes / 1048576 + 64))M \
    $bench pwrite "$dir/small.bin" "$calls" "$bytes")")
  rm -f "$dir/small.bin"
done
python3 - "$calls" "$bytes" "${plain[*]}" "${off[*]}" "${on[*]}" <<'PY'
import statistics, sys
calls, size = sys.argv[1], sys.argv[2]
for name, text in zip(("no library", "preloaded, staging off", "preloaded, staging on"), sys.argv[3:]):
    runs = [float(x) for x in text.split()]
    print(f"{calls} x {size} B pwrite(2), {name}: median {statistics.median(runs):.0f} ns per call "
          f"(range {min(runs):.0f}-{max(runs):.0f})")
PY

# Staging a file whose process holds many descriptors: a file an open creates is staged without
# a look at them; an existing file opened again is looked for among them (src/runtime/bbio/
# open_files.hpp).
# 2,000 files, with 0 and 10,000 other descriptors, without and with the library (RAM staging);
# best of three, us per open+write+close.
files=${BENCH_OPENS:-2000}
for held in 0 10000; do
  for preload in "" "$lib"; do
    runs=()
    for _ in 1 2 3; do
      mkdir -p "$dir/opens"
      runs+=("$( (ulimit -n $((held + 64)); env ${preload:+LD_PRELOAD="$preload"} \
        $bench opens "$dir/opens" "$held" "$files") | paste -sd' ')")
      rm -rf "$dir/opens"
    done
    python3 - "$held" "${preload:+preloaded}" "${runs[@]}" <<'PY'
import sys
held, name, runs = sys.argv[1], sys.argv[2] or "no library", [r.split() for r in sys.argv[3:]]
created = min(float(r[0]) for r in runs)
existing = min(float(r[1]) for r in runs)
print(f"open+write+close with {held} other descriptors, {name}: {created:.1f} us creating the "
      f"file, {existing:.1f} us opening it again")
PY
  done
done
