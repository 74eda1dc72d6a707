"""TF1's legacy cells: ``BasicRNNCell``, ``BasicLSTMCell``, ``LSTMCell`` and ``GRUCell``,
one concatenated kernel per dense, inputs rows first.

Under TensorFlow 2.16+ the classes live in ``tf_keras`` (``tf.compat.v1`` only
forwards to them when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow is
imported). Importing them from ``tf_keras`` directly needs no environment
variable and leaves Keras 3 untouched in the same process.

Every TF1 cell computes ``concat([inputs, state], 1) @ kernel + bias`` on batch
rows: each canonical block is transposed, and the input rows come first, the
reverse of the lecture's [h; x]. Each dense has one bias slot, so the two
canonical biases are summed (one rounding) and come back as b_x, with b_h = 0.
The cells have no switch to drop their bias: a bias-free canonical cell maps to
zeros (an LSTM's f block to -forget_bias, see below).

``LSTMCell``'s options (peepholes, a projection, cell_clip, proj_clip) are mapped next to
its kernel below; each cell's one free activation is chosen from ``ACTIVATION_NAMES``.

Three roles, kept apart as for PyTorch and Keras: the mapping (``TF1OneKernelMapping``, ``TF1LSTMMapping``,
``TF1GRUMapping``: NumPy only, what ``convert.mapping`` returns), the runner (``TF1Runner``: building the
legacy cell, unrolling it or running it through ``dynamic_rnn``, its gradients), and the systems, each a
runner, a mapping and its test plan.
"""

from __future__ import annotations

import warnings

import numpy as np

from rnn_equivalence.frameworks.base import (
    Adapter, LayerConfig, Mapping, Native, NativeSpec, gates_text, import_framework, reorder_gates,
    scaled, swapped, swapped_gates, transposed,
)
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.params import GATED, GATES, CellParams


# --- the mapping, NumPy only ------------------------------------------------------


def _concatenated(W_x: np.ndarray, W_h: np.ndarray) -> np.ndarray:
    """TF1's kernel of one dense: [W_x^T ; W_h^T], inputs rows first."""
    return np.vstack([W_x.T, W_h.T])


def _split(kernel, hidden_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_x, W_h) back from a kernel [W_x^T ; W_h^T] whose last H rows are the state's."""
    kernel = np.asarray(kernel)
    I = kernel.shape[0] - hidden_size
    return kernel[:I].T, kernel[I:].T


class TF1Mapping(Mapping):
    """What the four cells' layouts share (the module's docstring): one concatenated kernel per dense,
    inputs rows first, one bias slot each, held (zeros) where the canonical cell has no bias."""

    state_names = {"h": "state"}  # the cell's state tensor; an LSTM's is the tuple (c, h)


# --- BasicRNNCell and the LSTMs: one kernel, one bias -----------------------------
#
# canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H); gates h (rnn), i f g o (LSTM)
# TF1:       kernel (I+H, G*H) = [reorder(W_x)^T ; reorder(W_h)^T], bias (G*H) = reorder(b_x + b_h)
#   BasicRNNCell: G = 1, reorder the identity: kernel (I+H, H) = [W_hx^T ; W_hh^T], bias = b_x + b_h.
#   BasicLSTMCell, LSTMCell: G = 4 in TF1's order i j f o (j is the candidate g), and forget_bias
#   subtracted from the f block, because the cell adds it back in its forward pass:
#   sigmoid(f + forget_bias). The state is the tuple (c, h).
# The way back returns b_x = bias (forget_bias added back), b_h = 0.
ORDERS = {"rnn": (0,), "lstm": (0, 2, 1, 3)}  # TF1's gates as canonical indices (LSTM: i=0, f=1, g=2, o=3)
FORGET_BLOCK = 2  # TF1's f block: third of i j f o

