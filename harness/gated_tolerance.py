"""Error bounds for the gated cells, built from the model in ``harness.tolerance``.

The same three rules as for the vanilla cell, applied operation by operation:

- a sum of n terms (a dot product with its biases), in any order: error at most
  gamma_n * sum |terms|, plus the error already in its inputs, through |W|;
- an activation: its largest slope on the error interval times the input
  error, plus ACTIVATION_ULPS[g] ulps of 1.0 for its own rounding;
- a product or sum of two computed values a, b with errors e_a, e_b:
  |a| e_b + |b| e_a + e_a e_b (product) or e_a + e_b (sum), plus one
  rounding, u * (|result| + the propagated error).

``Approx`` carries an exact value (float64, from the exact data) and a bound on
the computed value's distance from it; the bound functions below read like the
reference in ``reference.gated``, one line per operation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.tolerance import ACTIVATION_ULPS, UNIT_ROUNDOFF, gamma
from reference.activations import activation, max_slope
from reference.gated import GatedParams


@dataclass(frozen=True)
class Approx:
    value: np.ndarray  # the exact value
    error: np.ndarray  # bound on |computed - exact|

    @property
    def magnitude(self) -> np.ndarray:
        """Bound on |computed|."""
        return np.abs(self.value) + self.error


class Arithmetic:
    """Operations on ``Approx`` values for arithmetic with unit roundoff u."""

    def __init__(self, dtype: str):
        self.u = UNIT_ROUNDOFF[dtype]

    def exact(self, value) -> Approx:
        value = np.asarray(value, np.float64)
        return Approx(value, np.zeros_like(value))

    def affine(self, products, biases) -> Approx:
        """sum_k W_k x_k + sum biases, as one sum of n terms in any order."""
        n = sum(W.shape[1] for W, _ in products) + len(biases)
        value = sum(W @ x.value for W, x in products) + sum(b[:, None] for b in biases)
        magnitude = sum(np.abs(W) @ x.magnitude for W, x in products) + sum(np.abs(b)[:, None] for b in biases)
        propagated = sum(np.abs(W) @ x.error for W, x in products)
        return Approx(value, gamma(n, self.u) * magnitude + propagated)

    def act(self, g: str, a: Approx) -> Approx:
        slope = max_slope(g, a.value - a.error, a.value + a.error)
        return Approx(activation(g)(a.value), slope * a.error + ACTIVATION_ULPS[g] * 2 * self.u)

    def mul(self, a: Approx, b: Approx) -> Approx:
        error = np.abs(a.value) * b.error + np.abs(b.value) * a.error + a.error * b.error
        return Approx(a.value * b.value, error + self.u * (np.abs(a.value * b.value) + error))

    def add(self, a: Approx, b: Approx, sign: float = 1.0) -> Approx:
        error = a.error + b.error
        value = a.value + sign * b.value
        return Approx(value, error + self.u * (np.abs(value) + error))

    def one_minus(self, a: Approx) -> Approx:
        return self.add(self.exact(np.ones_like(a.value)), a, sign=-1.0)


def lstm_bound(p: GatedParams, xs, h0, c0, dtype: str, forget_bias: float = 0.0, input_error=None):
    """Bounds on |computed h_t - exact h_t| and the same for c_t, each (T, batch, H).

    ``forget_bias``: a constant the cell adds to the f gate in its forward pass (TF1),
    which the mapping folds out of the stored bias: two more roundings in that sum,
    counted as two more terms of magnitude |forget_bias|.
    """
    ar = Arithmetic(dtype)
    p = p.astype(np.float64)
    h, c = ar.exact(np.asarray(h0, np.float64).T), ar.exact(np.asarray(c0, np.float64).T)
    W_x, W_h = np.split(p.W_x, 4), np.split(p.W_h, 4)
    b_x, b_h = np.split(p.b_x, 4), np.split(p.b_h, 4)
    h_bounds, c_bounds = [], []
    xs = np.asarray(xs, np.float64)
    for x, e_x in zip(xs, np.zeros_like(xs) if input_error is None else np.asarray(input_error)):
        x = Approx(x.T, e_x.T)
        folded = [np.full_like(b_x[1], forget_bias), np.full_like(b_x[1], -forget_bias)] if forget_bias else []
        a = [ar.affine([(W_x[k], x), (W_h[k], h)], [b_x[k], b_h[k]] + (folded if k == 1 else [])) for k in range(4)]
        i, f, g, o = ar.act("sigmoid", a[0]), ar.act("sigmoid", a[1]), ar.act("tanh", a[2]), ar.act("sigmoid", a[3])
        c = ar.add(ar.mul(f, c), ar.mul(i, g))
        h = ar.mul(o, ar.act("tanh", c))
        h_bounds.append(h.error.T)
        c_bounds.append(c.error.T)
    return np.stack(h_bounds), np.stack(c_bounds)


def gru_bound(p: GatedParams, xs, h0, dtype: str, variant: str = "reset_after", input_error=None):
    """Bound on |computed h_t - exact h_t|, (T, batch, H).

    The update is written (1 - z) n + z h (PyTorch's docs, Keras) or n + z (h - n)
    (PyTorch's fused kernel); the bound covers both.
    """
    ar = Arithmetic(dtype)
    p = p.astype(np.float64)
    h = ar.exact(np.asarray(h0, np.float64).T)
    (W_xr, W_xz, W_xn), (W_hr, W_hz, W_hn) = np.split(p.W_x, 3), np.split(p.W_h, 3)
    (b_xr, b_xz, b_xn), (b_hr, b_hz, b_hn) = np.split(p.b_x, 3), np.split(p.b_h, 3)
    bounds = []
    xs = np.asarray(xs, np.float64)
    for x, e_x in zip(xs, np.zeros_like(xs) if input_error is None else np.asarray(input_error)):
        x = Approx(x.T, e_x.T)
        r = ar.act("sigmoid", ar.affine([(W_xr, x), (W_hr, h)], [b_xr, b_hr]))
        z = ar.act("sigmoid", ar.affine([(W_xz, x), (W_hz, h)], [b_xz, b_hz]))
        if variant == "reset_after":
            inner = ar.mul(r, ar.affine([(W_hn, h)], [b_hn]))
            n = ar.act("tanh", ar.add(ar.affine([(W_xn, x)], [b_xn]), inner))
        else:
            n = ar.act("tanh", ar.affine([(W_xn, x), (W_hn, ar.mul(r, h))], [b_xn, b_hn]))
        h_next = ar.add(ar.mul(ar.one_minus(z), n), ar.mul(z, h))
        # Another order of the same update, n + z (h - n), propagates errors in n, z and h
        # alike (same function, same derivatives) but rounds other intermediates: allow
        # three more roundings of the largest of them.
        other_order = 3 * ar.u * (np.abs(n.value) + np.abs(h.value) + np.abs(z.value * (h.value - n.value)))
        h = Approx(h_next.value, h_next.error + other_order)
        bounds.append(h.error.T)
    return np.stack(bounds)


def gated_stack_bound(layers, xs, h0, c0, dtype: str, variant: str = "reset_after"):
    """Bounds for ``reference.gated.gated_stack``: (outputs, h_n, c_n or None); each layer's
    output bound enters the next layer as its input error."""
    from reference.gated import gated_stack

    xs = np.asarray(xs, np.float64)
    D, lstm = len(layers[0]), layers[0][0].cell == "lstm"
    batch, H = xs.shape[1], layers[0][0].hidden_size
    h0 = np.zeros((len(layers) * D, batch, H)) if h0 is None else np.asarray(h0, np.float64)
    c0 = np.zeros_like(h0) if c0 is None else np.asarray(c0, np.float64)
    layer_input, input_error, h_n, c_n = xs, np.zeros_like(xs), [], []
    for k, layer in enumerate(layers):
        values, errors = [], []
        for d, p in enumerate(layer):
            order = slice(None) if d == 0 else slice(None, None, -1)
            p64 = p.astype(np.float64)
            if lstm:
                e_h, e_c = lstm_bound(p64, layer_input[order], h0[k * D + d], c0[k * D + d], dtype,
                                      input_error=input_error[order])
                e_h, e_c = e_h[order], e_c[order]
                c_n.append(e_c[-1] if d == 0 else e_c[0])
            else:
                e_h = gru_bound(p64, layer_input[order], h0[k * D + d], dtype, variant, input_error[order])[order]
            values.append(gated_stack([[p64]], layer_input[order], h0[k * D + d][None],
                                      c0[k * D + d][None] if lstm else None, variant)[0][order])
            errors.append(e_h)
            h_n.append(e_h[-1] if d == 0 else e_h[0])
        layer_input, input_error = np.concatenate(values, axis=-1), np.concatenate(errors, axis=-1)
    return input_error, np.stack(h_n), (np.stack(c_n) if lstm else None)
