"""The activations g the suite compares, in NumPy, by name.

Each activation also knows the largest slope it can have on an interval,
which the error model in ``rnn_equivalence.reference.tolerance`` needs to carry an error in the
pre-activation through g.

Two functions go by the name "hard_sigmoid", and the names here keep them apart:

    hard_sigmoid_0.2    clip(0.2 z + 0.5, 0, 1)   Keras 2 (tf_keras), ONNX HardSigmoid's
                                                  defaults (alpha 0.2, beta 0.5), Theano
    hard_sigmoid_relu6  relu6(z + 3) / 6          Keras 3, jax.nn.hard_sigmoid,
                        = clip(z / 6 + 0.5, 0, 1)  torch.nn.Hardsigmoid

Keras 2 used "hard_sigmoid" as the default recurrent activation of LSTM and GRU
before 2.3: such a model rebuilt in Keras 3 under the same name computes the
second function (tests/equivalence/test_non_equivalence.py measures it).
"""

from __future__ import annotations

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # tanh form: no overflow for large |z|, unlike 1 / (1 + exp(-z)).
    return 0.5 * (1.0 + np.tanh(0.5 * z))


# Piecewise-linear sigmoids clip(a z + b, 0, 1), by name: (a, b).
HARD_SIGMOIDS = {"hard_sigmoid_0.2": (0.2, 0.5), "hard_sigmoid_relu6": (1.0 / 6.0, 0.5)}


def _hard_sigmoid(a: float, b: float):
    return lambda z: np.clip(a * z + b, 0.0, 1.0).astype(z.dtype, copy=False)


ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, 0.0).astype(z.dtype, copy=False),
    "sigmoid": _sigmoid,
    "identity": lambda z: z,
    **{name: _hard_sigmoid(a, b) for name, (a, b) in HARD_SIGMOIDS.items()},
}


def activation(name: str):
    """The NumPy function for an activation name, or a ValueError listing the known names."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}"
        ) from None


# The width of each bounded activation's range (tanh: [-1, 1]; the sigmoids: [0, 1]): two values of g
# are never further apart, whatever their arguments. relu and identity are unbounded.
RANGE_WIDTHS = {"tanh": 2.0, "sigmoid": 1.0, **{name: 1.0 for name in HARD_SIGMOIDS}}


def max_slope(name: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Largest |g'(z)| over z in [lo, hi], elementwise (for a piecewise-linear g, its largest
    difference quotient there, which is what carrying an error through g needs).

    tanh' and sigmoid' peak at 0 and fall off monotonically on either side, so
    the maximum sits at the point of the interval nearest to 0. A hard sigmoid has
    slope a on its linear piece (-b/a, (1-b)/a) and 0 where it is clipped: a if the
    interval reaches into the linear piece, else 0 (a breakpoint inside the interval
    costs nothing more, the function being a-Lipschitz).
    """
    nearest_zero = np.clip(0.0, lo, hi)
    if name == "tanh":
        return 1.0 - np.tanh(nearest_zero) ** 2
    if name == "sigmoid":
        s = _sigmoid(nearest_zero)
        return s * (1.0 - s)
    if name == "relu":
        return (hi > 0).astype(np.float64)
    if name == "identity":
        return np.ones_like(lo, dtype=np.float64)
    if name in HARD_SIGMOIDS:
        a, b = HARD_SIGMOIDS[name]
        return np.where((hi > -b / a) & (lo < (1 - b) / a), a, 0.0)
    activation(name)  # raises the error that lists the known names
    raise AssertionError("unreachable")


# --- derivatives, for the backward pass (rnn_equivalence.reference.backward) --------------------------------------
def _hard_sigmoid_slope(a: float, b: float):
    return lambda z: np.where((z > -b / a) & (z < (1 - b) / a), a, 0.0)


DERIVATIVES = {
    "tanh": lambda z: 1.0 - np.tanh(z) ** 2,
    "sigmoid": lambda z: _sigmoid(z) * (1.0 - _sigmoid(z)),
    "relu": lambda z: (z > 0).astype(np.float64),  # 0 at z = 0, as autodiff systems take it
    "identity": lambda z: np.ones_like(z, dtype=np.float64),
    **{name: _hard_sigmoid_slope(a, b) for name, (a, b) in HARD_SIGMOIDS.items()},
}
# The largest |g''|: how far g' can move when its argument moves (tanh'' peaks at 4 / (3 sqrt 3)
# where tanh z = 1/sqrt 3, sigmoid'' at 1 / (6 sqrt 3)). The piecewise-linear ones have g'' = 0
# between their breakpoints, where g' jumps instead (``BREAKPOINTS``).
MAX_CURVATURE = {"tanh": 4 / (3 * np.sqrt(3)), "sigmoid": 1 / (6 * np.sqrt(3))}
# Piecewise-linear g: the arguments where g' jumps, and by how much.
BREAKPOINTS = {"relu": ((0.0,), 1.0), "identity": ((), 0.0),
               **{name: ((-b / a, (1 - b) / a), a) for name, (a, b) in HARD_SIGMOIDS.items()}}


def derivative(name: str):
    """g' by name. At a breakpoint of a piecewise-linear g, the one-sided slope autodiff systems use
    differs between them (relu'(0) is 0 in PyTorch and JAX); the error model (rnn_equivalence.reference.tolerance)
    allows the jump wherever a computed argument can reach a breakpoint."""
    activation(name)  # raises the error that lists the known names
    return DERIVATIVES[name]
