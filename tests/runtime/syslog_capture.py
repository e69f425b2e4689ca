"""Runs a command with a /dev/log of its own and prints every syslog datagram it sends, one per
line, until one contains UNTIL (or 30 s pass). Run as root under `unshare --mount
--propagation private`: the /dev the command sees is a tmpfs holding the host's null, zero,
full, random and urandom and this script's socket at /dev/log, so the host's /dev is untouched.

    syslog_capture.py SCRATCH UNTIL COMMAND...

SCRATCH is an empty directory where the host's /dev stays reachable while the script runs.
"""

import socket
import subprocess
import sys
import time

DEVICES = ("null", "zero", "full", "random", "urandom")


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> int:
    host_dev, until, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    mount("--rbind", "/dev", host_dev)
    mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/dev")
    for name in DEVICES:
        open(f"/dev/{name}", "w").close()
        mount("--bind", f"{host_dev}/{name}", f"/dev/{name}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as log:
        log.bind("/dev/log")
        log.settimeout(0.5)
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    line = log.recv(65536).decode(errors="replace")
                except TimeoutError:
                    continue
                print(line, flush=True)
                if until in line:
                    break
        finally:
            process.terminate()
            process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
