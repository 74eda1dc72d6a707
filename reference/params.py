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
None for a cell without bias. Room for options later (peepholes, projection)
is a new optional field, validated here like the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
GATES = {"rnn": ("h",), "lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}
GRU_VARIANTS = ("reset_after", "reset_before")
RNN_ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity")
GATED = "default"  # the activation name of a gated cell: sigmoid gates, tanh candidate, fixed
# Gate scales for random parameters: visibly different, so that a swapped pair of
# gates changes the result even where the gates' activations agree.
GATE_SCALES = {"rnn": (1.0,), "lstm": (1.0, 0.6, 1.4, 0.8), "gru": (1.2, 0.7, 1.0)}


def check_float_array(name: str, value, expected_shape: tuple[int, ...], shape_text: str, source: str = ""):
    """Return ``value`` as an array, or raise naming what was expected and received.

    ``shape_text`` spells the expected shape in symbols, e.g. ``"(H, I)"``; ``source`` says where
    its sizes come from, e.g. ``"H=4 from W_hh's shape (4, 4)"``.
    """
    array = np.asarray(value)
    if array.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected a float32 or float64 array, got dtype {array.dtype}")
    if array.shape != expected_shape:
        raise ValueError(f"{name}: expected shape {shape_text} = {expected_shape}"
                         f"{f' ({source})' if source else ''}, got {array.shape}")
    if not np.all(np.isfinite(array)):
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

    def __post_init__(self):
        if self.family not in GATES:
            raise ValueError(f"family: expected one of {sorted(GATES)}, got {self.family!r}")
        rnn, gru = self.family == "rnn", self.family == "gru"
        activation = self.activation or ("tanh" if rnn else GATED)
        if activation not in (RNN_ACTIVATIONS if rnn else (GATED,)):
            expected = RNN_ACTIVATIONS if rnn else (GATED,)
            raise ValueError(f"activation: expected one of {expected} for {self.family}, got {activation!r}")
        variant = self.variant or ("reset_after" if gru else "")
        if variant not in (GRU_VARIANTS if gru else ("",)):
            raise ValueError(f"variant: expected one of {GRU_VARIANTS if gru else ('',)} for {self.family}, "
                             f"got {variant!r}")
        G, symbols = len(GATES[self.family]), self._symbols()
        GH = f"{G}H" if G > 1 else "H"
        W_h = np.asarray(self.W_h)
        if W_h.ndim != 2 or W_h.shape[0] != G * W_h.shape[1]:
            raise ValueError(f"{symbols['W_h']}: expected shape ({GH}, H) for {self.family} "
                             f"(gates {', '.join(GATES[self.family])}), got {W_h.shape}")
        H = W_h.shape[1]
        W_h = check_float_array(symbols["W_h"], W_h, (G * H, H), f"({GH}, H)")
        W_x = np.asarray(self.W_x)
        if W_x.ndim != 2:
            raise ValueError(f"{symbols['W_x']}: expected a 2-D array of shape ({GH}, I), got shape {W_x.shape}")
        source = f"H={H} from {symbols['W_h']}'s shape {W_h.shape}"
        W_x = check_float_array(symbols["W_x"], W_x, (G * H, W_x.shape[1]), f"({GH}, I)", source)
        if (self.b_x is None) != (self.b_h is None):
            raise ValueError(
                f"b_x and b_h: expected both arrays of shape ({GH},) or both None (no bias), "
                f"got b_x={'None' if self.b_x is None else 'an array'}, b_h={'None' if self.b_h is None else 'an array'}")
        tensors = {"W_x": W_x, "W_h": W_h}
        if self.b_x is not None:
            for name in ("b_x", "b_h"):
                tensors[name] = check_float_array(name, getattr(self, name), (G * H,), f"({GH},)", source)
        dtypes = {symbols.get(name, name): t.dtype for name, t in tensors.items()}
        if len(set(dtypes.values())) != 1:
            raise TypeError(f"expected one dtype for all parameters, got {dtypes}")
        for name, tensor in tensors.items():
            object.__setattr__(self, name, tensor)
        object.__setattr__(self, "activation", activation)
        object.__setattr__(self, "variant", variant)

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
        return self.W_h.shape[1]

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
        return {"rnn": f"rnn-{self.activation}", "lstm": "lstm", "gru": f"gru-{self.variant}"}[self.family]

    def gate(self, tensor: np.ndarray, name: str) -> np.ndarray:
        """Rows (or entries) of one gate of a stacked tensor, by gate name."""
        H, k = self.hidden_size, self.gates.index(name)
        return tensor[k * H:(k + 1) * H]

    def astype(self, dtype) -> "CellParams":
        convert = lambda t: None if t is None else t.astype(dtype)
        return replace(self, W_x=convert(self.W_x), W_h=convert(self.W_h), b_x=convert(self.b_x),
                       b_h=convert(self.b_h))

    def replace(self, **changes) -> "CellParams":
        """A copy with some fields changed; the vanilla names W_hx and W_hh are accepted too."""
        aliases = {"W_hx": "W_x", "W_hh": "W_h"}
        return replace(self, **{aliases.get(k, k): v for k, v in changes.items()})

    def without_bias(self) -> "CellParams":
        return replace(self, b_x=None, b_h=None)

    @classmethod
    def random(cls, family: str, input_size: int, hidden_size: int, seed, dtype=np.float64,
               activation: str = "", variant: str = "") -> "CellParams":
        """Seeded parameters in which every value is distinct and exactly a float32.

        Exact float32 values let a float32 framework and the float64 reference
        start from identical numbers, so only arithmetic is compared. All values
        distinct (across tensors too), biases non-zero (b_hn included) and each gate
        at its own scale (``GATE_SCALES``), so a transposed, swapped, dropped or
        doubled tensor changes the result.

        ``W_h`` is scaled so that its absolute row sums stay near 0.8 times the
        gate's scale: the recurrence contracts, and errors (and relu states) do
        not grow exponentially over long sequences.
        """
        rng = np.random.default_rng(seed)
        G, H, I = len(GATES[family]), hidden_size, input_size
        scale = np.repeat(GATE_SCALES[family], H)[:, None]
        while True:
            W_x = rng.uniform(-1, 1, (G * H, I)) / np.sqrt(I) * scale
            W_h = rng.uniform(-1, 1, (G * H, H)) * (1.6 / H) * scale
            b_x = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            b_h = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            values = [t.astype(np.float32) for t in (W_x, W_h, b_x, b_h)]
            flat = np.concatenate([v.ravel() for v in values])
            if np.unique(np.abs(flat)).size == flat.size:
                return cls(family, *(v.astype(dtype) for v in values), activation=activation, variant=variant)

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
