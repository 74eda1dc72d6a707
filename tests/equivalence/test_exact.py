"""Where every partial sum is exact, every vanilla cell and both formulas agree bitwise.

Small non-negative integers, and an activation that rounds nothing (identity,
or relu where the framework has no identity: on non-negative pre-activations
relu is the identity). Every product and partial sum is an integer below
2**24, exactly representable in float32, so any summation order gives the
same bits; a tolerance here would hide a real difference.
"""

import numpy as np
import pytest

from rnn_equivalence.reference.comparison import assert_bitwise_equal
from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.rnn import rnn_sequence

FLOAT32_EXACT_INTEGERS = 2**24


def integer_case(dtype, g="identity"):
    rng = np.random.default_rng(2024)
    H, I, T, batch = 2, 3, 3, 2
    params = CellParams.rnn(
        W_hx=rng.integers(1, 4, (H, I)).astype(dtype),
        W_hh=np.array([[1, 2], [3, 1]], dtype),  # not symmetric: a transposed W_hh must show
        b_x=np.array([1, 3], dtype),
        b_h=np.array([2, 5], dtype),
        activation=g,
    )
    xs = rng.integers(0, 4, (T, batch, I)).astype(dtype)
    h0 = rng.integers(0, 3, (batch, H)).astype(dtype)
    return params, xs, h0


def exact_activation(adapter):
    return "identity" if "identity" in adapter.activations else "relu"


def test_integer_case_is_exact_in_float32():
    """Guard the premise: all values, hence all partial sums, are integers below 2**24."""
    hs = rnn_sequence(*integer_case(np.float64))
    assert np.all(hs == np.round(hs)) and np.all(hs >= 0) and hs.max() < FLOAT32_EXACT_INTEGERS


@pytest.mark.parametrize("formula", ["concatenated", "split"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_both_formulas_bitwise_equal_on_integers(formula, dtype):
    expected = rnn_sequence(*integer_case(np.float64)).astype(dtype)
    assert_bitwise_equal(rnn_sequence(*integer_case(dtype), formula=formula), expected, f"{formula} formula, {dtype}")


@pytest.mark.applies_to(lambda cls: cls.family == "rnn" and not cls.layer)
def test_framework_bitwise_equal_on_integers(adapter, dtype, record):
    g = exact_activation(adapter)
    params, xs, h0 = integer_case(dtype, g)
    expected = rnn_sequence(*integer_case(np.float64)).astype(dtype)
    actual = adapter.run(params, xs, {"h": h0[None]})["h"]
    record("exact", adapter, dtype=dtype, equal=bool(np.array_equal(actual, expected)))
    assert_bitwise_equal(actual, expected, f"{adapter.describe()}, small integers, g={g}, {dtype}")
