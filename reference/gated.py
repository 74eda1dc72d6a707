"""Gated cells in NumPy: LSTM, and GRU in both of its variants.

Canonical layout (``reference.params``):

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

import numpy as np

from reference.activations import activation
from reference.params import CellParams

sigmoid, tanh = activation("sigmoid"), activation("tanh")


def _column(b):
    """A bias as a column, or 0 for a cell without biases."""
    return 0.0 if b is None else b[:, None]


def lstm_step(p: CellParams, x, h, c):
    """One LSTM step on columns: x (I, batch), h and c (H, batch) -> (h', c')."""
    a = p.W_x @ x + _column(p.b_x) + p.W_h @ h + _column(p.b_h)
    a_i, a_f, a_g, a_o = np.split(a, 4)  # PyTorch's order: input, forget, cell candidate, output
    i, f, g, o = sigmoid(a_i), sigmoid(a_f), tanh(a_g), sigmoid(a_o)
    c_next = f * c + i * g
    return o * tanh(c_next), c_next


def gru_step(p: CellParams, x, h):
    """One GRU step on columns, in the cell's variant: x (I, batch), h (H, batch) -> h'."""
    a_x = p.W_x @ x + _column(p.b_x)
    a_xr, a_xz, a_xn = np.split(a_x, 3)  # PyTorch's order: reset, update, new
    W_hr, W_hz, W_hn = np.split(p.W_h, 3)
    b_hr, b_hz, b_hn = np.split(np.zeros(p.W_h.shape[0], p.dtype) if p.b_h is None else p.b_h, 3)
    b_hr, b_hz, b_hn = b_hr[:, None], b_hz[:, None], b_hn[:, None]
    r = sigmoid(a_xr + W_hr @ h + b_hr)
    z = sigmoid(a_xz + W_hz @ h + b_hz)
    if p.variant == "reset_after":
        n = tanh(a_xn + r * (W_hn @ h + b_hn))
    else:
        n = tanh(a_xn + W_hn @ (r * h) + b_hn)
    return (1 - z) * n + z * h
