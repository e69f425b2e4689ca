#!/usr/bin/env bash
# A munged of its own for Harmonia's tests and benchmarks (docs/security.md): its key, socket,
# log, seed and pid file all in DIR, nothing of the system's munge touched.
#   scripts/munged.sh start DIR   # prints the socket path; clients: HARMONIA_MUNGE_SOCKET=...
#   scripts/munged.sh stop DIR    # stops it by its pid file and removes DIR
# munged checks that its directories are not writable by others, so DIR is made mode 0700 and
# its socket directory 0755 (other users' clients must reach the socket).
set -euo pipefail
usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action=$1
dir=$2
case $action in
  start)
    command -v munged >/dev/null || { echo "$0: munged is not installed (Debian: munge)" >&2; exit 1; }
    mkdir -p "$dir/run"
    chmod 0700 "$dir"
    chmod 0755 "$dir/run"
    [[ -f $dir/munge.key ]] || mungekey --create --keyfile="$dir/munge.key" --bits=1024
    chmod 0600 "$dir/munge.key"
    # The socket's directory must be reachable by every user whose jobs authenticate.
    chmod 0711 "$dir"
    munged --force --socket="$dir/run/munge.socket" --key-file="$dir/munge.key" \
      --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"
    for _ in $(seq 100); do
      [[ -S $dir/run/munge.socket ]] && break
      sleep 0.05
    done
    [[ -S $dir/run/munge.socket ]] || { echo "$0: munged did not start: $(tail -3 "$dir/munged.log")" >&2; exit 1; }
    echo "$dir/run/munge.socket"
    ;;
  stop)
    if [[ -f $dir/munged.pid ]]; then
      pid=$(cat "$dir/munged.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
      done
    fi
    rm -rf "$dir"
    ;;
  *) usage ;;
esac
