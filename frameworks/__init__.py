"""One adapter per framework and system, found by name; importing this package imports no framework.

``convert`` (``rnn_equivalence.frameworks.convert``) turns one system's weights into another's with NumPy alone.

The adapter modules import only NumPy; each class that sets ``name`` registers
itself (``rnn_equivalence.frameworks.base.REGISTRY``), so the classes are the registry.
"""

from __future__ import annotations

import importlib
import os

from rnn_equivalence.frameworks.base import REGISTRY, Adapter

# The adapter modules, in the order their systems are listed. A new framework is one module here.
MODULES = ("numpy_formulas", "pytorch", "tensorflow_ops", "tf1", "keras3", "flax_cells", "equinox_cells", "onnx_rnn", "torch_export", "tf2onnx_export", "tflite_export", "onnx2tf_export", "nobuco_export")
for _module in MODULES:
    importlib.import_module(f"rnn_equivalence.frameworks.{_module}")

ADAPTERS = REGISTRY


def adapter_class(name: str) -> type[Adapter]:
    if name not in ADAPTERS:
        raise ValueError(f"unknown system {name!r}; expected one of {', '.join(ADAPTERS)}")
    return ADAPTERS[name]


def load(name: str) -> Adapter:
    """The adapter for ``name``, with its framework imported (ImportError if it cannot be).

    An adapter whose ``process_env`` this process does not match (a Keras
    backend other than the one this process uses) runs its framework in a
    child process; see ``rnn_equivalence.frameworks.child``.
    """
    cls = adapter_class(name)
    if any(os.environ.get(key) != value for key, value in cls.process_env.items()):
        from rnn_equivalence.frameworks.child import InChildProcess

        cls = type(f"{cls.__name__}InChildProcess", (InChildProcess, cls), {})
    adapter = cls()
    adapter.start()
    return adapter


from rnn_equivalence.frameworks.convert import ConversionRefused, convert, mapping  # noqa: E402  (NumPy only)

__all__ = ["ADAPTERS", "Adapter", "ConversionRefused", "adapter_class", "convert", "load", "mapping"]
