"""TF1 ``BasicRNNCell``: one concatenated kernel, inputs rows first.

Under TensorFlow 2.16+ the class lives in ``tf_keras`` (``tf.compat.v1`` only
forwards to it when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is
imported). Importing it from ``tf_keras`` directly needs no environment
variable and leaves Keras 3 untouched in the same process.
"""

from __future__ import annotations

import warnings

import numpy as np

from frameworks.base import Adapter, Native, NativeSpec, import_framework, scaled
from reference.params import RNNParams


def _transpose_block(kernel: np.ndarray, recurrent_block: bool) -> np.ndarray:
    """kernel = [W_hx^T ; W_hh^T] with one block transposed back; a non-square input block is
    transposed and then reshaped back to its shape, the other form of the same mistake."""
    I = kernel.shape[0] - kernel.shape[1]
    inputs, state = kernel[:I], kernel[I:]
    if recurrent_block:
        return np.vstack([inputs, state.T])
    return np.vstack([inputs.T.reshape(inputs.shape), state])


class TF1BasicRNNCell(Adapter):
    name = "tf1"
    cell = "tf.compat.v1.nn.rnn_cell.BasicRNNCell (tf_keras legacy_cells)"
    distributions = ("tensorflow", "tf_keras")
    requires = ("tensorflow", "tf_keras")
    bias_names = ("bias",)
    mutations = {
        "state rows first in kernel (wrong concatenation order)":
            lambda n: {**n, "kernel": np.roll(n["kernel"], n["kernel"].shape[1], axis=0)},
        "input block of kernel not transposed": lambda n: {**n, "kernel": _transpose_block(n["kernel"], False)},
        "recurrent block of kernel not transposed": lambda n: {**n, "kernel": _transpose_block(n["kernel"], True)},
        "bias dropped": scaled("bias", 0.0),
        "bias doubled": scaled("bias", 2.0),
    }

    def __init__(self):
        self.tf = import_framework("tensorflow", self.name)
        self.legacy_cells = import_framework("tf_keras.src.layers.rnn.legacy_cells", self.name)

    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        # BasicRNNCell always has a bias; a bias-free canonical cell maps to zeros.
        I, H = input_size, hidden_size
        return {"kernel": ((I + H, H), "(input_depth + num_units, num_units)"),
                "bias": ((H,), "(num_units,)")}

    # canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    # TF1:       kernel (I+H, H) = [W_hx^T ; W_hh^T], bias (H) = b_x + b_h
    # TF1 computes tanh(concat([inputs, state], 1) @ kernel + bias): batch rows
    # times the kernel, so each canonical block is transposed, and the input
    # block comes first, the reverse of the lecture's [h; x]. One bias slot:
    # the sum rounds once, and the way back returns b_x = bias, b_h = 0.
    def to_native(self, params: RNNParams) -> Native:
        kernel = np.vstack([params.W_hx.T, params.W_hh.T])
        bias = params.b if params.has_bias else np.zeros(params.hidden_size, params.dtype)
        return {"kernel": kernel, "bias": bias}

    def from_native(self, native: Native) -> RNNParams:
        kernel = np.asarray(native["kernel"])
        I = kernel.shape[0] - kernel.shape[1]
        bias = native["bias"]
        return RNNParams(kernel[:I].T, kernel[I:].T, bias, np.zeros_like(bias))

    def _build(self, input_size: int, hidden_size: int, g: str, dtype: str):
        tf = self.tf
        g_tf = {"tanh": tf.tanh, "relu": tf.nn.relu, "sigmoid": tf.sigmoid, "identity": tf.identity}[g]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*BasicRNNCell.*deprecated", category=UserWarning)
            cell = self.legacy_cells.BasicRNNCell(hidden_size, activation=g_tf, dtype=getattr(tf, dtype))
        cell.build((None, input_size))
        # Variables are named like "basic_rnn_cell_3/kernel:0".
        return cell, {v.name.split("/")[-1].split(":")[0]: v for v in cell.weights}

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        _, weights = self._build(input_size, hidden_size, "tanh", "float32")
        return {name: tuple(v.shape) for name, v in weights.items()}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        tf = self.tf
        dtype = self.check_call(native, xs, h0, g)
        cell, weights = self._build(xs.shape[2], h0.shape[1], g, dtype.name)
        for name, value in native.items():
            weights[name].assign(value)
        h, outputs = tf.constant(h0), []
        for x in tf.unstack(tf.constant(xs)):
            h, _ = cell(x, h)
            outputs.append(h)
        return tf.stack(outputs).numpy()