# LSTMCell's options: use_peepholes, num_proj, cell_clip, proj_clip (BasicLSTMCell has none).
# canonical: peepholes (3H,) = [p_i, p_f, p_o]; W_proj (P, H), h = W_proj (o * h(c)); W_h (4H, P);
#            cell_clip, proj_clip: floats
# TF1:       w_i_diag, w_f_diag, w_o_diag (num_units,) = p_i, p_f, p_o (the cell multiplies each by c
#            elementwise; w_f_diag * c_prev joins f + forget_bias, so the folded bias is unaffected);
#            projection/kernel (num_units, num_proj) = W_proj^T (m @ kernel on batch rows);
#            kernel (I+P, 4H) = [W_x^T ; W_h^T]: the state rows are m's, P of them;
#            cell_clip, proj_clip: constructor arguments, carried in the native dict as 0-d arrays
#            in the weights' dtype under TF1's names.
# The state is LSTMStateTuple(c, m): c (H), m = h (P).
PEEPHOLES = ("w_i_diag", "w_f_diag", "w_o_diag")  # canonical order i, f, o
PROJECTION = "projection/kernel"
SETTINGS = ("cell_clip", "proj_clip")  # TF1's names, and the canonical ones


def _options_to_native(params) -> Native:
    """TF1's option weights and settings of a canonical cell (none without options)."""
    native = {}
    if params.peepholes is not None:
        native.update(zip(PEEPHOLES, np.split(params.peepholes, 3)))
    if params.W_proj is not None:
        native[PROJECTION] = params.W_proj.T.copy()
    for name in SETTINGS:
        if getattr(params, name) is not None:
            native[name] = np.asarray(getattr(params, name), params.dtype)
    return native


def _options_from_native(native: Native) -> dict:
    """CellParams' option fields from the native weights."""
    options = {}
    if any(name in native for name in PEEPHOLES):
        options["peepholes"] = np.concatenate([native[name] for name in PEEPHOLES])
    if PROJECTION in native:
        options["W_proj"] = np.asarray(native[PROJECTION]).T.copy()
    options.update({name: float(native[name]) for name in SETTINGS if name in native})
    return options


class TF1OneKernelMapping(TF1Mapping):
    """``BasicRNNCell``, ``BasicLSTMCell``, ``LSTMCell``: the one kernel and bias above, and LSTMCell's options."""

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str, options=(),
                  output_size=None) -> NativeSpec:
        G, I, H = len(GATES[self.family]), input_size, hidden_size
        units = gates_text(self.family, "num_units")
        projected = "projection" in options
        spec = {PROJECTION: ((H, output_size), "(num_units, num_proj)")} if projected else {}  # first: it
        # gives num_proj, so a transposed projection/kernel is the one named, not the kernel
        spec["kernel"] = ((I + (output_size if projected else H), G * H),
                          f"(input_depth + {'num_proj' if projected else 'num_units'}, {units})")
        spec["bias"] = ((G * H,), f"({units},)")  # a bias, with or without
        if "peepholes" in options:
            spec.update({name: ((H,), "(num_units,)") for name in PEEPHOLES})
        spec.update({name: ((), "()") for name in SETTINGS if name in options})
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        order, H = ORDERS[self.family], params.hidden_size
        kernel = _concatenated(reorder_gates(params.W_x, order), reorder_gates(params.W_h, order))
        bias = reorder_gates(params.b, order) if params.has_bias else np.zeros(len(order) * H, params.dtype)
        if self.forget_bias:
            bias[FORGET_BLOCK * H:(FORGET_BLOCK + 1) * H] -= bias.dtype.type(self.forget_bias)  # refolded in the cell
        return {"kernel": kernel, "bias": bias, **_options_to_native(params)}

    def cell_from_native(self, native: Native, tag: str):
        order = ORDERS[self.family]
        bias = np.array(native["bias"])
        H = bias.size // len(order)
        if self.forget_bias:
            bias[FORGET_BLOCK * H:(FORGET_BLOCK + 1) * H] += bias.dtype.type(self.forget_bias)
        back = np.argsort(order)
        W_x, W_h = _split(native["kernel"], np.shape(native[PROJECTION])[1] if PROJECTION in native else H)
        return CellParams(self.family, reorder_gates(W_x, back), reorder_gates(W_h, back), reorder_gates(bias, back),
                          np.zeros_like(bias), variant=self.variant, **_options_from_native(native))

    def read_options(self, native: Native, config) -> tuple[tuple[str, ...], int | None]:
        """The options by TF1's names; P (num_proj) from projection/kernel's columns."""
        present = {"peepholes": any(name in native for name in PEEPHOLES), "projection": PROJECTION in native,
                   **{name: name in native for name in SETTINGS}}
        shape = np.shape(native[PROJECTION]) if PROJECTION in native else ()
        return tuple(name for name, there in present.items() if there), (shape[-1] if shape else None)

    def recurrent_kernel(self, config) -> str:
        return "bias"  # not a kernel: see read_hidden_size

    def read_hidden_size(self, native: Native, config) -> tuple[int, str]:
        """No weight of TF1's LSTM has a side of H (kernel (I+H, 4H), bias (4H,)): H is the bias's
        length / G, so that a kernel of the wrong shape is named against the shape expected of it."""
        G, shape = len(GATES[self.family]), np.shape(native["bias"])
        units = gates_text(self.family, "num_units")
        if len(shape) != 1 or shape[0] % G:
            raise ValueError(f"{self.cell}: bias: expected shape ({units},), got {shape}")
        return shape[0] // G, "bias's length" + (f" / {G}" if G > 1 else "")


