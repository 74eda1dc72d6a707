"""Every system, found by name: the adapter modules imported (each class that sets ``name`` registers
itself in ``rnn_equivalence.frameworks.base.ADAPTERS``), and the lookup. Importing this imports no framework.

Below ``convert``, ``build``, ``files`` and ``child``, which look systems up by name; the package's
``__init__`` re-exports it.
"""

from __future__ import annotations

import importlib

from rnn_equivalence.frameworks.base import ADAPTERS, Adapter  # ADAPTERS: name -> class, filled by the imports below

# The adapter modules, in the order their systems are listed. A new framework is one module here.
MODULES = ("numpy_formulas", "pytorch", "tensorflow_ops", "tf1", "keras_adapters", "flax_cells", "equinox_cells",
           "mlx_layers", "onnx_rnn", "torch_export", "torch_programs", "tf2onnx_export", "tflite_export",
           "onnx2tf_export", "nobuco_export", "coreml_export", "paddle_cells", "mnn_export", "ncnn_export",
           "litert_torch_export", "executorch_export")
for _module in MODULES:
    importlib.import_module(f"{__package__}.{_module}")



def adapter_class(name: str) -> type[Adapter]:
    if name not in ADAPTERS:
        raise ValueError(f"unknown system {name!r}; expected one of {', '.join(ADAPTERS)}")
    return ADAPTERS[name]
