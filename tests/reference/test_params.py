"""The canonical parameter type: clear errors on bad input, seeded distinct values."""

import numpy as np
import pytest

from rnn_equivalence.reference.params import CellParams, random_inputs


def good(H=4, I=3, dtype=np.float64):
    return dict(W_hx=np.zeros((H, I), dtype), W_hh=np.zeros((H, H), dtype),
                b_x=np.zeros(H, dtype), b_h=np.zeros(H, dtype))


@pytest.mark.parametrize(
    "change, error, message",
    [
        (dict(W_hh=np.zeros((4, 3))), ValueError, r"W_hh: expected shape \(H, H\) for rnn \(gates h\), got \(4, 3\)"),
        (dict(W_hx=np.zeros((5, 3))), ValueError,
         r"W_hx: expected shape \(H, I\) = \(4, 3\) \(H=4 from W_hh's shape \(4, 4\)\), got \(5, 3\)"),
        (dict(W_hx=np.zeros(4)), ValueError, r"W_hx: expected a 2-D array of shape \(H, I\), got shape \(4,\)"),
        (dict(b_x=np.zeros(5)), ValueError,
         r"b_x: expected shape \(H,\) = \(4,\) \(H=4 from W_hh's shape \(4, 4\)\), got \(5,\)"),
        (dict(b_h=np.zeros((4, 1))), ValueError,
         r"b_h: expected shape \(H,\) = \(4,\) \(H=4 from W_hh's shape \(4, 4\)\), got \(4, 1\)"),
        (dict(W_hx=np.zeros((4, 3), np.int64)), TypeError,
         r"W_hx: expected a float16, bfloat16, float32 or float64 array, got dtype int64"),
        (dict(W_hh=np.zeros((4, 4), np.complex128)), TypeError,
         r"W_hh: expected a float16, bfloat16, float32 or float64 array, got dtype complex128"),
        (dict(b_x=np.array([0, np.nan, 0, 0])), ValueError, r"b_x: expected finite values, got nan at index \(1,\)"),
        (dict(W_hh=np.full((4, 4), np.inf)), ValueError, r"W_hh: expected finite values, got inf at index \(0, 0\)"),
        (dict(b_h=None), ValueError, r"b_x and b_h: expected both arrays of shape \(H,\) or both None"),
        (dict(b_h=np.zeros(4, np.float32)), TypeError, r"expected one dtype for all parameters"),
    ],
)
def test_bad_parameters_are_refused_with_expected_and_received(change, error, message):
    with pytest.raises(error, match=message):
        CellParams.rnn(**{**good(), **change})


def test_no_bias_is_both_biases_none():
    params = CellParams.rnn(**{**good(), "b_x": None, "b_h": None})
    assert not params.has_bias and params.b is None


def test_random_is_seeded():
    a, b, c = (CellParams.random("rnn", 3, 4, seed=1), CellParams.random("rnn", 3, 4, seed=1),
               CellParams.random("rnn", 3, 4, seed=2))
    np.testing.assert_array_equal(a.W_hx, b.W_hx)
    assert not np.array_equal(a.W_hx, c.W_hx)


def test_random_values_are_distinct_nonzero_and_exact_in_float32():
    params = CellParams.random("rnn", 5, 7, seed=3)
    values = np.concatenate([t.ravel() for t in (params.W_hx, params.W_hh, params.b_x, params.b_h)])
    assert np.unique(np.abs(values)).size == values.size, "a swapped or transposed tensor could hide"
    assert np.all(values != 0)
    np.testing.assert_array_equal(values.astype(np.float32).astype(np.float64), values)
    assert not np.allclose(params.b_x, params.b_h)


def test_random_recurrent_kernel_contracts():
    """Row sums of |W_hh| below 1 keep errors and relu states from growing over 50 steps."""
    for seed in range(20):
        assert np.abs(CellParams.random("rnn", 3, 8, seed).W_hh).sum(axis=1).max() < 1.6


def test_random_inputs_shape_and_exactness():
    xs = random_inputs(5, 2, 3, seed=0)
    assert xs.shape == (5, 2, 3)
    np.testing.assert_array_equal(xs.astype(np.float32).astype(np.float64), xs)
