"""Federation strategies, one module each (registry ``STRATEGIES``, factory ``create_strategy``).

Importing this package registers every strategy; a new strategy is one module with a
``@register_strategy`` :class:`Strategy` subclass, imported here.
"""

from dssl.federation.strategies import fedavg  # noqa: F401  (registration)
from dssl.federation.strategies import featarc, fedema, fedssl, fedu, ldawa, mar, orchestra  # noqa: F401  (registration)
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
