"""The canonical parameters of one recurrent cell, shared by every adapter.

One type for the whole family. A cell has G gates (G = 1 for the vanilla RNN,
4 for an LSTM, 3 for a GRU), stacked in the canonical order (PyTorch's, which
keeps both biases and so loses nothing):

    W_x  (G*H, I)   input-to-hidden kernels, gate blocks stacked
    W_h  (G*H, H)   hidden-to-hidden kernels
    b_x  (G*H,)     input-side biases
    b_h  (G*H,)     hidden-side biases

    rnn:  the one gate "h", with the activation g: h' = g(W_h h + W_x x + b_x + b_h)
    lstm: gates i, f, g, o
    gru:  gates r, z, n, in one of two variants (reset_after, reset_before)

For the vanilla RNN the lecture's names are aliases: W_hx = W_x, W_hh = W_h,
and the lecture's single bias is b = b_x + b_h. ``b_x`` and ``b_h`` are both
None for a cell without bias.

Options (every one optional, validated here like the tensors; ``rnn_equivalence.reference.gated``
has the equations, ``OPTIONS`` the name of each):

    activation  rnn: g. Gated: "default" (sigmoid gates, tanh candidate and output), or
                the activations by name, "f,g,h" for an LSTM (gates, candidate, output:
                ONNX's order) and "f,g" for a GRU (gates, candidate)
    peepholes   lstm: (3H,) diagonal weights from c to the gates i, f, o, in that order
                (i and f read c_{t-1}, o reads c_t)
    W_proj      lstm: (P, H) projection of the output, h = W_proj (o * h(c)); the state h
                and W_h's columns then have size P, c keeps size H
    cell_clip   lstm: c clipped to [-cell_clip, cell_clip] after each update (TF1)
    proj_clip   lstm with a projection: the projected h clipped likewise (TF1)
    gate_clip   any: the argument of every activation clipped to [-gate_clip, gate_clip]
                (ONNX ``clip``; an LSTM's c on its way into h(c) too, the state c not)
    coupled_gates  lstm: the forget gate is 1 - i (ONNX ``input_forget=1``)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from rnn_equivalence.reference.formats import round_to

# The dtypes parameters and data may have, by name: float32 and float64, and the half formats
# (rnn_equivalence.reference.formats: bfloat16 is ml_dtypes', compared by name so that nothing imports it here).
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
FLOAT_DTYPES_TEXT = "a float16, bfloat16, float32 or float64 array"


def is_float_dtype(dtype) -> bool:
    """Whether ``dtype`` (a NumPy dtype) is one of ``FLOAT_DTYPES``."""
    return _is_float(np.dtype(dtype))


@functools.lru_cache(maxsize=None)
def _is_float(dtype: np.dtype) -> bool:
    # by the dtype object: its name is built afresh on each call (some 6 us), and every parameter of every cell
    # made (a mapping read back, a random draw) is checked
    return dtype.name in FLOAT_DTYPES
GATES = {"rnn": ("h",), "lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}
GRU_VARIANTS = ("reset_after", "reset_before")
RNN_ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity", "hard_sigmoid_0.2", "hard_sigmoid_relu6")
GATED = "default"  # the activation name of a gated cell's defaults: sigmoid gates, tanh candidate and output
GATED_DEFAULTS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh")}
OPTIONS = ("peepholes", "projection", "cell_clip", "proj_clip", "gate_clip", "coupled_gates")
LSTM_ONLY_OPTIONS = ("peepholes", "projection", "cell_clip", "proj_clip", "coupled_gates")
# Option values of random parameters (``CellParams.random``): thresholds the seeded cells cross
# within a few steps (tests/reference/test_options.py checks each option changes the results by
# far more than rounding; over 6 seeds and 4 shapes, 6 steps, at least 2.6e3 times the bound),
# none of them a float32 (so the rounding of a threshold is exercised too); a projection to 2
# fewer units than the cell has.
CELL_CLIP, PROJ_CLIP, GATE_CLIP = 0.3, 0.05, 0.8


def activation_names(family: str, spec: str) -> tuple[str, ...]:
    """An activation spec by name, one per place: rnn (g,), LSTM (f, g, h), GRU (f, g)."""
    if family == "rnn":
        return (spec,)
    return GATED_DEFAULTS[family] if spec == GATED else tuple(spec.split(","))


def projection_size(hidden_size: int) -> int:
    return max(1, hidden_size - 2)
# Gate scales for random parameters: visibly different, so that a swapped pair of
# gates changes the result even where the gates' activations agree.
GATE_SCALES = {"rnn": (1.0,), "lstm": (1.0, 0.6, 1.4, 0.8), "gru": (1.2, 0.7, 1.0)}


def check_float_array(name: str, value, expected_shape: tuple[int, ...], shape_text: str, source: str = ""):
    """Return ``value`` as an array, or raise naming what was expected and received.

    ``shape_text`` spells the expected shape in symbols, e.g. ``"(H, I)"``; ``source`` says where
    its sizes come from, e.g. ``"H=4 from W_hh's shape (4, 4)"``.
    """
    array = np.asarray(value)
    if not is_float_dtype(array.dtype):
        raise TypeError(f"{name}: expected {FLOAT_DTYPES_TEXT}, got dtype {array.dtype}")
    if array.shape != expected_shape:
        raise ValueError(f"{name}: expected shape {shape_text} = {expected_shape}"
                         f"{f' ({source})' if source else ''}, got {array.shape}")
    if not np.isfinite(array).all():
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"{name}: expected finite values, got {array[index]} at index {index}")
    return array


@dataclass(frozen=True, eq=False)
class CellParams:
    family: str  # "rnn", "lstm" or "gru"
    W_x: np.ndarray
    W_h: np.ndarray
    b_x: np.ndarray | None
    b_h: np.ndarray | None
    activation: str = field(default="")  # rnn: g ("tanh" if not given); gated: GATED
    variant: str = field(default="")  # gru: "reset_after" (if not given) or "reset_before"; else ""
    peepholes: np.ndarray | None = None  # lstm: (3H,), gates i, f, o
    W_proj: np.ndarray | None = None  # lstm: (P, H)
    cell_clip: float | None = None  # lstm
    proj_clip: float | None = None  # lstm with W_proj
    gate_clip: float | None = None
    coupled_gates: bool = False  # lstm

    def __post_init__(self):
        if self.family not in GATES:
            raise ValueError(f"family: expected one of {sorted(GATES)}, got {self.family!r}")
        gru = self.family == "gru"
        activation = self._checked_activation()
        variant = self.variant or ("reset_after" if gru else "")
        if variant not in (GRU_VARIANTS if gru else ("",)):
            raise ValueError(f"variant: expected one of {GRU_VARIANTS if gru else ('',)} for {self.family}, "
                             f"got {variant!r}")
        G, symbols = len(GATES[self.family]), self._symbols()
        GH = f"{G}H" if G > 1 else "H"
        W_h = np.asarray(self.W_h)
        tensors = {}
        if self.W_proj is None:
            if W_h.ndim != 2 or W_h.shape[0] != G * W_h.shape[1]:
                raise ValueError(f"{symbols['W_h']}: expected shape ({GH}, H) for {self.family} "
                                 f"(gates {', '.join(GATES[self.family])}), got {W_h.shape}")
            H = P = W_h.shape[1]
            W_h = check_float_array(symbols["W_h"], W_h, (G * H, H), f"({GH}, H)")
            source = f"H={H} from {symbols['W_h']}'s shape {W_h.shape}"
        else:
            self._check_lstm_option("W_proj")
            W_proj = np.asarray(self.W_proj)
            if W_proj.ndim != 2:
                raise ValueError(f"W_proj: expected a 2-D array of shape (P, H), got shape {W_proj.shape}")
            P, H = W_proj.shape
            source = f"P={P}, H={H} from W_proj's shape {W_proj.shape}"
            tensors["W_proj"] = check_float_array("W_proj", W_proj, (P, H), "(P, H)")
            W_h = check_float_array(symbols["W_h"], W_h, (G * H, P), f"({GH}, P)", source)
        W_x = np.asarray(self.W_x)
        if W_x.ndim != 2:
            raise ValueError(f"{symbols['W_x']}: expected a 2-D array of shape ({GH}, I), got shape {W_x.shape}")
        tensors.update(W_x=check_float_array(symbols["W_x"], W_x, (G * H, W_x.shape[1]), f"({GH}, I)", source),
                       W_h=W_h)
        if (self.b_x is None) != (self.b_h is None):
            raise ValueError(
                f"b_x and b_h: expected both arrays of shape ({GH},) or both None (no bias), "
                f"got b_x={'None' if self.b_x is None else 'an array'}, "
                f"b_h={'None' if self.b_h is None else 'an array'}")
        if self.b_x is not None:
            for name in ("b_x", "b_h"):
                tensors[name] = check_float_array(name, getattr(self, name), (G * H,), f"({GH},)", source)
        if self.peepholes is not None:
            self._check_lstm_option("peepholes")
            tensors["peepholes"] = check_float_array("peepholes", self.peepholes, (3 * H,),
                                                     "(3H,) (gates i, f, o)", source)
        dtypes = {symbols.get(name, name): t.dtype for name, t in tensors.items()}
        if len(set(dtypes.values())) != 1:
            raise TypeError(f"expected one dtype for all parameters, got {dtypes}")
        for name in ("cell_clip", "proj_clip", "gate_clip"):
            self._check_threshold(name)
        if self.proj_clip is not None and self.W_proj is None:
            raise ValueError("proj_clip: expected a projection W_proj to clip, got W_proj=None")
        if not isinstance(self.coupled_gates, (bool, np.bool_)):
            raise TypeError(f"coupled_gates: expected True or False, got {self.coupled_gates!r}")
        if self.coupled_gates:
            self._check_lstm_option("coupled_gates")
        for name, tensor in tensors.items():
            object.__setattr__(self, name, tensor)
        object.__setattr__(self, "activation", activation)
        object.__setattr__(self, "variant", variant)

    def _checked_activation(self) -> str:
        """The activation by name, "default" for a gated cell's defaults however spelled."""
        if self.family == "rnn":
            activation = self.activation or "tanh"
            if activation not in RNN_ACTIVATIONS:
                raise ValueError(f"activation: expected one of {RNN_ACTIVATIONS} for rnn, got {activation!r}")
            return activation
        defaults = GATED_DEFAULTS[self.family]
        names = tuple((self.activation or GATED).split(","))
        if names == (GATED,) or names == defaults:
            return GATED
        spelled = "f,g,h (gates, candidate, output)" if self.family == "lstm" else "f,g (gates, candidate)"
        if len(names) != len(defaults) or not set(names) <= set(RNN_ACTIVATIONS):
            raise ValueError(f"activation: expected {GATED!r} or {len(defaults)} names {spelled} from "
                             f"{RNN_ACTIVATIONS} for {self.family}, got {self.activation!r}")
        return ",".join(names)

    def _check_lstm_option(self, name: str) -> None:
        if self.family != "lstm":
            raise ValueError(f"{name}: an option of LSTM cells only, got it for a {self.family} cell")

    def _check_threshold(self, name: str) -> None:
        value = getattr(self, name)
        if value is None:
            return
        if name != "gate_clip":
            self._check_lstm_option(name)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0 < value < np.inf:
            raise ValueError(f"{name}: expected a positive finite threshold (or None), got {value!r}")
        object.__setattr__(self, name, float(value))

    def _symbols(self) -> dict[str, str]:
        """The lecture's names of the vanilla RNN's kernels, used in its error messages."""
        return {"W_x": "W_hx", "W_h": "W_hh"} if self.family == "rnn" else {"W_x": "W_x", "W_h": "W_h"}

    # --- the lecture's names (vanilla RNN) -------------------------------------
    @property
    def W_hx(self) -> np.ndarray:
        return self.W_x

    @property
    def W_hh(self) -> np.ndarray:
        return self.W_h

    @property
    def b(self) -> np.ndarray | None:
        """The lecture's single bias ``b = b_x + b_h`` (rounded in this dtype)."""
        return None if self.b_x is None else self.b_x + self.b_h

    # --- sizes -------------------------------------------------------------------
    @property
    def gates(self) -> tuple[str, ...]:
        return GATES[self.family]

    @property
    def hidden_size(self) -> int:
        """H, the cell's units (c's size; h's too without a projection)."""
        return self.W_h.shape[0] // len(self.gates)

    @property
    def output_size(self) -> int:
        """The size of h: P with a projection, else H."""
        return self.W_h.shape[1]

    def state_size(self, key: str) -> int:
        return self.hidden_size if key == "c" else self.output_size

    @property
    def gate_activations(self) -> tuple[str, ...]:
        """Gated cells: (f, g, h) for an LSTM, (f, g) for a GRU, by name; rnn: (g,)."""
        return activation_names(self.family, self.activation)

    @property
    def options(self) -> tuple[str, ...]:
        """The options set, by name (``OPTIONS``), activations aside."""
        present = {"peepholes": self.peepholes is not None, "projection": self.W_proj is not None,
                   "cell_clip": self.cell_clip is not None, "proj_clip": self.proj_clip is not None,
                   "gate_clip": self.gate_clip is not None, "coupled_gates": self.coupled_gates}
        return tuple(name for name in OPTIONS if present[name])

    def without_option(self, name: str) -> "CellParams":
        """The cell with one option dropped (as a converter that ignores it computes)."""
        field_of = {"peepholes": "peepholes", "projection": "W_proj", "cell_clip": "cell_clip",
                    "proj_clip": "proj_clip", "gate_clip": "gate_clip", "coupled_gates": "coupled_gates"}
        if name == "projection":
            raise ValueError("projection: cannot be dropped alone (W_h's columns have its size)")
        return replace(self, **{field_of[name]: False if name == "coupled_gates" else None})

    @property
    def input_size(self) -> int:
        return self.W_x.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self.W_x.dtype

    @property
    def has_bias(self) -> bool:
        return self.b_x is not None

    @property
    def kind(self) -> str:
        """What the cell computes, in one word: "rnn-tanh", "lstm", "gru-reset_before"."""
        kind = {"rnn": f"rnn-{self.activation}", "lstm": "lstm", "gru": f"gru-{self.variant}"}[self.family]
        if self.family != "rnn" and self.activation != GATED:
            kind += f"[{self.activation}]"
        return "+".join((kind, *self.options))

    def gate(self, tensor: np.ndarray, name: str) -> np.ndarray:
        """Rows (or entries) of one gate of a stacked tensor, by gate name."""
        H, k = self.hidden_size, self.gates.index(name)
        return tensor[k * H:(k + 1) * H]

    def astype(self, dtype) -> "CellParams":
        convert = lambda t: None if t is None else t.astype(dtype)
        return replace(self, W_x=convert(self.W_x), W_h=convert(self.W_h), b_x=convert(self.b_x),
                       b_h=convert(self.b_h), peepholes=convert(self.peepholes), W_proj=convert(self.W_proj))

    def rounded_to(self, name: str) -> "CellParams":
        """The cell with every tensor rounded to the format ``name`` ("float16", "bfloat16": values exactly
        in it, kept in this dtype), so that a half-precision run starts from the reference's numbers.

        The random cells' values are exact float32 and all distinct (``random``); rounded, they stay
        within u of the format (2**-11, 2**-8) of themselves, relatively, but cannot stay distinct: a
        uniform draw puts 7/8 of a tensor's values in its top three binades, which hold 384 bfloat16
        (3072 float16) magnitudes, so a tensor of more than 440 (3500) values must repeat some, and by the birthday
        bound repeats are likely from some 20 (60) values on (a GRU with H = 5, I = 7 keeps 166 of its
        210 magnitudes in bfloat16, 204 in float16; an LSTM with H = 32, I = 16, 1110 and 4040 of
        6400). What distinctness bought, that a transposed, swapped, dropped or doubled tensor changes
        the result, is kept otherwise: the gate scales (``GATE_SCALES``) and biases at least 0.05 from
        zero survive a relative change of 2**-8, so each such mistake moves the rounded cell as much
        as the float32 one, and tests/reference/test_half_precision.py checks that it exceeds the
        half bound."""
        convert = lambda t: None if t is None else round_to(t, name).astype(t.dtype)
        return replace(self, W_x=convert(self.W_x), W_h=convert(self.W_h), b_x=convert(self.b_x),
                       b_h=convert(self.b_h), peepholes=convert(self.peepholes), W_proj=convert(self.W_proj))

    def replace(self, **changes) -> "CellParams":
        """A copy with some fields changed; the vanilla names W_hx and W_hh are accepted too."""
        aliases = {"W_hx": "W_x", "W_hh": "W_h"}
        return replace(self, **{aliases.get(k, k): v for k, v in changes.items()})

    def without_bias(self) -> "CellParams":
        return replace(self, b_x=None, b_h=None)

    @classmethod
    def random(cls, family: str, input_size: int, hidden_size: int, seed, dtype=np.float64,
               activation: str = "", variant: str = "", options: tuple[str, ...] = ()) -> "CellParams":
        """Seeded parameters in which every value is distinct and exactly a float32.

        Exact float32 values let a float32 framework and the float64 reference
        start from identical numbers, so only arithmetic is compared. All values
        distinct (across tensors too), biases non-zero (b_hn included) and each gate
        at its own scale (``GATE_SCALES``), so a transposed, swapped, dropped or
        doubled tensor changes the result.

        ``W_h`` is scaled so that its absolute row sums stay near 0.8 times the
        gate's scale: the recurrence contracts, and errors (and relu states) do
        not grow exponentially over long sequences.

        ``options`` (names from ``OPTIONS``) adds peepholes and a projection (to
        ``projection_size(H)`` units) drawn the same way, and the thresholds
        ``CELL_CLIP``, ``PROJ_CLIP``, ``GATE_CLIP``. Without options the draw is the one
        it always was, so the cases of cells without options keep their data.
        """
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"options: expected names from {OPTIONS}, got {unknown}")
        rng = np.random.default_rng(seed)
        G, H, I = len(GATES[family]), hidden_size, input_size
        P = projection_size(H) if "projection" in options else H
        scale = np.repeat(GATE_SCALES[family], H)[:, None]
        while True:
            W_x = rng.uniform(-1, 1, (G * H, I)) / np.sqrt(I) * scale
            W_h = rng.uniform(-1, 1, (G * H, P)) * (1.6 / P) * scale
            b_x = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            b_h = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            values = [t.astype(np.float32) for t in (W_x, W_h, b_x, b_h)]
            flat = np.concatenate([v.ravel() for v in values])
            if np.unique(np.abs(flat)).size == flat.size:
                break
        extras, extra_rng = {}, np.random.default_rng([*np.atleast_1d(seed), 9])
        while "peepholes" in options or "projection" in options:
            if "peepholes" in options:
                extras["peepholes"] = (extra_rng.uniform(0.1, 0.6, 3 * H)
                                       * extra_rng.choice([-1, 1], 3 * H)).astype(np.float32)
            if "projection" in options:
                extras["W_proj"] = (extra_rng.uniform(-1, 1, (P, H)) * (2.0 / H)).astype(np.float32)
            every = np.concatenate([flat, *(v.ravel() for v in extras.values())])
            if np.unique(np.abs(every)).size == every.size:
                break
        thresholds = {"cell_clip": CELL_CLIP, "proj_clip": PROJ_CLIP, "gate_clip": GATE_CLIP}
        return cls(family, *(v.astype(dtype) for v in values), activation=activation, variant=variant,
                   **{name: value.astype(dtype) for name, value in extras.items()},
                   **{name: value for name, value in thresholds.items() if name in options},
                   coupled_gates="coupled_gates" in options)

    @classmethod
    def rnn(cls, W_hx, W_hh, b_x=None, b_h=None, activation: str = "tanh") -> "CellParams":
        """A vanilla RNN cell in the lecture's names."""
        return cls("rnn", W_hx, W_hh, b_x, b_h, activation=activation)


