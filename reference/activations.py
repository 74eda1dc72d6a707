"""The activations g the suite compares, in NumPy, by name.

Each activation also knows the largest slope it can have on an interval,
which the error model in ``harness.tolerance`` needs to carry an error in the
pre-activation through g.
"""

from __future__ import annotations

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # tanh form: no overflow for large |z|, unlike 1 / (1 + exp(-z)).
    return 0.5 * (1.0 + np.tanh(0.5 * z))


ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, 0.0).astype(z.dtype, copy=False),
    "sigmoid": _sigmoid,
    "identity": lambda z: z,
}


def activation(name: str):
    """The NumPy function for an activation name, or a ValueError listing the known names."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}"
        ) from None


def max_slope(name: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Largest |g'(z)| over z in [lo, hi], elementwise.

    tanh' and sigmoid' peak at 0 and fall off monotonically on either side, so
    the maximum sits at the point of the interval nearest to 0.
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
    activation(name)  # raises the error that lists the known names
    raise AssertionError("unreachable")
