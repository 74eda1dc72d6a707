"""The Keras mapping, NumPy only: Keras's cells (``SimpleRNNCell``, ``LSTMCell``, ``GRUCell``) and layers
(``SimpleRNN``, ``LSTM``, ``GRU``, with ``Bidirectional`` and stacking), every family in one mapping, for
Keras 3 (``keras``, every backend) and Keras 2 (``tf_keras``) alike: they share the layout.
The mapping, written once here for every family:

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H)
               gates h (SimpleRNN), i f g o (LSTM), r z n (GRU)
    Keras:     kernel (I, G*H) = reorder(W_x)^T, recurrent_kernel (H, G*H) = reorder(W_h)^T,
               bias (G*H) = reorder(b_x + b_h)
               GRU(reset_after=True): bias (2, G*H) = [reorder(b_x); reorder(b_h)]
    reorder:   the identity for SimpleRNN and LSTM (Keras's LSTM gates i f c o are the
               canonical i f g o, c being g); for the GRU, Keras's gates z r h are the
               canonical z r n (``KERAS_GRU_ORDER``)

Keras computes x @ kernel + h @ recurrent_kernel (+ bias) on batch rows, hence the
transposes. One bias slot (SimpleRNN, LSTM, GRU reset_after=False): the sum rounds
once, and the way back returns b_x = bias, b_h = 0 (lossy unless b_h was zero); a
reset-before GRU may fold b_hn into b_in because it adds b_hn outside the reset. The
reset-after GRU keeps both biases, and its round trip is exact. A SimpleRNN without
bias (``use_bias=False``) has no bias weight.

In a stack, layer k's cell for direction d is named ``layer{k}.forward.`` or
``layer{k}.backward.`` followed by the cell's own weight name.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.mapping import Mapping, Native, NativeSpec, gates_text, reorder_gates
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import GATES
from rnn_equivalence.reference.stack import DIRECTIONS

KERAS_GRU_ORDER = (1, 0, 2)  # Keras's z, r, h as canonical indices (r=0, z=1, n=2)
KERAS_ORDER = {"rnn": (0,), "lstm": (0, 1, 2, 3), "gru": KERAS_GRU_ORDER}  # Keras's gates, canonical indices


class KerasMapping(Mapping):
    """The Keras layout above, for one cell whose names start with ``tag`` (a cell's tag is "")."""

    state_names = {"h": "states[0] (h)", "c": "states[1] (c)"}
    hidden_axis = 0  # recurrent_kernel is (units, G*units)

    @property
    def two_biases(self) -> bool:
        return self.family == "gru" and self.variant == "reset_after"

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H, GH = input_size, hidden_size, len(GATES[self.family]) * hidden_size
        G = gates_text(self.family, "units")
        spec = {f"{tag}kernel": ((I, GH), f"(input_dim, {G})"),
                f"{tag}recurrent_kernel": ((H, GH), f"(units, {G})")}
        if has_bias:
            spec[f"{tag}bias"] = ((2, GH), f"(2, {G})") if self.two_biases else ((GH,), f"({G},)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        order = KERAS_ORDER[self.family]
        native = {f"{tag}kernel": reorder_gates(params.W_x, order).T,
                  f"{tag}recurrent_kernel": reorder_gates(params.W_h, order).T}
        if params.has_bias:
            native[f"{tag}bias"] = (np.stack([reorder_gates(params.b_x, order), reorder_gates(params.b_h, order)])
                                    if self.two_biases else reorder_gates(params.b_x + params.b_h, order))
        return native

    def cell_from_native(self, native: Native, tag: str):
        back = np.argsort(KERAS_ORDER[self.family])
        W_x = reorder_gates(np.asarray(native[f"{tag}kernel"]).T, back)
        W_h = reorder_gates(np.asarray(native[f"{tag}recurrent_kernel"]).T, back)
        bias = native.get(f"{tag}bias")
        if bias is None:
            return self.params(W_x, W_h, None, None)
        bias = np.asarray(bias)
        b_x, b_h = (bias[0], bias[1]) if self.two_biases else (bias, np.zeros_like(bias))
        return self.params(W_x, W_h, reorder_gates(b_x, back), reorder_gates(b_h, back))

    def recurrent_kernel(self, config: LayerConfig) -> str:
        return self.tag(0, 0) + "recurrent_kernel"


class KerasLayerMapping(KerasMapping):
    """A stack: layer k's cell for direction d named ``layer{k}.forward.`` or ``layer{k}.backward.`` + its name."""

    layer = True
    state_names = {"h": "initial_state[0] (h)", "c": "initial_state[1] (c)"}

    def tag(self, layer: int, direction: int) -> str:
        return f"layer{layer}.{DIRECTIONS[direction]}."
