"""TF1 ``BasicRNNCell``: one concatenated kernel, inputs rows first.

Under TensorFlow 2.16+ the class lives in ``tf_keras`` (``tf.compat.v1`` only
forwards to it when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is
imported). Importing it from ``tf_keras`` directly needs no environment
variable and leaves Keras 3 untouched in the same process.
"""

from __future__ import annotations

import warnings

import numpy as np

from frameworks.base import (
    Adapter, GatedAdapter, Native, NativeSpec, import_framework, reorder_gates, scaled, swapped_gates,
)
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


# --- gated cells ------------------------------------------------------------------


def _variables(cell) -> dict:
    """A legacy cell's variables by their name inside the cell: "kernel", "gates/kernel", ..."""
    return {v.name.split("/", 1)[1].split(":")[0]: v for v in cell.weights}


class TF1GatedCell(GatedAdapter):
    distributions = ("tensorflow", "tf_keras")
    requires = ("tensorflow", "tf_keras")

    def __init__(self):
        self.tf = import_framework("tensorflow", self.name)
        self.legacy_cells = import_framework("tf_keras.src.layers.rnn.legacy_cells", self.name)

    def _build(self, input_size: int, hidden_size: int, dtype: str):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is deprecated", category=UserWarning)
            cell = self._make(hidden_size, getattr(self.tf, dtype))
        cell.build((None, input_size))
        return cell, _variables(cell)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        _, variables = self._build(input_size, hidden_size, "float32")
        return {name: tuple(v.shape) for name, v in variables.items()}

    def run_native(self, native: Native, xs, h0, c0):
        tf = self.tf
        dtype = self.check_gated_call(native, xs, h0, c0)
        cell, variables = self._build(xs.shape[2], h0.shape[1], dtype.name)
        for name, value in native.items():
            variables[name].assign(value)
        lstm = self.cell_type == "lstm"
        state = self.legacy_cells.LSTMStateTuple(tf.constant(c0), tf.constant(h0)) if lstm else tf.constant(h0)
        hs, cs = [], []
        for x in tf.unstack(tf.constant(xs)):
            h, state = cell(x, state)
            hs.append(h.numpy())
            if lstm:
                cs.append(state.c.numpy())
        return {"h": np.stack(hs), "c": np.stack(cs)} if lstm else {"h": np.stack(hs)}


# canonical LSTM gates i f g o:  W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
# TF1 LSTM gates i j f o (j is the candidate g): kernel (I+H, 4H) = [W_x^T ; W_h^T] with the
#   gate blocks reordered, inputs rows first; bias (4H) = b_x + b_h reordered, with
#   forget_bias subtracted from the f block, because the cell adds it back in its forward
#   pass: sigmoid(f + forget_bias). The state is the tuple (c, h).
TF1_LSTM_ORDER = (0, 2, 1, 3)  # TF1's i, j, f, o as canonical indices (i=0, f=1, g=2, o=3)


class TF1LSTM(TF1GatedCell):
    cell_type = "lstm"
    forget_bias = 1.0  # both cells' default
    bias_names = ("bias",)

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        I, H = input_size, hidden_size
        return {"kernel": ((I + H, 4 * H), "(input_depth + num_units, 4*num_units)"),
                "bias": ((4 * H,), "(4*num_units,)")}

    def to_native(self, params) -> Native:
        kernel = np.vstack([reorder_gates(params.W_x, TF1_LSTM_ORDER).T, reorder_gates(params.W_h, TF1_LSTM_ORDER).T])
        bias = reorder_gates(params.b_x + params.b_h, TF1_LSTM_ORDER)
        H = params.hidden_size
        bias[2 * H:3 * H] -= bias.dtype.type(self.forget_bias)  # TF1's f block, refolded in the cell
        return {"kernel": kernel, "bias": bias}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        kernel, bias = np.asarray(native["kernel"]), np.array(native["bias"])
        H = kernel.shape[1] // 4
        I = kernel.shape[0] - H
        bias[2 * H:3 * H] += bias.dtype.type(self.forget_bias)
        back = np.argsort(TF1_LSTM_ORDER)
        return GatedParams("lstm", reorder_gates(kernel[:I].T, back), reorder_gates(kernel[I:].T, back),
                           reorder_gates(bias, back), np.zeros_like(bias))

    mutations = {
        "forget_bias not folded": lambda n: {**n, "bias": _shift_block(n["bias"], 2, 4, 1.0)},
        "gates j and f swapped (PyTorch's order kept)": swapped_gates("kernel", 1, 2, 4),
        "gates i and o swapped": swapped_gates("kernel", 0, 3, 4),
    }


