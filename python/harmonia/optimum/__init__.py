"""The optimum of small instances (docs/bakeoff.md, "The optimum"): the CP-SAT model of the
whole problem and the policies' schedules from `harmonia-fluid` (model), the gaps over seeded
instances with their report and figure (experiment), and `harmonia reproduce optimum` (cli)."""
