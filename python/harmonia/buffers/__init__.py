"""Buffer nodes on one machine (docs/buffer-nodes.md): a scheduler daemon and N buffer nodes
started, driven and checked (cluster), the paper's VPIC draining case run on them and simulated,
with its figure (experiment), and the commands `harmonia up` and `harmonia reproduce buffers`
(cli)."""
