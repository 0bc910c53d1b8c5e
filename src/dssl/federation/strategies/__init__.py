"""Federation strategies, one module each (registry ``STRATEGIES``, factory ``create_strategy``).

A new strategy is one module with a ``@register_strategy("<name>")`` :class:`Strategy` subclass. The
registry finds it by reading the package's modules and imports it only when its name is used, so a
stage depends on the code of its own strategy alone (``dssl.registry.Registry``).
"""

from dssl.federation.strategies.base import (
    LOCAL_MODEL,
    STRATEGIES,
    ClientContext,
    Strategy,
    Upload,
    create_strategy,
    register_strategy,
)

__all__ = ["LOCAL_MODEL", "STRATEGIES", "ClientContext", "Strategy", "Upload", "create_strategy", "register_strategy"]
