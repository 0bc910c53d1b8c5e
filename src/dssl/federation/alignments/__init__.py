"""The local-to-global alignment terms of FedMAR / DecMAR, one module per kind of term, each entry declared
``@register_alignment("<name>")`` (``dssl.federation.alignment.ALIGNMENTS``) and imported when its name is
used, so a MAR cell's code lineage holds its own alignment alone."""
