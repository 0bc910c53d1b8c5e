"""The local-to-global alignment terms of FedMAR / DecMAR, one module per kind of term, each term a function
``(z, z_bar, sigma) -> loss`` named by its torch-free spec (``dssl.config.alignments``, registry
``ALIGNMENT_SPECS``) and imported when its name is used, so a MAR cell's code lineage holds its own alignment
alone."""
