"""What the Keras systems are checked on, as data: configurations (layers, directions, the layers' options),
padded and chunked configurations, and the wrong mappings the suite must catch, per family. The systems
(``rnn_equivalence.frameworks.keras_adapters``) take them by their family; the names are the mapping's
(``rnn_equivalence.frameworks.keras_mapping``)."""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import reorder_gates, scaled, swapped, swapped_gates, swapped_names, transposed
from rnn_equivalence.frameworks.keras_mapping import KERAS_GRU_ORDER
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.formats import COMPOSED_ACTIVATION_POLICIES

SIMPLE_RNN_CONFIGS = (
    LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True))),
    LayerConfig(1, False, initial_state=False, options=(("return_sequences", False),)),
    LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("go_backwards", True))),
    LayerConfig(1, True, options=(("return_sequences", True), ("return_state", True))),
    LayerConfig(2, True, bias=False, initial_state=False, options=(("return_sequences", False),)),
    LayerConfig(3, False, options=(("return_sequences", True), ("return_state", True))),
)
# Two configurations for LSTM and GRU layers (the cells cover the gates; these cover the
# layer's structure), because eager Keras layers over 50 steps cost about a second each.
GATED_LAYER_CONFIGS = (
    LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("go_backwards", True))),
    LayerConfig(2, True, initial_state=False, options=(("return_sequences", False),)),
)
# Padded batches, two configurations a family (the cells' arithmetic is tested elsewhere; these
# cover the mask's ways in and what a masked step reports): the ``mask`` argument on one layer
# from an initial state, and a ``Masking`` layer in front of a bidirectional stack (no initial
# state: Keras drops the Masking layer's mask when the call also gets ``initial_state``, see
# tests/equivalence/test_padded_keras.py). SimpleRNN repeats the last real output on masked
# steps; the gated layers' first configuration reports zeros (``zero_output_for_mask=True``) and
# their second returns only the final states, which ``Bidirectional(return_sequences=False)``
# reads at each direction's own last real step.
PADDED_CONFIGS = {
    "rnn": (
        LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("mask", "argument"))),
        LayerConfig(2, True, initial_state=False,
                    options=(("return_sequences", True), ("return_state", True), ("mask", "Masking"))),
    ),
    "gated": (
        LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True),
                                       ("zero_output_for_mask", True), ("mask", "argument"))),
        LayerConfig(2, True, initial_state=False,
                    options=(("return_sequences", False), ("return_state", True), ("mask", "Masking"))),
    ),
}
# Keras 3's jax rnn reports the previous *state* (``states[0]``) on a masked step where tensorflow
# and torch report the previous output, zeros before the first step (keras/src/backend/*/rnn.py,
# zero_output_for_mask=False): on steps masked before the first real one (pre-padding) jax reports
# the initial state, not zeros. The SimpleRNN padded configuration repeats from an initial state, so
# keras-jax-rnn is compared post-padded only; tests/equivalence/test_padded_keras.py measures it.
# Chunked runs: the returned states fed back as the next call's ``initial_state`` (two layers),
# and a ``stateful=True`` layer that carries its own (``KerasLayer.run_chunks``).
CHUNKED_CONFIGS = (
    LayerConfig(2, False, options=(("return_sequences", True), ("return_state", True))),
    LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("stateful", True))),
)
MUTATION_CONFIGS = {
    "rnn": LayerConfig(3, True, options=(("return_sequences", True), ("return_state", True))),
    "gated": LayerConfig(2, True, options=(("return_sequences", True), ("return_state", True))),
}

CELL_MUTATIONS = {
    "rnn": {
        "kernel not transposed": transposed("kernel"),
        "recurrent_kernel not transposed": transposed("recurrent_kernel"),
        "kernel and recurrent_kernel swapped": swapped("kernel", "recurrent_kernel"),
        "bias dropped": scaled("bias", 0.0),
        "bias doubled": scaled("bias", 2.0),
    },
    "lstm": {
        "gates i and f swapped": swapped_gates("kernel", 0, 1, 4),
        "gates c and o swapped in recurrent_kernel": swapped_gates("recurrent_kernel", 2, 3, 4),
        "bias dropped": scaled("bias", 0.0),
    },
    "gru": {
        "PyTorch's r z n order kept (no reorder)": lambda n: {
            **n, **{k: reorder_gates(n[k], KERAS_GRU_ORDER, axis=-1) for k in ("kernel", "recurrent_kernel", "bias")}},
        "recurrent_kernel transposed blockwise": lambda n: {**n, "recurrent_kernel": np.concatenate(
            [b.T for b in np.split(n["recurrent_kernel"], 3, axis=1)], axis=1)},
        "bias dropped": scaled("bias", 0.0),
    },
}
_SWAP_LAYER0_DIRECTIONS = {
    "forward and backward swapped in layer 0": swapped_names("layer0.forward.", "layer0.backward.", where="prefix"),
}
LAYER_MUTATIONS = {
    "rnn": {
        "layer0.forward.recurrent_kernel not transposed": transposed("layer0.forward.recurrent_kernel"),
        **_SWAP_LAYER0_DIRECTIONS,
        "layers 1 and 2 swapped": lambda n: swapped_names("layer1.backward.", "layer2.backward.", where="prefix")(
            swapped_names("layer1.forward.", "layer2.forward.", where="prefix")(n)),
        "layer2.backward.bias dropped": scaled("layer2.backward.bias", 0.0),
    },
    "gated": {
        **_SWAP_LAYER0_DIRECTIONS,
        "layers 0 and 1 swapped (recurrent kernels)": swapped("layer0.forward.recurrent_kernel",
                                                              "layer1.forward.recurrent_kernel"),
    },
}


