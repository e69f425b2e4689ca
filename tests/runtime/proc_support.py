"""What the kernel says of a daemon under test (/proc/PID): its memory, threads, descriptors and
CPU time, for the tests that bound them."""

import os
from pathlib import Path


def proc_status(pid: int, key: str) -> int:
    """A number of /proc/PID/status: VmRSS and VmHWM in KiB, Threads."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descriptors(pid: int) -> int:
    """Descriptors the process has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))
