#!/usr/bin/env bash
# Ingest speed of one harmonia-bbd over loopback against the same machine's plain TCP loopback
# copy, measured in this one run (docs/benchmarks.md). The node's device is a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${BENCH_MIB:-512}
dir=$(mktemp -d -p "${TMPDIR:-/tmp}")
mkdir "$dir/dev" "$dir/pfs"
head -c "$((mib << 20))" /dev/urandom > "$dir/data"
build/src/bbd/harmonia-bbd --device "$dir/dev" --pfs "$dir/pfs" --capacity "$((mib * 2))M" \
  --threshold 1 > "$dir/out" 2>/dev/null &
node=$!
trap 'kill $node 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q port= "$dir/out" && break; sleep 0.05; done
port=$(sed -n 's/^port=//p' "$dir/out")
# The client reads its input first; it times only the writes (one in flight at a time).
seconds=$(build/src/bbd/harmonia-bbctl --node "127.0.0.1:$port" put data.bin "$dir/data" \
  --chunk $((4 << 20)) | python3 -c "import json, sys; print(json.load(sys.stdin)['seconds'])")
ingest=$(python3 -c "print(f'{$mib * 1048576 / $seconds / 1e9:.2f}')")
# Baseline: the same bytes through a plain loopback TCP socket, 4 MiB sends, in this run.
loopback=$(python3 - "$dir/data" <<'PY'
import socket, sys, threading, time
data = open(sys.argv[1], "rb").read()
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
def sink():
    conn, _ = server.accept()
    while conn.recv(1 << 22):
        pass
t = threading.Thread(target=sink); t.start()
client = socket.create_connection(server.getsockname())
start = time.perf_counter()
view = memoryview(data)
for at in range(0, len(data), 1 << 22):
    client.sendall(view[at:at + (1 << 22)])
client.close(); t.join()
print(f"{len(data) / (time.perf_counter() - start) / 1e9:.2f}")
PY
)
# Baseline: the node's device, the same bytes written into its directory with 4 MiB writes and no
# sync (what the node does), in this run.
device=$(python3 - "$dir/data" "$dir/dev/baseline" <<'PY'
import os, sys, time
data = open(sys.argv[1], "rb").read()
start = time.perf_counter()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
view = memoryview(data)
for at in range(0, len(data), 1 << 22):
    os.write(fd, view[at:at + (1 << 22)])
os.close(fd)
print(f"{len(data) / (time.perf_counter() - start) / 1e9:.2f}")
PY
)
rm -f "$dir/dev/baseline"
slower=$(python3 -c "print(min($loopback, $device))")
echo "ingest of ${mib} MiB into one harmonia-bbd (4 MiB writes): ${ingest} GB/s;" \
     "plain loopback TCP copy: ${loopback} GB/s; writing the device directory: ${device} GB/s;" \
     "ratio to the slower: $(python3 -c "print(f'{$ingest / $slower:.2f}')")"
start=$(date +%s.%N)
build/src/bbd/harmonia-bbctl --node "127.0.0.1:$port" drain
end=$(date +%s.%N)
echo "drain of ${mib} MiB to the PFS directory (with fsync): $(python3 -c "print(f'{$mib * 1048576 / ($end - $start) / 1e9:.2f}')") GB/s"
