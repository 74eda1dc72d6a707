"""One adapter per framework, found by name; importing this package imports no framework."""

from __future__ import annotations

import importlib
import os

from frameworks.base import Adapter

# name -> "module:class". The module is imported only when the adapter is loaded,
# and the adapter imports its framework only when it is constructed.
ADAPTERS = {
    "numpy-split": "frameworks.numpy_formulas:NumpySplit",
    "numpy-concat": "frameworks.numpy_formulas:NumpyConcatenated",
    "torch": "frameworks.pytorch:TorchRNNCell",
    "torch-rnn": "frameworks.pytorch:TorchRNN",
    "tf-concat": "frameworks.tensorflow_ops:TensorflowConcatenated",
    "tf1": "frameworks.tf1:TF1BasicRNNCell",
    "keras-tf": "frameworks.keras3:KerasTF",
    "keras-jax": "frameworks.keras3:KerasJax",
    "keras-torch": "frameworks.keras3:KerasTorch",
    "tf-keras": "frameworks.keras3:TFKerasSimpleRNNCell",
    "keras-tf-rnn": "frameworks.keras3:KerasTFRNN",
    "keras-jax-rnn": "frameworks.keras3:KerasJaxRNN",
    "keras-torch-rnn": "frameworks.keras3:KerasTorchRNN",
    "tf-keras-rnn": "frameworks.keras3:TFKerasSimpleRNN",
    "flax-nnx": "frameworks.flax_cells:FlaxNNXSimpleCell",
    "flax-linen": "frameworks.flax_cells:FlaxLinenSimpleCell",
    "flax-nnx-rnn": "frameworks.flax_cells:FlaxNNXRNN",
    "onnx-ort": "frameworks.onnx_rnn:OnnxRuntimeRNN",
    "onnx-reference": "frameworks.onnx_rnn:OnnxReferenceRNN",
    "torch-onnx-dynamo": "frameworks.torch_export:TorchOnnxDynamo",
    "torch-onnx-legacy": "frameworks.torch_export:TorchOnnxLegacy",
    # Gated cells (LSTM, GRU in both variants).
    "torch-lstm": "frameworks.pytorch:TorchLSTMCell",
    "torch-gru": "frameworks.pytorch:TorchGRUCell",
    "torch-lstm-rnn": "frameworks.pytorch:TorchLSTM",
    "torch-gru-rnn": "frameworks.pytorch:TorchGRU",
    **{name: f"frameworks.keras3:GATED_LAYERS.{name}" for name in (
        f"keras-{backend}-{cell}-rnn" for backend in ("tf", "jax", "torch")
        for cell in ("lstm", "gru", "gru-reset-before"))},
    "tf1-basic-lstm": "frameworks.tf1:TF1BasicLSTMCell",
    "tf1-lstm": "frameworks.tf1:TF1LSTMCell",
    "tf1-gru": "frameworks.tf1:TF1GRUCell",
    "flax-nnx-lstm": "frameworks.flax_cells:FlaxNNXLSTMCell",
    "flax-linen-lstm": "frameworks.flax_cells:FlaxLinenLSTMCell",
    "flax-nnx-gru": "frameworks.flax_cells:FlaxNNXGRUCell",
    "flax-linen-gru": "frameworks.flax_cells:FlaxLinenGRUCell",
    **{name: f"frameworks.onnx_rnn:ONNX_GATED.{name}" for name in (
        f"onnx-{runtime}-{cell}" for runtime in ("ort", "reference") for cell in ("lstm", "gru", "gru-reset-before"))},
    **{f"torch-onnx-{exporter}-{cell}": f"frameworks.torch_export:EXPORTED_GATED.torch-onnx-{exporter}-{cell}"
       for exporter in ("dynamo", "legacy") for cell in ("lstm", "gru")},
    **{name: f"frameworks.keras3:GATED_CELLS.{name}" for name in (
        f"{prefix}-{cell}" for prefix in ("keras-tf", "keras-jax", "keras-torch", "tf-keras")
        for cell in ("lstm", "gru", "gru-reset-before"))},
}


def adapter_class(name: str) -> type[Adapter]:
    if name not in ADAPTERS:
        raise ValueError(f"unknown framework {name!r}; expected one of {', '.join(ADAPTERS)}")
    module, attribute = ADAPTERS[name].split(":")
    target = importlib.import_module(module)
    for part in attribute.split("."):  # "GATED_CELLS.keras-tf-lstm": a class in a registry dict
        target = target[part] if isinstance(target, dict) else getattr(target, part)
    return target


def load(name: str) -> Adapter:
    """The adapter for ``name``, with its framework imported (ImportError if it cannot be).

    An adapter whose ``process_env`` this process does not match (a Keras
    backend other than the one this process uses) runs its framework in a
    child process; see ``frameworks.child``.
    """
    cls = adapter_class(name)
    if any(os.environ.get(key) != value for key, value in cls.process_env.items()):
        from frameworks.child import InChildProcess

        return type(f"{cls.__name__}InChildProcess", (InChildProcess, cls), {})()
    return cls()


__all__ = ["ADAPTERS", "Adapter", "adapter_class", "load"]
