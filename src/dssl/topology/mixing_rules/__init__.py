"""The mixing rules of decentralized averaging, one module per rule, each declared
``@register_mixing("<name>")`` (``dssl.topology.mixing.MIXING``) and imported when its name is used, so a
DecL cell's code lineage holds its own rule alone."""
