"""Keras 3 ``keras.layers.SimpleRNNCell``: ``kernel``, ``recurrent_kernel``, one ``bias``.

Keras 3 chooses its backend once per process, from ``KERAS_BACKEND``; the
suite's conftest defaults it to tensorflow before anything imports Keras.
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    Adapter, Native, NativeSpec, distribution_version, import_framework, scaled, swapped, transposed,
)
from reference.params import RNNParams

KERAS_ACTIVATION = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid", "identity": "linear"}


class Keras3SimpleRNNCell(Adapter):
    name = "keras"
    cell = "keras.layers.SimpleRNNCell"
    distributions = ("keras",)
    requires = ("keras",)
    bias_names = ("bias",)
    mutations = {
        "kernel not transposed": transposed("kernel"),
        "recurrent_kernel not transposed": transposed("recurrent_kernel"),
        "kernel and recurrent_kernel swapped": swapped("kernel", "recurrent_kernel"),
        "bias dropped": scaled("bias", 0.0),
        "bias doubled": scaled("bias", 2.0),
    }

    def __init__(self):
        self.keras = import_framework("keras", self.name)

    def describe(self) -> str:
        return f"{self.cell} (backend {self.keras.backend.backend()})"

    def versions(self) -> dict[str, str]:
        # The backend does the arithmetic, so its version belongs to the result.
        backend = self.keras.backend.backend()
        return {**super().versions(), backend: distribution_version(backend)}

    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {"kernel": ((I, H), "(input_dim, units)"),
                "recurrent_kernel": ((H, H), "(units, units)")}
        if has_bias:
            spec["bias"] = ((H,), "(units,)")
        return spec

    # canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    # Keras:     kernel (I, H) = W_hx^T, recurrent_kernel (H, H) = W_hh^T, bias (H) = b_x + b_h
    # Keras computes (x @ kernel + bias) + h @ recurrent_kernel on batch rows,
    # hence the transposes. One bias slot: the sum rounds once, and the way
    # back returns b_x = bias, b_h = 0.
    def to_native(self, params: RNNParams) -> Native:
        native = {"kernel": params.W_hx.T, "recurrent_kernel": params.W_hh.T}
        if params.has_bias:
            native["bias"] = params.b
        return native

    def from_native(self, native: Native) -> RNNParams:
        bias = native.get("bias")
        return RNNParams(np.asarray(native["kernel"]).T, np.asarray(native["recurrent_kernel"]).T,
                         bias, None if bias is None else np.zeros_like(bias))

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.keras.layers.SimpleRNNCell(hidden_size)
        cell.build((None, input_size))
        return {v.path.split("/")[-1]: tuple(v.shape) for v in cell.weights}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        keras = self.keras
        dtype = self.check_call(native, xs, h0, g)
        cell = keras.layers.SimpleRNNCell(
            h0.shape[1], activation=KERAS_ACTIVATION[g], use_bias="bias" in native, dtype=dtype.name
        )
        cell.build((None, xs.shape[2]))
        for name, value in native.items():
            getattr(cell, name).assign(value)
        h, outputs = keras.ops.convert_to_tensor(h0), []
        for x in xs:
            h, _ = cell(keras.ops.convert_to_tensor(x), [h])
            outputs.append(h)
        return keras.ops.convert_to_numpy(keras.ops.stack(outputs))
