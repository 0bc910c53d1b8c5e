"""SSL methods, one module each (factory ``create_method``).

A method is declared once, by its torch-free spec module ``dssl.config.methods.<name>`` (its name, its
hyper-parameters' config dataclass, the class implementing it), and implemented by one module here, an
:class:`SSLMethod` subclass that takes that config. The module is imported only when its name is used, so
a stage depends on the code of its own method alone (``dssl.registry.SpecRegistry``).
"""

from dssl.methods.base import LossOutput, SSLMethod, create_method

__all__ = ["LossOutput", "SSLMethod", "create_method"]
