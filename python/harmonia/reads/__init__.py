"""Read phases for real on this machine: a checkpoint job's files read back by an analysis job
with and without prefetch (experiment, with its figure), the analysis job itself, run as a script
under libharmonia (analysis_job), and `harmonia reproduce reads` (cli)."""
