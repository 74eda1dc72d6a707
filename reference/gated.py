"""Gated cells in NumPy: LSTM, and GRU in both of its variants, with their options.

Canonical layout (``reference.params``):

    LSTM: gates i, f, g, o stacked in that order; W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
    GRU:  gates r, z, n stacked in that order;    W_x (3H, I), W_h (3H, H), b_x, b_h (3H)

Equations, column vectors (one column per batch element); sigma, tanh, tanh are
the default activations f, g, h (``CellParams.gate_activations``: Keras's
``recurrent_activation`` is f, its ``activation`` g and h; ONNX's ``activations``
list them in this order):

    LSTM  i = f(W_xi x + b_xi + W_hi h + b_hi + p_i * c)      (p_i * c: peepholes only)
          f = f(W_xf x + b_xf + W_hf h + b_hf + p_f * c)      or 1 - i (coupled gates)
          g = g(W_xg x + b_xg + W_hg h + b_hg)
          c' = f * c + i * g,  then clipped to +-cell_clip     (TF1 cell_clip)
          o = f(W_xo x + b_xo + W_ho h + b_ho + p_o * c')     (o's peephole reads the new c)
          h' = o * h(c'),  then W_proj h' clipped to +-proj_clip (projection: h has P units)

    GRU   r = f(W_xr x + b_xr + W_hr h + b_hr)       z likewise
          reset after  (PyTorch, Keras reset_after=True, ONNX linear_before_reset=1):
              n = g(W_xn x + b_xn + r * (W_hn h + b_hn))
          reset before (Keras reset_after=False, TF1 GRUCell, ONNX default):
              n = g(W_xn x + b_xn + W_hn (r * h) + b_hn)
          h' = (1 - z) * n + z * h

With ``gate_clip`` (ONNX ``clip``: "applied to the input of activations") every
argument of f, g and h above is clipped to +-gate_clip before the activation, c' on
its way into h(c') included, while the state c' itself is kept as it is. TF1's
``cell_clip`` clips the state c itself: a different function
(tests/equivalence/test_non_equivalence.py). ONNX Runtime clips the arguments of f
and g but not c' before h (microsoft/onnxruntime#27224): a strict expected failure.

The two GRU variants are different functions: r multiplies W_hn h + b_hn in one
and h alone in the other. They coincide for all inputs only when W_hn is
diagonal and b_hn is zero, so no weight mapping turns one into the other in
general. The tests prove the difference on random weights.
"""

from __future__ import annotations

import numpy as np

from reference.activations import activation
from reference.params import CellParams


def _column(b):
    """A bias as a column, or 0 for a cell without biases."""
    return 0.0 if b is None else b[:, None]


def clip(value, threshold):
    """``value`` clipped to [-threshold, threshold]; unchanged for threshold None."""
    return value if threshold is None else np.clip(value, -threshold, threshold)


def lstm_step(p: CellParams, x, h, c):
    """One LSTM step on columns: x (I, batch), h (P or H, batch), c (H, batch) -> (h', c')."""
    f_act, g_act, h_act = (activation(name) for name in p.gate_activations)
    a = p.W_x @ x + _column(p.b_x) + p.W_h @ h + _column(p.b_h)
    a_i, a_f, a_g, a_o = np.split(a, 4)  # PyTorch's order: input, forget, cell candidate, output
    if p.peepholes is not None:
        p_i, p_f, p_o = np.split(p.peepholes[:, None], 3)
        a_i, a_f = a_i + p_i * c, a_f + p_f * c
    i, g = f_act(clip(a_i, p.gate_clip)), g_act(clip(a_g, p.gate_clip))
    f = 1 - i if p.coupled_gates else f_act(clip(a_f, p.gate_clip))
    c_next = clip(f * c + i * g, p.cell_clip)
    if p.peepholes is not None:
        a_o = a_o + p_o * c_next
    h_next = f_act(clip(a_o, p.gate_clip)) * h_act(clip(c_next, p.gate_clip))  # c itself is kept unclipped
    if p.W_proj is not None:
        h_next = clip(p.W_proj @ h_next, p.proj_clip)
    return h_next, c_next


def gru_step(p: CellParams, x, h):
    """One GRU step on columns, in the cell's variant: x (I, batch), h (H, batch) -> h'."""
    f_act, g_act = (activation(name) for name in p.gate_activations)
    a_x = p.W_x @ x + _column(p.b_x)
    a_xr, a_xz, a_xn = np.split(a_x, 3)  # PyTorch's order: reset, update, new
    W_hr, W_hz, W_hn = np.split(p.W_h, 3)
    b_hr, b_hz, b_hn = np.split(np.zeros(p.W_h.shape[0], p.dtype) if p.b_h is None else p.b_h, 3)
    b_hr, b_hz, b_hn = b_hr[:, None], b_hz[:, None], b_hn[:, None]
    r = f_act(clip(a_xr + W_hr @ h + b_hr, p.gate_clip))
    z = f_act(clip(a_xz + W_hz @ h + b_hz, p.gate_clip))
    if p.variant == "reset_after":
        n = g_act(clip(a_xn + r * (W_hn @ h + b_hn), p.gate_clip))
    else:
        n = g_act(clip(a_xn + W_hn @ (r * h) + b_hn, p.gate_clip))
    return (1 - z) * n + z * h