class TF1LSTMMapping(TF1OneKernelMapping):
    """``BasicLSTMCell``, ``LSTMCell``: the one-kernel layout with forget_bias folded out of the f block."""

    forget_bias = 1.0  # both cells' default
    state_names = {"h": "state.h", "c": "state.c"}  # LSTMStateTuple(c, h)


# --- GRUCell: two denses ----------------------------------------------------------
#
# canonical GRU gates r z n:  W_x (3H, I), W_h (3H, H), b_x, b_h (3H)
# TF1 GRUCell, reset before:  gates/kernel (I+H, 2H) = [[W_xr^T W_xz^T]; [W_hr^T W_hz^T]]
#   (inputs rows first, gates r then u = z), gates/bias (2H) = [b_xr + b_hr, b_xz + b_hz],
#   candidate/kernel (I+H, H) = [W_xn^T; W_hn^T], candidate/bias (H) = b_xn + b_hn.
#   Reset before applies r to h alone, so b_hn joins b_xn without changing the function.
# Each dense is the layout above with its own gates: [W_x^T ; W_h^T], bias b_x + b_h.
class TF1GRUMapping(TF1Mapping):
    """``GRUCell``: the two denses above."""

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size  # both biases, with or without a canonical bias
        return {"gates/kernel": ((I + H, 2 * H), "(input_depth + num_units, 2*num_units)"),
                "gates/bias": ((2 * H,), "(2*num_units,)"),
                "candidate/kernel": ((I + H, H), "(input_depth + num_units, num_units)"),
                "candidate/bias": ((H,), "(num_units,)")}

    def cell_to_native(self, params, tag: str) -> Native:
        H = params.hidden_size
        W_x, W_h = params.W_x, params.W_h
        b = params.b if params.has_bias else np.zeros(3 * H, params.dtype)
        return {"gates/kernel": _concatenated(W_x[:2 * H], W_h[:2 * H]), "gates/bias": b[:2 * H],
                "candidate/kernel": _concatenated(W_x[2 * H:], W_h[2 * H:]), "candidate/bias": b[2 * H:]}

    def cell_from_native(self, native: Native, tag: str):
        H = np.shape(native["candidate/kernel"])[1]
        (gates_x, gates_h), (candidate_x, candidate_h) = (_split(native[f"{dense}/kernel"], H)
                                                          for dense in ("gates", "candidate"))
        b = np.concatenate([native["gates/bias"], native["candidate/bias"]])
        return self.params(np.vstack([gates_x, candidate_x]), np.vstack([gates_h, candidate_h]), b, np.zeros_like(b))

    def recurrent_kernel(self, config) -> str:
        return "candidate/kernel"  # (I+H, H)


