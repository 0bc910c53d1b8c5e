"""The mixing rules of decentralized averaging, one module per rule, each a function ``(adjacency, sizes) ->
matrix`` named by its torch-free spec (``dssl.config.mixing``, registry ``MIXING_SPECS``) and imported when its
name is used, so a DecL cell's code lineage holds its own rule alone."""
