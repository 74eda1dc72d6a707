"""Pins on the gated reference, independent of any framework and of its own self-consistency."""

import math

import numpy as np
import pytest

from rnn_equivalence.harness.cases import Case
from rnn_equivalence.reference.comparison import assert_bitwise_equal, assert_within_bound, compare
from rnn_equivalence.reference.cells import sequence
from rnn_equivalence.reference.gated import gru_step, lstm_step
from rnn_equivalence.reference.params import GRU_VARIANTS, CellParams


def gated_params(family, W_x, W_h, b_x, b_h, variant=""):
    return CellParams(family, W_x, W_h, b_x, b_h, variant=variant)


def gated_case(family, I, H, batch, steps, seed=0, variant=""):
    return Case(family, I, H, batch, steps, seed, variant=variant)


def zeros(cell, I, H):
    G = 4 if cell == "lstm" else 3
    return gated_params(cell, np.zeros((G * H, I)), np.zeros((G * H, H)), np.zeros(G * H), np.zeros(G * H))


def test_lstm_with_zero_weights_halves_the_cell_state():
    """All gates at sigmoid(0) = 1/2 and g = tanh(0) = 0: c' = c / 2, h' = tanh(c / 2) / 2."""
    p = zeros("lstm", 2, 3)
    c = np.array([[0.5], [-1.0], [2.0]])
    h_next, c_next = lstm_step(p, np.ones((2, 1)), np.ones((3, 1)), c)
    assert_bitwise_equal(c_next, c / 2, "c'")
    # Same operations as math.tanh(x / 2) / 2 but NumPy's tanh against libm's: 1 ulp (2**-52) apart at most.
    np.testing.assert_allclose(h_next[:, 0], [math.tanh(x / 2) / 2 for x in c[:, 0]], rtol=2**-52)


