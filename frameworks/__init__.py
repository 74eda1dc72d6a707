"""One adapter per framework, found by name; importing this package imports no framework."""

from __future__ import annotations

import importlib

from frameworks.base import Adapter

# name -> "module:class". The module is imported only when the adapter is loaded,
# and the adapter imports its framework only when it is constructed.
ADAPTERS = {
    "numpy-split": "frameworks.numpy_formulas:NumpySplit",
    "numpy-concat": "frameworks.numpy_formulas:NumpyConcatenated",
    "torch": "frameworks.pytorch:TorchRNNCell",
    "tf-concat": "frameworks.tensorflow_ops:TensorflowConcatenated",
    "tf1": "frameworks.tf1:TF1BasicRNNCell",
    "keras": "frameworks.keras3:Keras3SimpleRNNCell",
}


def adapter_class(name: str) -> type[Adapter]:
    if name not in ADAPTERS:
        raise ValueError(f"unknown framework {name!r}; expected one of {', '.join(ADAPTERS)}")
    module, cls = ADAPTERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def load(name: str) -> Adapter:
    """The adapter for ``name``, with its framework imported (ImportError if it cannot be)."""
    return adapter_class(name)()


__all__ = ["ADAPTERS", "Adapter", "adapter_class", "load"]
