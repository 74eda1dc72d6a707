"""The floating-point error model behind every tolerance in the suite.

This is the one place where tolerances are defined. A comparison is allowed
exactly the error this model bounds, elementwise, and the measured error is
reported as a fraction of that bound.

Model (standard rounding-error analysis, Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., ch. 3). Let u be the unit roundoff of the
arithmetic (2**-24 for float32, 2**-53 for float64) and

    gamma_n = n u / (1 - n u).

One RNN step computes the pre-activation

    z_t = W_hh h_{t-1} + W_hx x_t + b_x + b_h,

a sum of n = H + I + 2 terms (H + I products, two biases). Computed in
floating point in *any* order, blocked or not, with or without fused
multiply-adds, and with the two biases added first or last, the result obeys

    |fl(z_t) - z_t| <= gamma_n * S_t,   S_t = |W_hh| |h_{t-1}| + |W_hx| |x_t| + |b_x| + |b_h|.

This is why one bound serves both formulas and every framework: the
concatenated kernel W_h [h; x] and the split W_hh h + W_hx x add the same n
terms, in different orders.

Errors carry over from step to step: the framework feeds its own computed
state back in, off by e_{t-1}, so

    e_z(t) = gamma_n * S_t + |W_hh| e_{t-1}        (S_t taken at |h_{t-1}| + e_{t-1})

and the activation g turns that into a state error

    e_t = L_t * e_z(t) + k_g * eps.

L_t is the largest slope |g'| on [z_t - e_z(t), z_t + e_z(t)] (exact, not a
first-order estimate: see ``reference.activations.max_slope``). eps = 2u is
one ulp at 1.0, and k_g is the accuracy we assume of the library's g:
k_g = 4 ulps for tanh and sigmoid, absolute, because |g| <= 1 and some
implementations (sigmoid as (1 + tanh(z/2)) / 2, rational approximations in
Eigen) are accurate in absolute rather than relative terms; k_g = 0 for relu
and identity, which round nothing beyond the sum. The inputs and weights are
exact float32 values (see ``RNNParams.random``), so no rounding of the data
enters.

The bound is a worst case; typical errors grow like sqrt(n) u, not n u, so
measured ratios of 0.01 to 0.1 are normal. What matters is that a wrong
weight mapping changes h by O(0.1 to 1), four or more orders of magnitude
above any bound here, and that a correct one never exceeds it.

Stacked layers (``stack_error_bound``) read the layer below's computed
outputs, so that layer's bound enters the next as an input error, through
|W_hx| exactly as the state error enters through |W_hh|.

Comparing two computed results, each has its own error, so the allowed
difference is the sum of both bounds (``pair_bound``); against the float64
reference that adds the (tiny) float64 bound.
"""

from __future__ import annotations

import numpy as np

from reference.activations import activation, max_slope
from reference.params import RNNParams
from reference.rnn import rnn_sequence

UNIT_ROUNDOFF = {
    "float32": 2.0**-24,
    "float64": 2.0**-53,
}

# Assumed accuracy of the library activations, in ulps of 1.0 (see above).
ACTIVATION_ULPS = {"tanh": 4, "sigmoid": 4, "relu": 0, "identity": 0}


def gamma(n: int, u: float) -> float:
    """gamma_n = n u / (1 - n u): the relative error bound of an n-term sum or dot product."""
    if n * u >= 1:
        raise ValueError(f"gamma_n is undefined for n u >= 1 (n={n}, u={u})")
    return n * u / (1 - n * u)


def error_bound(params: RNNParams, xs, h0, g: str, dtype: str, input_error=None) -> np.ndarray:
    """Elementwise bound on |h_t computed in ``dtype`` - exact h_t|, shape (T, batch, H).

    ``params``, ``xs`` and ``h0`` are the exact data (converted to float64 here;
    the bound itself is evaluated in float64, whose own rounding is orders
    of magnitude below the float32 terms it bounds). ``input_error`` bounds
    an error already in the inputs, as when a stacked layer reads the
    computed outputs of the layer below; it enters like the state error,
    through |W_hx|.
    """
    u = UNIT_ROUNDOFF[dtype]
    eps = 2 * u
    p = params.astype(np.float64)
    xs = np.asarray(xs, np.float64)
    x_errors = np.zeros_like(xs) if input_error is None else np.asarray(input_error, np.float64)
    h = np.asarray(h0, np.float64).T  # columns, as in the reference
    n = p.input_size + p.hidden_size + 2
    gamma_n = gamma(n, u)
    abs_W_hh, abs_W_hx = np.abs(p.W_hh), np.abs(p.W_hx)
    abs_b = 0.0 if p.b_x is None else (np.abs(p.b_x) + np.abs(p.b_h))[:, None]
    b = 0.0 if p.b_x is None else p.b[:, None]
    g_fn = activation(g)
    e = np.zeros_like(h)
    bounds = []
    for x, e_x in zip(xs, x_errors):
        x, e_x = x.T, e_x.T
        z = p.W_hh @ h + p.W_hx @ x + b
        S = abs_W_hh @ (np.abs(h) + e) + abs_W_hx @ (np.abs(x) + e_x) + abs_b
        e_z = gamma_n * S + abs_W_hh @ e + abs_W_hx @ e_x
        e = max_slope(g, z - e_z, z + e_z) * e_z + ACTIVATION_ULPS[g] * eps
        h = g_fn(z)
        bounds.append(e.T)
    return np.stack(bounds)


def stack_error_bound(stack, xs, h0, g: str, dtype: str):
    """Bounds for ``reference.stack.rnn_stack``: (outputs (T, batch, D*H), h_n (L*D, batch, H)).

    Each layer reads the layer below's computed outputs, so their bound is
    this layer's input error. A backward direction is the forward bound on
    the time-reversed sequence, put back in time order, as in the reference.
    """
    xs = np.asarray(xs, np.float64)
    D = stack.num_directions
    if h0 is None:
        h0 = np.zeros((stack.num_layers * D, xs.shape[1], stack.hidden_size))
    h0 = np.asarray(h0, np.float64)
    layer_input, input_error, finals = xs, np.zeros_like(xs), []
    for k, layer in enumerate(stack.layers):
        values, errors = [], []
        for d, params in enumerate(layer):
            order = slice(None) if d == 0 else slice(None, None, -1)
            hs = rnn_sequence(params.astype(np.float64), layer_input[order], h0[k * D + d], g)[order]
            bound = error_bound(params, layer_input[order], h0[k * D + d], g, dtype, input_error[order])[order]
            values.append(hs)
            errors.append(bound)
            finals.append(bound[-1] if d == 0 else bound[0])
        layer_input, input_error = np.concatenate(values, axis=-1), np.concatenate(errors, axis=-1)
    return input_error, np.stack(finals)


def pair_bound(bound_a: np.ndarray, bound_b: np.ndarray) -> np.ndarray:
    """Allowed |a - b| when a and b each lie within their own bound of the exact result."""
    return bound_a + bound_b
