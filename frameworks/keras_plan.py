"""What the Keras systems are checked on, as data: configurations (layers, directions, the layers' options),
padded and chunked configurations, and the wrong mappings the suite must catch, per family. The systems
(``rnn_equivalence.frameworks.keras_adapters``) take them by their family; the names are the mapping's
(``rnn_equivalence.frameworks.keras_mapping``)."""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import reorder_gates, scaled, swapped, swapped_gates, swapped_names, transposed
from rnn_equivalence.frameworks.keras_mapping import KERAS_GRU_ORDER
from rnn_equivalence.reference.config import LayerConfig

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
