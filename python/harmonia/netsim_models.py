"""The network models `harmonia-netsim` offers (docs/network-interference.md): fluid max-min
sharing, or packets through switch queues on ns-3. Kept apart from harmonia.netsim so that the
command line can name them without loading pydantic."""

from typing import Literal

NetworkModelName = Literal["fluid", "packet"]
