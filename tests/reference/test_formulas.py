"""Pins on the NumPy reference itself, independent of any framework."""

import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rnn_equivalence.harness.cases import Case, LayerConfig
from rnn_equivalence.reference.comparison import assert_bitwise_equal, assert_within_bound, compare
from rnn_equivalence.reference.tolerance import ACTIVATION_ULPS, UNIT_ROUNDOFF, gamma, pair_bound
from rnn_equivalence.harness.selection import is_ci
from rnn_equivalence.reference import ACTIVATIONS, concatenate_kernels, concatenated_step, rnn_sequence, split_step


def vanilla(I, H, batch, steps, seed=0, g="tanh"):
    """A vanilla cell case: rnn_sequence's arguments from it, and its bounds on h_t."""
    return Case("rnn", I, H, batch, steps, seed, activation=g)


def args(case, dtype="float64"):
    return case.params(dtype), case.inputs(dtype), case.state(dtype)["h"][0]

# The only Hypothesis tests, so their profiles live here: importing hypothesis costs about a
# second, which the top-level conftest would make every pytest process pay.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)  # reproducible under CI
settings.load_profile("ci" if is_ci(os.environ) else "dev")


def lecture_example(dtype):
    """The lecture's example: W_hh 3x2 of ones, W_hx 3x3 of nines, h 2x1 of ones, x 3x1 of nines."""
    return (np.ones((3, 2), dtype), np.full((3, 3), 9, dtype), np.ones((2, 1), dtype), np.full((3, 1), 9, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lecture_example_gives_245_in_every_row_under_both_formulas(dtype):
    W_hh, W_hx, h, x = lecture_example(dtype)
    # Each row: 2 * (1 * 1) + 3 * (9 * 9) = 245, exact in any float format.
    expected = np.full((3, 1), 245, dtype)
    assert_bitwise_equal(concatenated_step(concatenate_kernels(W_hh, W_hx), h, x, g="identity"), expected,
                         "formula 1, W_h [h; x]")
    assert_bitwise_equal(split_step(W_hh, W_hx, h, x, g="identity"), expected, "formula 2, W_hh h + W_hx x")


def test_lecture_concatenation_puts_hidden_columns_first():
    W_hh, W_hx, _, _ = lecture_example("float64")
    W_h = concatenate_kernels(W_hh, W_hx)
    assert W_h.shape == (3, 5)
    np.testing.assert_array_equal(W_h[:, :2], W_hh)
    np.testing.assert_array_equal(W_h[:, 2:], W_hx)


def test_wrong_concatenation_order_gives_a_different_answer():
    """[W_hx | W_hh] against [h; x] still multiplies (3x5 by 5x1) but is another function:
    rows give 9+9+81+9+9 = 117, not 245. The comparison must say so."""
    W_hh, W_hx, h, x = lecture_example("float64")
    right = concatenated_step(np.hstack([W_hh, W_hx]), h, x, g="identity")
    wrong = concatenated_step(np.hstack([W_hx, W_hh]), h, x, g="identity")
    exact = np.zeros(right.shape)  # integer sums: any correct order is exact, so the bound is 0
    assert not compare(wrong, right, exact, "wrong order").equivalent
    np.testing.assert_array_equal(wrong, np.full((3, 1), 117.0))


def test_sigmoid_with_random_bias_agrees_under_both_formulas():
    """The notes' check: sigmoid activation, random b, lecture shapes; both formulas agree."""
    rng = np.random.default_rng(7)
    W_hh, W_hx = rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
    h, x, b = rng.standard_normal((2, 1)), rng.standard_normal((3, 1)), rng.standard_normal(3)
    one = concatenated_step(concatenate_kernels(W_hh, W_hx), h, x, b, g="sigmoid")
    two = split_step(W_hh, W_hx, h, x, b, g="sigmoid")
    assert np.all((one > 0) & (one < 1))
    # The same 6 terms (5 products and b) summed in two orders in float64: each side is within
    # gamma_6 * sum|terms| of the exact pre-activation, scaled by sigmoid's slope (<= 1/4),
    # plus sigmoid's own rounding (reference/tolerance.py).
    terms = np.abs(concatenate_kernels(W_hh, W_hx)) @ np.abs(np.vstack([h, x])) + np.abs(b)[:, None]
    eps = 2 * UNIT_ROUNDOFF["float64"]
    one_side = gamma(6, UNIT_ROUNDOFF["float64"]) * terms * 0.25 + ACTIVATION_ULPS["sigmoid"] * eps
    assert_within_bound(compare(one, two, pair_bound(one_side, one_side), "sigmoid, formula 1 vs 2"))


@given(
    input_size=st.integers(1, 12),
    hidden_size=st.integers(1, 12),
    batch=st.integers(1, 4),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**16),
    g=st.sampled_from(sorted(ACTIVATIONS)),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_both_formulas_agree_within_the_error_bound(input_size, hidden_size, batch, steps, seed, g, dtype):
    case = vanilla(input_size, hidden_size, batch, steps, seed, g)
    one = rnn_sequence(*args(case, dtype), formula="concatenated")
    two = rnn_sequence(*args(case, dtype), formula="split")
    bound = pair_bound(case.bound(dtype)["output"], case.bound(dtype)["output"])
    assert_within_bound(compare(one, two, bound, f"formula 1 vs formula 2, {case.describe(dtype)}"))


@given(
    input_size=st.integers(1, 40),
    hidden_size=st.integers(1, 40),
    steps=st.integers(1, 50),
    seed=st.integers(0, 2**16),
    g=st.sampled_from(sorted(ACTIVATIONS)),
)
def test_error_bound_holds_for_float32_numpy(input_size, hidden_size, steps, seed, g):
    """The error model is a claim; here it is checked where we control both computations."""
    case = vanilla(input_size, hidden_size, 3, steps, seed, g)
    for formula in ("concatenated", "split"):
        actual = rnn_sequence(*args(case, "float32"), formula=formula)
        assert_within_bound(compare(actual, case.reference()["output"], case.bound_vs_reference("float32")["output"],
                                    f"float32 {formula} vs float64, {case.describe('float32')}"))


@pytest.mark.parametrize("g", sorted(ACTIVATIONS))
def test_error_bound_is_tight_enough_to_catch_a_wrong_mapping(g):
    """A bound that grew without limit would pass anything. Over 50 steps it stays tiny
    next to the O(0.1) changes a wrong mapping causes."""
    case = vanilla(16, 32, 4, 50, seed=3, g=g)
    assert case.bound_vs_reference("float32")["output"].max() < 1e-4


def test_a_stacked_bidirectional_bound_holds_for_float32_numpy():
    """The one driver carries values and bounds through layers and directions alike."""
    for family, variant in (("rnn", ""), ("lstm", ""), ("gru", "reset_after"), ("gru", "reset_before")):
        case = Case(family, 5, 4, 3, 30, seed=2, config=LayerConfig(3, True), variant=variant)
        from rnn_equivalence.reference.stack import run_stack

        actual = run_stack(case.stack("float32"), case.inputs("float32"), case.state("float32"))
        expected, bounds = case.reference(), case.bound_vs_reference("float32")
        assert sorted(actual) == sorted(expected)
        for key in expected:
            assert_within_bound(compare(actual[key], expected[key], bounds[key], f"{case.describe('float32')} {key}"))


def test_float32_reference_stays_float32():
    case = vanilla(3, 4, 2, 5)
    assert rnn_sequence(*args(case, "float32")).dtype == np.float32


def test_bias_off_equals_zero_bias():
    case = vanilla(3, 4, 2, 5)
    params, xs, h0 = args(case)
    zero = params.replace(b_x=np.zeros(4), b_h=np.zeros(4))
    assert_bitwise_equal(rnn_sequence(params.without_bias(), xs, h0), rnn_sequence(zero, xs, h0),
                         "no bias vs zero bias")


def test_sequence_starts_from_zero_state_by_default():
    case = vanilla(3, 4, 2, 5)
    assert_bitwise_equal(rnn_sequence(case.params(), case.inputs()),
                         rnn_sequence(case.params(), case.inputs(), np.zeros((2, 4))), "h0=None vs zeros")


@pytest.mark.parametrize(
    "xs_shape, h0_shape, dtype, message",
    [
        ((5, 2, 4), (2, 4), "float64", r"xs: expected shape \(T, batch, I\) with I=3, got \(5, 2, 4\)"),
        ((2, 3), (2, 4), "float64", r"xs: expected shape \(T, batch, I\) with I=3, got \(2, 3\)"),
        ((5, 2, 3), (3, 4), "float64", r"h0: expected shape \(batch, H\) = \(2, 4\), got \(3, 4\)"),
        ((5, 2, 3), (2, 4), "float32", r"xs: expected dtype float64 \(the parameters' dtype\), got float32"),
    ],
)
def test_reference_refuses_bad_input(xs_shape, h0_shape, dtype, message):
    params = vanilla(3, 4, 2, 5).params("float64")
    with pytest.raises((ValueError, TypeError), match=message):
        rnn_sequence(params, np.zeros(xs_shape, dtype), np.zeros(h0_shape, "float64"))


def test_unknown_activation_and_formula_are_refused():
    case = vanilla(3, 4, 2, 5)
    with pytest.raises(ValueError, match=r"activation: expected one of \('tanh', 'relu', 'sigmoid', 'identity', "
                                         r"'hard_sigmoid_0.2', 'hard_sigmoid_relu6'\) for rnn, got 'gelu'"):
        case.params().replace(activation="gelu")
    with pytest.raises(ValueError, match=r"unknown activation 'gelu'; expected one of \['hard_sigmoid_0.2', "
                                         r"'hard_sigmoid_relu6', 'identity', 'relu', 'sigmoid', 'tanh'\]"):
        concatenated_step(np.ones((1, 2)), np.ones((1, 1)), np.ones((1, 1)), g="gelu")
    with pytest.raises(ValueError, match=r"unknown formula 'fused'; expected one of \('concatenated', 'split'\)"):
        rnn_sequence(case.params(), case.inputs(), formula="fused")
