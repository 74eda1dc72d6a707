"""Gated cells in NumPy: LSTM, and GRU in both of its variants, with their options.

The equations are written once, in ``rnn_equivalence.reference.equations`` (where they are stated in full, with the
canonical layout); here they are evaluated in plain NumPy (``Exact``), in the parameters' dtype, on
columns like the lecture's formulas: x (I, batch), h (H or P, batch), c (H, batch).
"""

from __future__ import annotations

from rnn_equivalence.reference.equations import Exact, gru_step as _gru, lstm_step as _lstm
from rnn_equivalence.reference.params import CellParams


def clip(value, threshold):
    """``value`` clipped to [-threshold, threshold]; unchanged for threshold None."""
    return Exact().clip(value, threshold)


def lstm_step(p: CellParams, x, h, c):
    """One LSTM step on columns: x (I, batch), h (P or H, batch), c (H, batch) -> (h', c')."""
    state, _ = _lstm(Exact(p.dtype), p, x, {"h": h, "c": c})
    return state["h"], state["c"]


def gru_step(p: CellParams, x, h):
    """One GRU step on columns, in the cell's variant: x (I, batch), h (H, batch) -> h'."""
    state, _ = _gru(Exact(p.dtype), p, x, {"h": h})
    return state["h"]