# --- the runner: tf_keras's legacy cells, unrolled or through dynamic_rnn ---------

# Canonical activation names -> the name a TF1 cell's ``activation`` argument takes; the cell
# resolves it itself (tf_keras.activations.get). Each cell has ONE free activation: BasicRNNCell's g,
# the LSTMs' candidate and output together (canonical "f,g,h" with g = h), GRUCell's candidate; the
# gates are a fixed sigmoid. So a gated spec "sigmoid,relu,relu" / "sigmoid,relu" is activation="relu"
# and "default" is the cells' own tanh (activation=None). "hard_sigmoid" is tf_keras's
# clip(0.2 x + 0.5, 0, 1); under TF 2.16+ tf.keras.activations.hard_sigmoid is Keras 3's
# relu6(x + 3) / 6, another function, so the name (or tf_keras's function) is what ports a TF1 model.
ACTIVATION_NAMES = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid", "identity": "linear",
                    "hard_sigmoid_0.2": "hard_sigmoid"}


def _activation_argument(g: str) -> str | None:
    """The cell's ``activation`` for a declared spec (check_call refuses the others): a vanilla g,
    or a gated spec's candidate (gates sigmoid, an LSTM's output the same as its candidate)."""
    return None if g == GATED else ACTIVATION_NAMES[g.split(",")[-1]]


def _variables(cell) -> dict:
    """A legacy cell's variables by their name inside the cell: "kernel", "gates/kernel", ...
    (the variables are named like "basic_rnn_cell_3/kernel:0", "gru_cell/gates/kernel:0")."""
    return {v.name.split("/", 1)[1].split(":")[0]: v for v in cell.weights}


def _constructor_options(native: Native) -> dict:
    """LSTMCell's keyword arguments for the options the native weights hold (none: the defaults)."""
    options = {name: float(native[name]) for name in SETTINGS if name in native}
    if PROJECTION in native:
        options["num_proj"] = np.shape(native[PROJECTION])[1]
    if any(name in native for name in PEEPHOLES):
        options["use_peepholes"] = True
    return options