# --- half precision (issue 37): the layers in float16 and bfloat16 under Keras's mixed policies -------------------
HALF_POLICIES = {"float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}
# Keras 3 on jax calls jax.nn.sigmoid and jax.nn.hard_sigmoid, which XLA composes of operations each stored in half
# (frameworks/flax_cells.py, "Half precision"): the arithmetic of Flax's half rows, not the plain mixed policy's.
# Measured at full depth (keras 3.15.1, jax 0.10.2): keras-jax-rnn with the relu6 hard sigmoid in float16 on one step,
# 1.01 to 1.26 times the plain mixed bound (seeds 197, 201, 221); the other backends' activations are one operation.
XLA_HALF_ARITHMETIC = {half: name for name, half in COMPOSED_ACTIVATION_POLICIES.items()}


# In bfloat16 the wrong mappings below exceed the bound of float32 within each op on the square mutation case, but
# by less than 2.5 times (harness/detection.py, caught_beyond), on every backend alike: not caught there, asserted
# so, and caught on the one-step case instead (harness.cases.one_step_mutation_case; tests/equivalence/test_mutations.py).
# Measured err/bound (keras 3.15.1, tf_keras 2.21.0), square case then one step: "layer2.backward.bias dropped" 1.83
# then 16.3 on every SimpleRNN layer; "layers 0 and 1 swapped (recurrent kernels)" 2.22 to 2.24 then 13.3 on the GRU
# layers, 2.07 then 8.5 on the reset-before ones. In float16 every one is caught on the square case; the LSTM layers
# catch both in bfloat16 too.
HALF_NOT_CAUGHT = {"rnn": {"bfloat16": ("layer2.backward.bias dropped",)},
                   "gru": {"bfloat16": ("layers 0 and 1 swapped (recurrent kernels)",)}}
# Short of full depth (rnn_equivalence.harness.depth): the half rows of the Keras layers cost 167 s summed at default
# depth over the thirteen layer systems (jax 26 to 31 s each, compiling each structure again per dtype; tensorflow
# 7 to 10 s; torch 1.4 to 3.3 s), against a budget of 15 s. So two layers of the tensorflow backend, the process's
# own, run one half format each at default, two Keras implementations and both formats met: keras-tf-lstm-rnn
# float16, tf-keras-rnn bfloat16; every other half row at full depth only.
DEFAULT_HALF = {"keras-tf-lstm-rnn": ("float16",), "tf-keras-rnn": ("bfloat16",)}


def half_plan(name: str, family: str) -> dict:
    """The half rows of a Keras layer system: its dtypes, the policy each half format runs under
    (``KerasRunner.policies``), the arithmetic its bound models (``TestPlan.arithmetic``), measured
    (rnn_equivalence.frameworks.keras_runner's docstring), the wrong mappings the half bound does not catch, and the
    dtypes it runs at full depth only (``DEFAULT_HALF``)."""
    halves = ("float16", "bfloat16")
    return {"dtypes": ("float32", "float64", *halves), "policies": dict(HALF_POLICIES),
            "arithmetic": dict(XLA_HALF_ARITHMETIC if name.startswith("keras-jax-") else HALF_POLICIES),
            "mutations_within_bound": dict(HALF_NOT_CAUGHT.get(family, {})),
            "full_depth_dtypes": tuple(h for h in halves if h not in DEFAULT_HALF.get(name, ())),
            "dtypes_left_out": {"chunked": halves} if name.startswith("keras-torch-") else {}}


# Keras 3 on torch does not carry a stateful layer's state under a mixed policy (keras 3.15.1, torch 2.13.0): RNN.call
# assigns the new state to its float32 state variable inside the layer's autocast scope, and the torch Variable's
# _direct_assign copies it into ``self.value``, which that scope returns as a half copy (keras/src/backend/torch/core.py),
# so the variable keeps its zeros. A known-issue row cannot follow it (it is in the stateful chunked configuration
# alone, whose half cases run at full depth only): the keras-torch layers' chunked runs leave the half formats out
# (``dtypes_left_out``), and tests/equivalence/test_half_keras.py proves the bug, by name, on every backend.
