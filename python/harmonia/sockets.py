"""Whether a daemon is ready on its Unix socket: accepting connections, not only bound (a
connect between a daemon's bind and its listen is refused)."""

import socket
from pathlib import Path


def accepting(path: Path) -> bool:
    """Whether a process listens on the Unix socket `path`: a connection to it is accepted (and
    closed at once)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
