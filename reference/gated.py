"""Gated cells in NumPy: LSTM, and GRU in both of its variants.

Canonical layout (PyTorch's, which keeps both biases and so loses nothing):

    LSTM: gates i, f, g, o stacked in that order; W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
    GRU:  gates r, z, n stacked in that order;    W_x (3H, I), W_h (3H, H), b_x, b_h (3H)

Equations, column vectors (one column per batch element), sigma the logistic:

    LSTM  i = sigma(W_xi x + b_xi + W_hi h + b_hi)       f, o likewise
          g = tanh(W_xg x + b_xg + W_hg h + b_hg)
          c' = f * c + i * g
          h' = o * tanh(c')

    GRU   r = sigma(W_xr x + b_xr + W_hr h + b_hr)       z likewise
          reset after  (PyTorch, Keras reset_after=True, ONNX linear_before_reset=1):
              n = tanh(W_xn x + b_xn + r * (W_hn h + b_hn))
          reset before (Keras reset_after=False, TF1 GRUCell, ONNX default):
              n = tanh(W_xn x + b_xn + W_hn (r * h) + b_hn)
          h' = (1 - z) * n + z * h

The two GRU variants are different functions: r multiplies W_hn h + b_hn in one
and h alone in the other. They coincide for all inputs only when W_hn is
diagonal and b_hn is zero, so no weight mapping turns one into the other in
general. The tests prove the difference on random weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.activations import activation
from reference.params import check_float_array

GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n")}
GRU_VARIANTS = ("reset_after", "reset_before")
sigmoid, tanh = activation("sigmoid"), activation("tanh")

# Gate scales for random parameters: visibly different, so that a swapped pair of
# gates changes the result even where the gates' activations agree.
GATE_SCALES = {"lstm": (1.0, 0.6, 1.4, 0.8), "gru": (1.2, 0.7, 1.0)}


@dataclass(frozen=True, eq=False)
class GatedParams:
    cell: str  # "lstm" or "gru"
    W_x: np.ndarray
    W_h: np.ndarray
    b_x: np.ndarray
    b_h: np.ndarray

    def __post_init__(self):
        if self.cell not in GATES:
            raise ValueError(f"cell: expected one of {sorted(GATES)}, got {self.cell!r}")
        G = len(GATES[self.cell])
        W_h = np.asarray(self.W_h)
        if W_h.ndim != 2 or W_h.shape[0] != G * W_h.shape[1]:
            raise ValueError(f"W_h: expected shape ({G}H, H) for {self.cell} (gates "
                             f"{', '.join(GATES[self.cell])}), got {W_h.shape}")
        H = W_h.shape[1]
        W_h = check_float_array("W_h", W_h, (G * H, H), f"({G}H, H) with H={H}")
        W_x = np.asarray(self.W_x)
        if W_x.ndim != 2:
            raise ValueError(f"W_x: expected a 2-D array of shape ({G}H, I), got shape {W_x.shape}")
        W_x = check_float_array("W_x", W_x, (G * H, W_x.shape[1]), f"({G}H, I) with H={H} from W_h")
        b_x = check_float_array("b_x", self.b_x, (G * H,), f"({G}H,) with H={H} from W_h")
        b_h = check_float_array("b_h", self.b_h, (G * H,), f"({G}H,) with H={H} from W_h")
        dtypes = {"W_x": W_x.dtype, "W_h": W_h.dtype, "b_x": b_x.dtype, "b_h": b_h.dtype}
        if len(set(dtypes.values())) != 1:
            raise TypeError(f"expected one dtype for all parameters, got {dtypes}")
        for name, value in (("W_x", W_x), ("W_h", W_h), ("b_x", b_x), ("b_h", b_h)):
            object.__setattr__(self, name, value)

    @property
    def gates(self) -> tuple[str, ...]:
        return GATES[self.cell]

    @property
    def hidden_size(self) -> int:
        return self.W_h.shape[1]

    @property
    def input_size(self) -> int:
        return self.W_x.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self.W_x.dtype

    def gate(self, tensor: np.ndarray, name: str) -> np.ndarray:
        """Rows (or entries) of one gate of a stacked tensor, by gate name."""
        H = self.hidden_size
        k = self.gates.index(name)
        return tensor[k * H:(k + 1) * H]

    def astype(self, dtype) -> "GatedParams":
        return GatedParams(self.cell, *(t.astype(dtype) for t in (self.W_x, self.W_h, self.b_x, self.b_h)))

    def replace(self, **tensors) -> "GatedParams":
        fields = {"W_x": self.W_x, "W_h": self.W_h, "b_x": self.b_x, "b_h": self.b_h, **tensors}
        return GatedParams(self.cell, **fields)

    @classmethod
    def random(cls, cell: str, input_size: int, hidden_size: int, seed, dtype=np.float64) -> "GatedParams":
        """Seeded, every value distinct and exactly a float32, biases non-zero (b_hn included),
        each gate at its own scale (``GATE_SCALES``)."""
        rng = np.random.default_rng(seed)
        G, H, I = len(GATES[cell]), hidden_size, input_size
        scale = np.repeat(GATE_SCALES[cell], H)[:, None]
        while True:
            W_x = rng.uniform(-1, 1, (G * H, I)) / np.sqrt(I) * scale
            W_h = rng.uniform(-1, 1, (G * H, H)) * (1.6 / H) * scale
            b_x = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            b_h = rng.uniform(0.05, 0.5, G * H) * rng.choice([-1, 1], G * H)
            values = [t.astype(np.float32) for t in (W_x, W_h, b_x, b_h)]
            flat = np.concatenate([v.ravel() for v in values])
            if np.unique(np.abs(flat)).size == flat.size:
                return cls(cell, *(v.astype(dtype) for v in values))


def lstm_step(p: GatedParams, x, h, c):
    """One LSTM step on columns: x (I, batch), h and c (H, batch) -> (h', c')."""
    a = p.W_x @ x + p.b_x[:, None] + p.W_h @ h + p.b_h[:, None]
    a_i, a_f, a_g, a_o = np.split(a, 4)  # PyTorch's order: input, forget, cell candidate, output
    i, f, g, o = sigmoid(a_i), sigmoid(a_f), tanh(a_g), sigmoid(a_o)
    c_next = f * c + i * g
    return o * tanh(c_next), c_next


def gru_step(p: GatedParams, x, h, variant: str = "reset_after"):
    """One GRU step on columns: x (I, batch), h (H, batch) -> h'."""
    if variant not in GRU_VARIANTS:
        raise ValueError(f"unknown GRU variant {variant!r}; expected one of {GRU_VARIANTS}")
    a_x = p.W_x @ x + p.b_x[:, None]
    a_xr, a_xz, a_xn = np.split(a_x, 3)  # PyTorch's order: reset, update, new
    W_hr, W_hz, W_hn = np.split(p.W_h, 3)
    b_hr, b_hz, b_hn = (b[:, None] for b in np.split(p.b_h, 3))
    r = sigmoid(a_xr + W_hr @ h + b_hr)
    z = sigmoid(a_xz + W_hz @ h + b_hz)
    if variant == "reset_after":
        n = tanh(a_xn + r * (W_hn @ h + b_hn))
    else:
        n = tanh(a_xn + W_hn @ (r * h) + b_hn)
    return (1 - z) * n + z * h


