"""The Keras systems: Keras 3 on each backend (keras-tf, keras-jax, keras-torch) and Keras 2 (tf-keras), cells
and layers, every family; each one a row of ``SYSTEMS``. A system is its mapping
(``rnn_equivalence.frameworks.keras_mapping``), its runner (``rnn_equivalence.frameworks.keras_runner``) and its
test plan (``rnn_equivalence.frameworks.keras_plan``'s tables, chosen by its row in ``system_attributes``).

Keras 3 chooses its backend once per process, from ``KERAS_BACKEND``. Each backend is its own system whose
``process_env`` names it, so a run covers all three: the one this process uses runs here, the others in child
processes (``rnn_equivalence.frameworks.child``).
"""

from __future__ import annotations

from rnn_equivalence.frameworks.base import Adapter
from rnn_equivalence.frameworks.keras_mapping import KerasLayerMapping, KerasMapping
from rnn_equivalence.frameworks.keras_plan import (
    CELL_MUTATIONS, CHUNKED_CONFIGS, GATED_LAYER_CONFIGS, LAYER_MUTATIONS, MUTATION_CONFIGS, PADDED_CONFIGS,
    SIMPLE_RNN_CONFIGS, half_plan,
)
from rnn_equivalence.frameworks.keras_runner import KERAS_HARD_SIGMOID, KERAS_LAYERS, KerasCellRunner, KerasLayerRunner
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.padding import HOLES
from rnn_equivalence.reference.params import GATED, GATES


class KerasCell(KerasCellRunner, KerasMapping, Adapter):
    """``SimpleRNNCell``, ``LSTMCell`` or ``GRUCell``: its plan is its row's (``system_attributes``)."""


class KerasLayer(KerasLayerRunner, KerasLayerMapping, Adapter):
    """``SimpleRNN``, ``LSTM`` or ``GRU`` layers: its plan is its row's (``system_attributes``)."""

    layout_config = LayerConfig(2, True)


# --- the systems, in the order they are listed -----------------------------------------

# Implementations, (module, backend), without their names' prefixes (keras-tf, keras-jax, keras-torch and
# tf-keras are systems too, the SimpleRNN cells): each name is written once, in its row, and ``system``
# derives the prefix only to check it.
KERAS_TF, KERAS_JAX, KERAS_TORCH = ("keras", "tensorflow"), ("keras", "jax"), ("keras", "torch")
TF_KERAS = ("tf_keras", None)  # Keras 2: the same API and layout, a separate implementation
KERAS_BACKEND_PREFIX = {"tensorflow": "tf", "jax": "jax", "torch": "torch"}  # Keras 3's: keras-tf, keras-jax, ...
RNN, LSTM, GRU, GRU_BEFORE = ("rnn", ""), ("lstm", ""), ("gru", "reset_after"), ("gru", "reset_before")
# Every Keras system, one row each, by its literal name (the rest of the row says what it is, and
# ``system`` checks that the name says the same), in the order they are listed.
SYSTEMS = (
    ("keras-tf", KerasCell, KERAS_TF, RNN),
    ("keras-jax", KerasCell, KERAS_JAX, RNN),
    ("keras-torch", KerasCell, KERAS_TORCH, RNN),
    ("keras-tf-rnn", KerasLayer, KERAS_TF, RNN),
    ("keras-jax-rnn", KerasLayer, KERAS_JAX, RNN),
    ("keras-torch-rnn", KerasLayer, KERAS_TORCH, RNN),
    ("tf-keras", KerasCell, TF_KERAS, RNN),
    ("tf-keras-rnn", KerasLayer, TF_KERAS, RNN),
    ("keras-tf-lstm", KerasCell, KERAS_TF, LSTM),
    ("keras-tf-gru", KerasCell, KERAS_TF, GRU),
    ("keras-tf-gru-reset-before", KerasCell, KERAS_TF, GRU_BEFORE),
    ("keras-jax-lstm", KerasCell, KERAS_JAX, LSTM),
    ("keras-jax-gru", KerasCell, KERAS_JAX, GRU),
    ("keras-jax-gru-reset-before", KerasCell, KERAS_JAX, GRU_BEFORE),
    ("keras-torch-lstm", KerasCell, KERAS_TORCH, LSTM),
    ("keras-torch-gru", KerasCell, KERAS_TORCH, GRU),
    ("keras-torch-gru-reset-before", KerasCell, KERAS_TORCH, GRU_BEFORE),
    ("tf-keras-lstm", KerasCell, TF_KERAS, LSTM),
    ("tf-keras-gru", KerasCell, TF_KERAS, GRU),
    ("tf-keras-gru-reset-before", KerasCell, TF_KERAS, GRU_BEFORE),
    ("keras-tf-lstm-rnn", KerasLayer, KERAS_TF, LSTM),
    ("keras-tf-gru-rnn", KerasLayer, KERAS_TF, GRU),
    ("keras-tf-gru-reset-before-rnn", KerasLayer, KERAS_TF, GRU_BEFORE),
    ("keras-jax-lstm-rnn", KerasLayer, KERAS_JAX, LSTM),
    ("keras-jax-gru-rnn", KerasLayer, KERAS_JAX, GRU),
    ("keras-jax-gru-reset-before-rnn", KerasLayer, KERAS_JAX, GRU_BEFORE),
    ("keras-torch-lstm-rnn", KerasLayer, KERAS_TORCH, LSTM),
    ("keras-torch-gru-rnn", KerasLayer, KERAS_TORCH, GRU),
    ("keras-torch-gru-reset-before-rnn", KerasLayer, KERAS_TORCH, GRU_BEFORE),
)