class TF1Runner:
    """Running a TF1 system (the ``Runner`` methods), with the checks of ``Adapter`` it is mixed with: the
    legacy cell named by the system's ``cell``, built, loaded with the native weights and unrolled here."""

    def start(self):
        self.tf = import_framework("tensorflow", self.name)
        self.legacy_cells = import_framework("tf_keras.src.layers.rnn.legacy_cells", self.name)

    def _make(self, units: int, dtype, g: str, **options):
        """The cell; ``options``: LSTMCell's constructor options (``_constructor_options``), which the native
        weights of the other cells never hold (check_call refuses them), so those get none."""
        legacy_class = self.cell.split()[0].rsplit(".", 1)[-1]  # "tf.compat.v1.nn.rnn_cell.GRUCell (...)"
        return getattr(self.legacy_cells, legacy_class)(units, activation=_activation_argument(g), dtype=dtype,
                                                        **options)

    def _build(self, input_size: int, hidden_size: int, g: str, dtype: str, options=None):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is deprecated", category=UserWarning)
            cell = self._make(hidden_size, getattr(self.tf, dtype), g, **(options or {}))
        cell.build((None, input_size))
        return cell, _variables(cell)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        _, variables = self._build(input_size, hidden_size, self.activations[0], "float32")
        return {name: tuple(v.shape) for name, v in variables.items()}

    def _loaded(self, native: Native, input_size: int, hidden_size: int, g: str, dtype: str, settings=None):
        """A cell holding the native weights, built with the options they carry (its settings,
        e.g. cell_clip, are constructor arguments, not variables). ``settings``: tensors to pass
        for those instead of the Python floats (gradients_native, to differentiate them)."""
        options = {**_constructor_options(native), **(settings or {})}
        cell, variables = self._build(input_size, hidden_size, g, dtype, options)
        for name, variable in variables.items():
            variable.assign(native[name])
        return cell

    def _cell_state(self, state, batch: int, hidden_size: int, dtype, output_size=None):
        """The cell's state from a canonical one: a tensor, or an LSTM's ``LSTMStateTuple(c, h)``
        (h is TF1's m, of num_proj units with a projection). ``state``'s values may be tensors
        (gradients_native's watched ones): sliced here, so their gradients come back (1, batch, .)."""
        zeros = self.cell_state(None, batch, hidden_size, dtype, output_size)
        start = {key: self.tf.convert_to_tensor(state[key])[0] if state is not None and key in state
                 else self.tf.constant(zeros[key]) for key in zeros}
        return self.legacy_cells.LSTMStateTuple(start["c"], start["h"]) if self.family == "lstm" else start["h"]

    # run_native and gradients_native share the build (_prepare) and the forward (_forward): what is
    # differentiated is the very run the suite compares.
    def _prepare(self, native: Native, xs, state, config, g: str, padding=None, settings=False):
        """Checks, then the cell holding ``native`` and the tensors a run starts from: (cell, inputs,
        state or None, H, P, settings). ``settings=True``: cell_clip and proj_clip are passed to the
        constructor as tensors (returned, by name), so that a tape can watch them."""
        dtype, H = self.check_call(native, xs, state, config, g)
        if padding is not None and config.option("runner") != "dynamic_rnn":
            raise ValueError(f"{self.cell}: a padded batch runs through tf.compat.v1.nn.dynamic_rnn("
                             f"sequence_length=...), configuration ('runner', 'dynamic_rnn'); configuration "
                             f"{config} unrolls the cell step by step, over every step")
        P = self.read_options(native, config)[1]
        tensors = {name: self.tf.constant(native[name]) for name in SETTINGS if name in native} if settings else {}
        cell = self._loaded(native, xs.shape[2], H, g, dtype.name, tensors)
        start = None if state is None else {key: self.tf.constant(value) for key, value in state.items()}
        return cell, self.tf.constant(xs), start, H, P, tensors

    def _forward(self, cell, inputs, start, config, H: int, P, padding=None) -> dict:
        """The run from _prepare's tensors: run_native's outputs, as tensors."""
        if config.option("runner") == "dynamic_rnn":
            return self._dynamic_rnn(cell, inputs, start, config, H, padding, P)
        lstm = self.family == "lstm"
        carry = self._cell_state(start, inputs.shape[1], H, inputs.dtype.as_numpy_dtype, P)
        trace = {key: [] for key in state_keys(self.family)}
        for x in self.tf.unstack(inputs):
            h, carry = cell(x, carry)
            trace["h"].append(h)
            if lstm:
                trace["c"].append(carry.c)
        return {key: self.tf.stack(values) for key, values in trace.items()}

    def run_native(self, native: Native, xs, state, config, g: str, padding=None) -> dict:
        cell, inputs, start, H, P, _ = self._prepare(native, xs, state, config, g, padding)
        return {key: value.numpy() for key, value in self._forward(cell, inputs, start, config, H, P, padding).items()}

    def gradients_native(self, native: Native, xs, state, config, g: str, cotangents: dict, padding=None) -> dict:
        """tf.GradientTape over the cell's variables (every native weight, the held zero biases of a
        bias-free cell included), the inputs and the initial state, with the cotangents as
        output_gradients. cell_clip and proj_clip are constructor arguments, not variables: they are
        passed as watched tensors here (the same values in the run dtype, the same clip_by_value)."""
        tf = self.tf
        cell, inputs, start, H, P, settings = self._prepare(native, xs, state, config, g, padding, settings=True)
        variables = _variables(cell)
        sources = {"weights": {**variables, **settings}, "inputs": inputs, "state": start or {}}
        # ZERO: a source no output reaches gets zeros in its own shape (the contract's), not None.
        _, grads = self.autodiff_runtime.vjp(lambda: self._forward(cell, inputs, start, config, H, P, padding),
                                             sources, cotangents, self.check_cotangents)
        return tf.nest.map_structure(lambda value: np.asarray(value.numpy(), xs.dtype), grads)

    # --- tf.compat.v1.nn.dynamic_rnn: padded batches (sequence_length) and chunked runs ---
    def _dynamic_rnn(self, cell, inputs, start, config, H: int, padding, P=None) -> dict:
        """The cell through ``dynamic_rnn`` (time-major ``inputs``, transposed here where the
        configuration is batch major): its outputs, and its final state by ``state_names``
        ("state", or an LSTM's "state.c" and "state.h"), as ``arrange`` shapes them; tensors."""
        tf = self.tf
        time_major = bool(config.option("time_major"))
        initial = None if start is None else self._cell_state(start, inputs.shape[1], H,
                                                               inputs.dtype.as_numpy_dtype, P)
        outputs, final = tf.compat.v1.nn.dynamic_rnn(
            cell, inputs if time_major else tf.transpose(inputs, (1, 0, 2)), initial_state=initial,
            dtype=inputs.dtype, time_major=time_major,
            sequence_length=None if padding is None else tf.constant(padding.lengths, tf.int32))
        result = {"outputs": outputs}
        for key in state_keys(self.family):
            value = final if self.family != "lstm" else getattr(final, key)
            result[self.state_names[key]] = value
        return result

    def arrange(self, result: dict, config) -> dict:
        """Through ``dynamic_rnn``: its outputs in its layout and its final state (an LSTM's
        ``LSTMStateTuple(c, h)`` as state.c, state.h); unrolled here: every state over time."""
        if config.option("runner") != "dynamic_rnn":
            return super().arrange(result, config)
        outputs = result["output"]
        arranged = {"outputs": outputs if config.option("time_major") else outputs.transpose(1, 0, 2)}
        for key in state_keys(self.family):
            arranged[self.state_names[key]] = result[f"{key}_n"][0]
        return arranged

    def returned_state(self, outputs: dict, config) -> dict[str, np.ndarray]:
        """``dynamic_rnn``'s final state (the tuple's c and h), as the next call's ``initial_state``."""
        return {key: outputs[self.state_names[key]][None] for key in state_keys(self.family)}


