"""SSL methods, one module each (registry ``METHODS``, factory ``create_method``).

A new method is one module with an ``@register_method`` :class:`SSLMethod` subclass. The registry finds
it by reading the package's modules and imports it only when its name is used, so a stage depends on
the code of its own method alone (``dssl.registry.Registry``).
"""

from dssl.methods.base import METHODS, LossOutput, SSLMethod, create_method, register_method

__all__ = ["METHODS", "LossOutput", "SSLMethod", "create_method", "register_method"]
