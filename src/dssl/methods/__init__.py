"""SSL methods, one module each (registry ``METHODS``, factory ``create_method``).

Importing this package registers every method; a new method is one module with an
``@register_method`` :class:`SSLMethod` subclass, imported here.
"""

from dssl.methods import byol, mae, mae_cnn, moco, orchestra, simclr, simsiam  # noqa: F401  (registration)
from dssl.methods.base import METHODS, LossOutput, SSLMethod, create_method, register_method

__all__ = ["METHODS", "LossOutput", "SSLMethod", "create_method", "register_method"]
