"""Federation strategies, one module each (factory ``create_strategy``).

A new strategy is one module here with its :class:`Strategy` subclass, taking its config, plus its torch-free
spec module in ``dssl.config.strategies`` (name, options, frameworks). The spec is found by its name and the
strategy's module imported only when that name is used, so a stage depends on the code of its own strategy
alone (``dssl.registry.SpecRegistry``).
"""

from dssl.federation.strategies.base import LOCAL_MODEL, ClientContext, Strategy, Upload, create_strategy

__all__ = ["LOCAL_MODEL", "ClientContext", "Strategy", "Upload", "create_strategy"]
