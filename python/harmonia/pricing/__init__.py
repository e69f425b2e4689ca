"""Price against completion time (docs/accounting.md): one mix of jobs with a share of them in a
patient I/O service class, over seeds, with its report and plot (experiment), and `harmonia
reproduce pricing` (cli)."""