def _shift_block(bias: np.ndarray, block: int, blocks: int, amount: float) -> np.ndarray:
    H = bias.size // blocks
    shifted = bias.copy()
    shifted[block * H:(block + 1) * H] += bias.dtype.type(amount)
    return shifted


class TF1BasicLSTMCell(TF1LSTM):
    name = "tf1-basic-lstm"
    cell = "tf.compat.v1.nn.rnn_cell.BasicLSTMCell (tf_keras legacy_cells)"

    def _make(self, units, dtype):
        return self.legacy_cells.BasicLSTMCell(units, dtype=dtype)


class TF1LSTMCell(TF1LSTM):
    """Its docstring says the forget biases are "initialized" to 1; its forward pass adds
    forget_bias like BasicLSTMCell's. The folding mapping, and the test without it, show which."""

    name = "tf1-lstm"
    cell = "tf.compat.v1.nn.rnn_cell.LSTMCell (tf_keras legacy_cells)"

    def _make(self, units, dtype):
        return self.legacy_cells.LSTMCell(units, dtype=dtype)


# canonical GRU gates r z n:  W_x (3H, I), W_h (3H, H), b_x, b_h (3H)
# TF1 GRUCell, reset before:  gates/kernel (I+H, 2H) = [[W_xr^T W_xz^T]; [W_hr^T W_hz^T]]
#   (inputs rows first, gates r then u = z), gates/bias (2H) = [b_xr + b_hr, b_xz + b_hz],
#   candidate/kernel (I+H, H) = [W_xn^T; W_hn^T], candidate/bias (H) = b_xn + b_hn.
#   Reset before applies r to h alone, so b_hn joins b_xn without changing the function.
class TF1GRUCell(TF1GatedCell):
    name = "tf1-gru"
    cell = "tf.compat.v1.nn.rnn_cell.GRUCell (tf_keras legacy_cells)"
    cell_type = "gru"
    gru_variant = "reset_before"
    bias_names = ("gates/bias", "candidate/bias")
    mutations = {
        "gates r and u swapped": swapped_gates("gates/kernel", 0, 1, 2),
        "state rows first in candidate/kernel": lambda n: {
            **n, "candidate/kernel": np.roll(n["candidate/kernel"], n["candidate/kernel"].shape[1], axis=0)},
        "candidate/bias dropped": scaled("candidate/bias", 0.0),
    }

    def _make(self, units, dtype):
        return self.legacy_cells.GRUCell(units, dtype=dtype)

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        I, H = input_size, hidden_size
        return {"gates/kernel": ((I + H, 2 * H), "(input_depth + num_units, 2*num_units)"),
                "gates/bias": ((2 * H,), "(2*num_units,)"),
                "candidate/kernel": ((I + H, H), "(input_depth + num_units, num_units)"),
                "candidate/bias": ((H,), "(num_units,)")}

    def to_native(self, params) -> Native:
        H = params.hidden_size
        W_x, W_h, b = params.W_x, params.W_h, params.b_x + params.b_h
        return {"gates/kernel": np.vstack([W_x[:2 * H].T, W_h[:2 * H].T]), "gates/bias": b[:2 * H],
                "candidate/kernel": np.vstack([W_x[2 * H:].T, W_h[2 * H:].T]), "candidate/bias": b[2 * H:]}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        gates, candidate = np.asarray(native["gates/kernel"]), np.asarray(native["candidate/kernel"])
        H = candidate.shape[1]
        I = candidate.shape[0] - H
        b = np.concatenate([native["gates/bias"], native["candidate/bias"]])
        return GatedParams("gru", np.vstack([gates[:I].T, candidate[:I].T]), np.vstack([gates[I:].T, candidate[I:].T]),
                           b, np.zeros_like(b))