# --- the systems: each a runner, a mapping and its test plan ----------------------


class TF1Adapter(Adapter):
    """A TF1 system: what every one declares, and the padded and chunked runs of its plan."""

    distributions = ("tensorflow", "tf_keras")
    requires = ("tensorflow", "tf_keras")
    autodiff = "tf.GradientTape"

    # Padded batches and chunked runs go through tf.compat.v1.nn.dynamic_rnn (TF1Runner._dynamic_rnn).
    # It runs eagerly under TF 2.21 (its while_loop steps in Python), zeroes the outputs past each
    # element's length and copies its state through (rnn._rnn_step): the reference's "zeros".
    # Post-padding only: sequence_length counts each element's first steps.
    lengths_name = "sequence_length"
    padded_configs = (
        LayerConfig(options=(("runner", "dynamic_rnn"), ("time_major", True))),
        LayerConfig(initial_state=False, options=(("runner", "dynamic_rnn"), ("time_major", False))),
    )
    chunked_configs = (LayerConfig(options=(("runner", "dynamic_rnn"), ("time_major", True))),)


def _transpose_block(kernel: np.ndarray, recurrent_block: bool) -> np.ndarray:
    """kernel = [W_hx^T ; W_hh^T] with one block transposed back; a non-square input block is
    transposed and then reshaped back to its shape, the other form of the same mistake."""
    I = kernel.shape[0] - kernel.shape[1]
    inputs, state = kernel[:I], kernel[I:]
    if recurrent_block:
        return np.vstack([inputs, state.T])
    return np.vstack([inputs.T.reshape(inputs.shape), state])


