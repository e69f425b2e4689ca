"""Network interference on fat-trees (docs/network-interference.md): the scenarios and runs of
`harmonia-netsim` (model), the plots of a run (plots), the ICPP 2018 paper's experiments with
their figures (experiment), and the commands `harmonia netsim` and `harmonia reproduce network`
(cli).

The network models `harmonia-netsim` offers are named here, not in the model, so that the command
line can name them without loading pydantic: fluid max-min sharing, or packets through switch
queues on ns-3."""

from typing import Literal

NetworkModelName = Literal["fluid", "packet"]
