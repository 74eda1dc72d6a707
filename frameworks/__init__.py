"""One adapter per framework and system, found by name; importing this package imports no framework.

``convert`` (``rnn_equivalence.frameworks.convert``) turns one system's weights into another's with NumPy alone.

The adapter modules import only NumPy; each class that sets ``name`` registers
itself (``rnn_equivalence.frameworks.base.ADAPTERS``), so the classes are the registry.
"""

from __future__ import annotations

import os

from rnn_equivalence.frameworks.base import Adapter
from rnn_equivalence.frameworks.convert import ConversionRefused, convert, mapping  # NumPy only
from rnn_equivalence.frameworks.systems import ADAPTERS, MODULES, adapter_class  # imports no framework


def load(name: str) -> Adapter:
    """The adapter for ``name``, with its framework imported (ImportError if it cannot be).

    An adapter whose ``process_env`` this process does not match (a Keras
    backend other than the one this process uses) runs its framework in a
    child process; see ``rnn_equivalence.frameworks.child``.
    """
    cls = adapter_class(name)
    if any(os.environ.get(key) != value for key, value in cls.process_env.items()):
        from rnn_equivalence.frameworks.child import InChildProcess  # imports no framework

        cls = type(f"{cls.__name__}InChildProcess", (InChildProcess, cls), {})
    adapter = cls()
    adapter.start()
    return adapter


__all__ = ["ADAPTERS", "MODULES", "Adapter", "ConversionRefused", "adapter_class", "convert", "load", "mapping"]