def _check(p: GatedParams, xs, state, name):
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != p.input_size:
        raise ValueError(f"xs: expected shape (T, batch, I) with I={p.input_size}, got {xs.shape}")
    if xs.dtype != p.dtype:
        raise TypeError(f"xs: expected dtype {p.dtype} (the parameters' dtype), got {xs.dtype}")
    if state is None:
        return xs, np.zeros((xs.shape[1], p.hidden_size), p.dtype)
    state = np.asarray(state)
    if state.shape != (xs.shape[1], p.hidden_size) or state.dtype != p.dtype:
        raise ValueError(f"{name}: expected shape (batch, H) = ({xs.shape[1]}, {p.hidden_size}) and dtype "
                         f"{p.dtype}, got {state.shape} {state.dtype}")
    return xs, state


def lstm_sequence(p: GatedParams, xs, h0=None, c0=None):
    """Every (h_t, c_t) over ``xs`` (T, batch, I): two arrays of shape (T, batch, H)."""
    xs, h0 = _check(p, xs, h0, "h0")
    _, c0 = _check(p, xs, c0, "c0")
    h, c, hs, cs = h0.T, c0.T, [], []
    for x in xs:
        h, c = lstm_step(p, x.T, h, c)
        hs.append(h.T)
        cs.append(c.T)
    return np.stack(hs), np.stack(cs)


def gru_sequence(p: GatedParams, xs, h0=None, variant: str = "reset_after"):
    """Every h_t over ``xs`` (T, batch, I): shape (T, batch, H)."""
    xs, h0 = _check(p, xs, h0, "h0")
    h, hs = h0.T, []
    for x in xs:
        h = gru_step(p, x.T, h, variant)
        hs.append(h.T)
    return np.stack(hs)


def gated_stack(layers, xs, h0=None, c0=None, variant: str = "reset_after"):
    """Stacked, optionally bidirectional LSTM or GRU, with ``reference.stack``'s conventions.

    ``layers[k][d]`` are the GatedParams of layer k, direction d; ``h0``/``c0`` are
    (L*D, batch, H) or None. Returns ``(outputs (T, batch, D*H), h_n, c_n)``, c_n None for a GRU.
    """
    xs = np.asarray(xs)
    D, lstm = len(layers[0]), layers[0][0].cell == "lstm"
    layer_input, h_n, c_n = xs, [], []
    for k, layer in enumerate(layers):
        outputs = []
        for d, p in enumerate(layer):
            order = slice(None) if d == 0 else slice(None, None, -1)  # backward: read reversed, report in order
            h_init = None if h0 is None else h0[k * D + d]
            if lstm:
                hs, cs = lstm_sequence(p, layer_input[order], h_init, None if c0 is None else c0[k * D + d])
                hs, cs = hs[order], cs[order]
                c_n.append(cs[-1] if d == 0 else cs[0])
            else:
                hs = gru_sequence(p, layer_input[order], h_init, variant)[order]
            outputs.append(hs)
            h_n.append(hs[-1] if d == 0 else hs[0])
        layer_input = np.concatenate(outputs, axis=-1)
    return layer_input, np.stack(h_n), (np.stack(c_n) if lstm else None)
