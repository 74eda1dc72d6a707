"""The lecture's two formulas for a vanilla RNN, in NumPy.

Formula 1, one concatenated kernel:

    h_t = g(W_h [h_{t-1}; x_t] + b),     W_h = [W_hh | W_hx]

Formula 2, two kernels:

    h_t = g(W_hh h_{t-1} + W_hx x_t + b)

The step functions use the lecture's convention, column vectors: ``h_prev``
is (H, batch) and ``x`` is (I, batch), one column per batch element. The
sequence function takes the batch-first arrays that frameworks use, (T, batch,
I) and (batch, H), and transposes at the boundary.

These are the one-gate case of the family in ``rnn_equivalence.reference.cells``: the
reference runs formula 2 (``split_step``) for every vanilla cell.

Arithmetic happens in the dtype of the arguments, so the same code serves as
the float64 reference and as a float32 NumPy implementation.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.params import CellParams, check_sequence

FORMULAS = ("concatenated", "split")


def concatenate_kernels(W_hh: np.ndarray, W_hx: np.ndarray) -> np.ndarray:
    """W_h = [W_hh | W_hx]: side by side, hidden columns first, as in the lecture."""
    return np.hstack([W_hh, W_hx])


def concatenated_step(W_h, h_prev, x, b=None, g="tanh"):
    """Formula 1: h_t = g(W_h [h_{t-1}; x_t] + b)."""
    h_and_x = np.vstack([h_prev, x])  # [h_{t-1}; x_t]: state rows on top
    z = W_h @ h_and_x
    if b is not None:
        z = z + b[:, None]
    return activation(g)(z)


def split_step(W_hh, W_hx, h_prev, x, b=None, g="tanh"):
    """Formula 2: h_t = g(W_hh h_{t-1} + W_hx x_t + b)."""
    z = W_hh @ h_prev + W_hx @ x
    if b is not None:
        z = z + b[:, None]
    return activation(g)(z)


def rnn_sequence(params: CellParams, xs, h0=None, formula="split") -> np.ndarray:
    """Run T steps of a vanilla cell from ``h0`` (batch, H) (zeros if None); every h_t as (T, batch, H).

    ``xs`` is (T, batch, I); ``formula`` is "concatenated" or "split"; g is the cell's activation.
    """
    if formula not in FORMULAS:
        raise ValueError(f"unknown formula {formula!r}; expected one of {FORMULAS}")
    if params.family != "rnn":
        raise ValueError(f"the lecture's formulas are a vanilla RNN's; got a {params.family} cell")
    xs, state = check_sequence(params, xs, None if h0 is None else {"h": h0})
    b, g = params.b, params.activation  # the lecture's single bias, b = b_x + b_h
    W_h = concatenate_kernels(params.W_hh, params.W_hx)
    h = state["h"].T  # columns from here on, as in the lecture
    outputs = []
    for x in xs:
        if formula == "concatenated":
            h = concatenated_step(W_h, h, x.T, b, g)
        else:
            h = split_step(params.W_hh, params.W_hx, h, x.T, b, g)
        outputs.append(h.T)
    return np.stack(outputs)