class TF1BasicRNNCell(TF1Runner, TF1OneKernelMapping, TF1Adapter):
    name = "tf1"
    cell = "tf.compat.v1.nn.rnn_cell.BasicRNNCell (tf_keras legacy_cells)"
    family = "rnn"
    activations = ("tanh", "relu", "sigmoid", "identity", "hard_sigmoid_0.2")  # ACTIVATION_NAMES
    mutations = {
        "state rows first in kernel (wrong concatenation order)":
            lambda n: {**n, "kernel": np.roll(n["kernel"], n["kernel"].shape[1], axis=0)},
        "input block of kernel not transposed": lambda n: {**n, "kernel": _transpose_block(n["kernel"], False)},
        "recurrent block of kernel not transposed": lambda n: {**n, "kernel": _transpose_block(n["kernel"], True)},
        "bias dropped": scaled("bias", 0.0),
        "bias doubled": scaled("bias", 2.0),
    }


def _shift_block(bias: np.ndarray, block: int, blocks: int, amount: float) -> np.ndarray:
    H = bias.size // blocks
    shifted = bias.copy()
    shifted[block * H:(block + 1) * H] += bias.dtype.type(amount)
    return shifted


class TF1LSTM(TF1Runner, TF1LSTMMapping, TF1Adapter):
    """The two LSTM cells' plan: the wrong mappings both must catch."""

    family = "lstm"
    mutations = {
        "forget_bias not folded": lambda n: {**n, "bias": _shift_block(n["bias"], FORGET_BLOCK, 4, 1.0)},
        "gates j and f swapped (PyTorch's order kept)": swapped_gates("kernel", 1, 2, 4),
        "gates i and o swapped": swapped_gates("kernel", 0, 3, 4),
    }


class TF1BasicLSTMCell(TF1LSTM):
    name = "tf1-basic-lstm"
    cell = "tf.compat.v1.nn.rnn_cell.BasicLSTMCell (tf_keras legacy_cells)"
    activations = (GATED, "sigmoid,relu,relu")  # activation: the candidate's and the output's, gates sigmoid


class TF1LSTMCell(TF1LSTM):
    """Its docstring says the forget biases are "initialized" to 1; its forward pass adds
    forget_bias like BasicLSTMCell's. The folding mapping, and the test without it, show which."""

    name = "tf1-lstm"
    cell = "tf.compat.v1.nn.rnn_cell.LSTMCell (tf_keras legacy_cells)"
    activations = (GATED, "sigmoid,relu,relu")  # activation: the candidate's and the output's, gates sigmoid
    options = ("", "peepholes", "projection", "cell_clip", "projection+proj_clip",
               "peepholes+projection+cell_clip+proj_clip")
    mutation_options = "peepholes+projection+cell_clip+proj_clip"
    projection_name = "num_proj"
    mutations = {
        **TF1LSTM.mutations,
        "peepholes on the wrong gate (w_i_diag and w_f_diag swapped)": swapped("w_i_diag", "w_f_diag"),
        "projection/kernel transposed (W_proj's (P, H) kept)": transposed(PROJECTION),
        "projection/kernel reshaped from W_proj, not transposed": lambda n: {
            **n, PROJECTION: n[PROJECTION].T.reshape(n[PROJECTION].shape)},
        "cell_clip not passed to the cell": lambda n: {k: v for k, v in n.items() if k != "cell_clip"},
        "proj_clip not passed to the cell": lambda n: {k: v for k, v in n.items() if k != "proj_clip"},
    }


class TF1GRUCell(TF1Runner, TF1GRUMapping, TF1Adapter):
    name = "tf1-gru"
    cell = "tf.compat.v1.nn.rnn_cell.GRUCell (tf_keras legacy_cells)"
    family, variant = "gru", "reset_before"
    activations = (GATED, "sigmoid,relu")  # activation: the candidate's, gates sigmoid
    mutations = {
        "gates r and u swapped": swapped_gates("gates/kernel", 0, 1, 2),
        "state rows first in candidate/kernel": lambda n: {
            **n, "candidate/kernel": np.roll(n["candidate/kernel"], n["candidate/kernel"].shape[1], axis=0)},
        "candidate/bias dropped": scaled("candidate/bias", 0.0),
    }
