"""The lecture's two formulas for a vanilla RNN, in NumPy.

Formula 1, one concatenated kernel:

    h_t = g(W_h [h_{t-1}; x_t] + b),     W_h = [W_hh | W_hx]

Formula 2, two kernels:

    h_t = g(W_hh h_{t-1} + W_hx x_t + b)

The step functions use the lecture's convention, column vectors: ``h_prev``
is (H, batch) and ``x`` is (I, batch), one column per batch element. The
sequence functions take the batch-first arrays that frameworks use, (T, batch,
I) and (batch, H), and transpose at the boundary.

Arithmetic happens in the dtype of the arguments, so the same code serves as
the float64 reference and as a float32 NumPy implementation.
"""

from __future__ import annotations

import numpy as np

from reference.activations import activation
from reference.params import RNNParams

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


def _check_sequence(params: RNNParams, xs, h0):
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != params.input_size:
        raise ValueError(
            f"xs: expected shape (T, batch, I) with I={params.input_size}, got {xs.shape}"
        )
    if xs.dtype != params.dtype:
        raise TypeError(f"xs: expected dtype {params.dtype} (the parameters' dtype), got {xs.dtype}")
    batch = xs.shape[1]
    if h0 is None:
        return xs, np.zeros((batch, params.hidden_size), params.dtype)
    h0 = np.asarray(h0)
    if h0.shape != (batch, params.hidden_size):
        raise ValueError(f"h0: expected shape (batch, H) = ({batch}, {params.hidden_size}), got {h0.shape}")
    if h0.dtype != params.dtype:
        raise TypeError(f"h0: expected dtype {params.dtype} (the parameters' dtype), got {h0.dtype}")
    return xs, h0


def rnn_sequence(params: RNNParams, xs, h0=None, g="tanh", formula="split") -> np.ndarray:
    """Run T steps from ``h0`` (zeros if None); return every h_t as (T, batch, H).

    ``xs`` is (T, batch, I); ``formula`` is "concatenated" or "split".
    """
    if formula not in FORMULAS:
        raise ValueError(f"unknown formula {formula!r}; expected one of {FORMULAS}")
    xs, h0 = _check_sequence(params, xs, h0)
    b = params.b  # the lecture's single bias, b = b_x + b_h
    W_h = concatenate_kernels(params.W_hh, params.W_hx)
    h = h0.T  # columns from here on, as in the lecture
    outputs = []
    for x in xs:
        if formula == "concatenated":
            h = concatenated_step(W_h, h, x.T, b, g)
        else:
            h = split_step(params.W_hh, params.W_hx, h, x.T, b, g)
        outputs.append(h.T)
    return np.stack(outputs)


def rnn_step(params: RNNParams, x, h_prev=None, g="tanh", formula="split") -> np.ndarray:
    """One step on batch-first arrays: ``x`` (batch, I), ``h_prev`` (batch, H) -> (batch, H)."""
    return rnn_sequence(params, np.asarray(x)[None], h_prev, g, formula)[0]
