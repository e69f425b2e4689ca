"""The I/O forwarding layer's request scheduling (docs/forwarding-simulation.md): the scenarios
and runs of `harmonia-fwdsim` (model), the TWINS dissertation's experiments (experiment), the
plots of a scenario (plots), and the commands `harmonia fwdsim` and `harmonia reproduce
forwarding` (cli)."""