def test_lstm_hand_computed_step():
    """I = H = 1, W_x = [1, 2, 3, 4] (gates i f g o), W_h = 0, biases 0, x = 1, h = 0, c = 1."""
    p = gated_params("lstm", np.array([[1.0], [2.0], [3.0], [4.0]]), np.zeros((4, 1)), np.zeros(4), np.zeros(4))
    h, c = lstm_step(p, np.ones((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    s = lambda v: 1 / (1 + math.exp(-v))
    # A handful of float64 operations on each side, in other orders and other libraries
    # (NumPy's tanh, libm's exp): a few ulps apart, 4e-16 < 2 * 2**-52 relative.
    expected_c = s(2) * 1 + s(1) * math.tanh(3)
    assert c[0, 0] == pytest.approx(expected_c, rel=4e-16)
    assert h[0, 0] == pytest.approx(s(4) * math.tanh(expected_c), rel=4e-16)


@pytest.mark.parametrize("variant", GRU_VARIANTS)
def test_gru_hand_computed_step(variant):
    """I = H = 1: W_x = [1, 2, 3] (gates r z n), W_h = [0.5, 0, 2], b_h = [0, 0, 1], x = 1, h = 1.
    r = s(1.5), z = s(2); reset after: n = tanh(3 + r (2 + 1)); reset before: n = tanh(3 + 2 r + 1)."""
    p = gated_params("gru", np.array([[1.0], [2.0], [3.0]]), np.array([[0.5], [0.0], [2.0]]),
                    np.zeros(3), np.array([0.0, 0.0, 1.0]), variant)
    s = lambda v: 1 / (1 + math.exp(-v))
    r, z = s(1.5), s(2.0)
    n = math.tanh(3 + r * 3) if variant == "reset_after" else math.tanh(3 + 2 * r + 1)
    h = gru_step(p, np.ones((1, 1)), np.ones((1, 1)))
    # A few float64 operations in other orders and libraries: within 2 ulps (4e-16 relative).
    assert h[0, 0] == pytest.approx((1 - z) * n + z * 1.0, rel=4e-16)


@pytest.mark.parametrize("variant", GRU_VARIANTS)
def test_gru_with_saturated_update_gate_keeps_h_exactly(variant):
    """z = sigmoid(40) rounds to 1.0 in float64, so h' = 0 * n + 1 * h = h, bit for bit."""
    case = gated_case("gru", 5, 4, 3, 10, seed=3, variant=variant)
    p, h0 = case.params(), case.state()["h"][0]
    b_x = p.b_x.copy()
    b_x[4:8] = 40.0  # the z block
    h = sequence(p.replace(b_x=b_x), case.inputs(), {"h": h0})["h"]
    for t in range(case.steps):
        assert_bitwise_equal(h[t], h0, f"h_{t + 1} with z = 1")


def test_lstm_with_open_forget_and_closed_input_keeps_c_exactly():
    """f = sigmoid(40) = 1.0 and i = sigmoid(-40) ~ 4e-18: c' = c + i g = c exactly in float64."""
    case = gated_case("lstm", 5, 4, 3, 10, seed=4)
    p, state = case.params(), {key: value[0] for key, value in case.state().items()}
    b_x = p.b_x.copy()
    b_x[0:4], b_x[4:8] = -40.0, 40.0
    c = sequence(p.replace(b_x=b_x), case.inputs(), state)["c"]
    for t in range(case.steps):
        assert_bitwise_equal(c[t], state["c"], f"c_{t + 1} with f = 1, i = 0")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_float32_reference_within_the_gated_bound(cell):
    """The gated error model is a claim; here it is checked where we control both computations."""
    for seed in range(4):
        for variant in GRU_VARIANTS if cell == "gru" else ("",):
            case = gated_case(cell, 6, 5, 3, 50, seed, variant)
            state = {key: value[0] for key, value in case.state("float32").items()}
            actual = sequence(case.params("float32"), case.inputs("float32"), state)
            expected, bounds = case.reference(), case.bound_vs_reference("float32")
            expected = {"h": expected["output"], **({"c": expected["c_output"]} if cell == "lstm" else {})}
            bounds = {"h": bounds["output"], **({"c": bounds["c_output"]} if cell == "lstm" else {})}
            for key in expected:
                assert_within_bound(compare(actual[key], expected[key], bounds[key], f"{case} {variant} {key}"))
                assert bounds[key].max() < 1e-4, "a bound this loose could hide a wrong mapping"


def test_gru_variants_are_different_functions():
    after, before = (gated_case("gru", 5, 4, 3, 50, seed=1, variant=v) for v in GRU_VARIANTS)
    bound = after.bound_vs_reference("float64")["output"] + before.bound_vs_reference("float64")["output"]
    after, before = after.reference()["output"], before.reference()["output"]
    assert compare(before, after, bound, "reset before vs after").ratio > 1e6


def test_gated_params_refuse_bad_shapes():
    with pytest.raises(ValueError, match=r"W_h: expected shape \(3H, H\) for gru \(gates r, z, n\), got \(4, 4\)"):
        gated_params("gru", np.zeros((12, 3)), np.zeros((4, 4)), np.zeros(12), np.zeros(12))
    with pytest.raises(ValueError,
                       match=r"b_h: expected shape \(4H,\) = \(8,\) \(H=2 from W_h's shape \(8, 2\)\), got \(6,\)"):
        gated_params("lstm", np.zeros((8, 3)), np.zeros((8, 2)), np.zeros(8), np.zeros(6))
    with pytest.raises(ValueError, match=r"family: expected one of \['gru', 'lstm', 'rnn'\], got 'peephole'"):
        gated_params("peephole", np.zeros((8, 3)), np.zeros((8, 2)), np.zeros(8), np.zeros(8))


def test_random_gated_params_are_distinct_and_gate_scaled():
    p = CellParams.random("lstm", 5, 4, seed=0)
    values = np.concatenate([t.ravel() for t in (p.W_x, p.W_h, p.b_x, p.b_h)])
    assert np.unique(np.abs(values)).size == values.size
    scales = [np.abs(p.gate(p.W_x, g)).max() for g in p.gates]
    assert len(set(np.round(scales, 3))) == 4