def system(name: str, base: type, implementation: tuple, member: tuple) -> type:
    """One system's class, from its row of ``SYSTEMS``: keras-jax-gru-reset-before-rnn is Keras 3's
    GRU(reset_after=False) layer on jax. A layer runs in the half formats too (``half_plan``)."""
    attributes = system_attributes(name, base, implementation, member)
    if base.layer:
        attributes.update(half_plan(name, member[0]))
    return type(name.replace("-", "_"), (base,), attributes)


def system_attributes(name: str, base: type, implementation: tuple, member: tuple) -> dict:
    """The class attributes of the system ``name`` (its test plan and framework), from its row; also
    what a system built on the same layers declares (rnn_equivalence.frameworks.tf2onnx_export)."""
    (module, backend), (family, variant) = implementation, member
    before = variant == "reset_before"
    # Keras 3's systems are named after the backend, Keras 2's after its package (tf_keras: tf-keras).
    prefix = f"keras-{KERAS_BACKEND_PREFIX[backend]}" if backend else module.replace("_", "-")
    said = prefix + ("" if family == "rnn" else f"-{family}") + ("-reset-before" if before else "") \
        + ("-rnn" if base.layer else "")
    if name != said:  # a typo in the table cannot register a misnamed system
        raise TypeError(f"Keras system {name!r}: its row describes {said!r}")
    runtime, group = backend or "tensorflow", "rnn" if family == "rnn" else "gated"
    hard = KERAS_HARD_SIGMOID[module]  # the one hard sigmoid this Keras computes
    activations = {
        # Layers are tested for their structure (stacking, directions, options, states); each
        # activation is the cell's own code, tested on the cells. tanh saturates, relu does not,
        # the hard sigmoid is clipped.
        "rnn": ("tanh", "relu", hard) if base.layer else (*Adapter.activations, hard),
        # recurrent_activation, activation (= the LSTM's g and h): KerasAdapter.activation_arguments.
        # Layers take every spec: the LSTM and GRU loops of the torch backend, and jax's GRU loop
        # (reset_after), apply them on their own (keras/src/backend/*/rnn.py), not the cell's call.
        "lstm": (GATED, f"{hard},tanh,tanh", "sigmoid,relu,relu"),
        "gru": (GATED, f"{hard},tanh", "sigmoid,relu"),
    }[family]
    attributes = {
        "name": name, "family": family, "variant": variant, "module": module, "backend": backend,
        "cell": f"{module}.layers.{KERAS_LAYERS[family]}{'' if base.layer else 'Cell'}"
                + ("(reset_after=False)" if before else ""),
        "kept_hidden_biases": GATES["gru"] if variant == "reset_after" else (),
        "distributions": (module, runtime), "requires": (module, runtime),
        "process_env": {"KERAS_BACKEND": backend} if backend else {},
        "mutations": CELL_MUTATIONS[family], "activations": activations,
        # Gradients by the backend's own autodiff (KerasImplementation._differentiate), steps by this
        # Keras's optimizers.
        "autodiff": {"tensorflow": "tf.GradientTape", "jax": "jax.vjp", "torch": "torch.autograd"}[runtime],
        # On jax, compiled as JAX users run Keras (jax.jit with the weights as arguments, what keras's own
        # JAX trainer does; Adapter.built_once): a layer's whole run, a cell's step (KerasCell._build_cell).
        "compiles": backend == "jax",
        "optimizers": {"sgd": f"{module}.optimizers.SGD", "adam": f"{module}.optimizers.Adam"},
        # Both Keras versions' Adam add epsilon to sqrt(v) before the bias correction ("epsilon hat"), and
        # hold the learning rate in a floatx (float32) variable, also for float64 weights; on tensorflow
        # beta_1 and beta_2 are float32 in the correction too (measured: a float64 step is exact with them
        # rounded to float32; on jax and torch only lr is).
        "adam_epsilon": "before_correction", "optimizer_constants_dtype": "float32",
        # Known upstream bugs (Keras 3 on jax and torch in float64): rows of rnn_equivalence.harness.known_issues.
        "__module__": __name__,
    }
    if base.layer:
        attributes.update(configs=SIMPLE_RNN_CONFIGS if family == "rnn" else GATED_LAYER_CONFIGS,
                          mutation_config=MUTATION_CONFIGS[group], mutations=LAYER_MUTATIONS[group],
                          padded_configs=PADDED_CONFIGS[group], lengths_name="mask",
                          # Keras takes any mask, holes included (HOLES); Keras 3's SimpleRNN on jax reads lengths
                          # from it (a known issue): post-padding only.
                          padding_sides=("post",) if (backend, family) == ("jax", "rnn") else ("post", "pre", HOLES),
                          chunked_configs=CHUNKED_CONFIGS)
    return attributes


for _system in SYSTEMS:
    system(*_system)