def random_inputs(steps: int, batch: int, input_size: int, seed, dtype=np.float64) -> np.ndarray:
    """Seeded inputs of shape (T, batch, I), exactly float32 values in [-1, 1)."""
    rng = np.random.default_rng([*np.atleast_1d(seed), 1])
    return rng.uniform(-1, 1, (steps, batch, input_size)).astype(np.float32).astype(dtype)


def random_state(shape, seed, dtype=np.float64) -> np.ndarray:
    """A seeded initial state, exactly float32 values in [-0.5, 0.5)."""
    rng = np.random.default_rng([*np.atleast_1d(seed), 2])
    return rng.uniform(-0.5, 0.5, shape).astype(np.float32).astype(dtype)


# --- a sequence's arguments, checked (rnn_equivalence.reference.cells and .rnn run sequences) ---------------

def state_keys(family: str) -> tuple[str, ...]:
    return ("h", "c") if family == "lstm" else ("h",)


def check_sequence(p: CellParams, xs, state):
    """``xs`` as an array and the state as a dict of (batch, H) arrays (zeros where not given),
    or an error naming the argument, what was expected and what was received."""
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != p.input_size:
        raise ValueError(f"xs: expected shape (T, batch, I) with I={p.input_size}, got {xs.shape}")
    if xs.dtype != p.dtype:
        raise TypeError(f"xs: expected dtype {p.dtype} (the parameters' dtype), got {xs.dtype}")
    checked = {}
    for key in state_keys(p.family):
        expected = (xs.shape[1], p.state_size(key))
        value = None if state is None else state.get(key)
        if value is None:
            checked[key] = np.zeros(expected, p.dtype)
            continue
        value = np.asarray(value)
        if value.shape != expected:
            size = "P" if p.state_size(key) != p.hidden_size else "H"
            raise ValueError(f"{key}0: expected shape (batch, {size}) = {expected}, got {value.shape}")
        if value.dtype != p.dtype:
            raise TypeError(f"{key}0: expected dtype {p.dtype} (the parameters' dtype), got {value.dtype}")
        checked[key] = value
    return xs, checked
