"""The bake-off (docs/bakeoff.md): every policy and peer on a grid of synthetic mixes x seeds, or
on a window of a real trace, with its tables and figures (experiment), and `harmonia reproduce
bakeoff` (cli)."""
