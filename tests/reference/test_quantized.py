"""Pins on the int8 quantization bound's building blocks (rnn_equivalence.reference.quantized), in NumPy alone:
the half steps it allows against the quantizers it models, written out from PyTorch's sources (QuantUtils.h's
ChooseQuantizationParams with reduce_range; a per-tensor symmetric int8 weight), and its refusals. And the same
grid for a half-format weight file (issue 37, lower precision): each weight's rounding, and the bound it implies,
over seeds and sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.reference.formats import HALF_FORMATS, finfo, round_to
from rnn_equivalence.reference.params import CellParams, random_inputs, random_state
from rnn_equivalence.reference.precision import run_rounded
from rnn_equivalence.reference.quantized import (
    ACTIVATION_LEVELS, SMALL_SCALE, activation_half_step, half_steps, quantized_reference_and_bound, range_bound,
    rounded_reference_and_bound, rounding_grid, rounding_half_steps,
)
from rnn_equivalence.reference.stack import StackParams
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, Approx, exact, pair_bound, reference_and_bound


def fbgemm_quantized(v: np.ndarray, levels: int = ACTIVATION_LEVELS) -> np.ndarray:
    """A float32 tensor as a dynamic linear sees it: quantized per tensor to 0..levels, then dequantized."""
    lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
    scale = (hi - lo) / levels
    if np.float32(scale) == 0:
        scale = 0.1
    scale = max(scale, SMALL_SCALE)
    if scale == SMALL_SCALE and hi - lo > 0:  # the range widened to the smallest scale
        lo, hi = (lo, SMALL_SCALE * levels) if lo == 0 else (-SMALL_SCALE * levels, hi) if hi == 0 else \
            (lo * SMALL_SCALE * levels / (hi - lo), hi * SMALL_SCALE * levels / (hi - lo))
    from_min, from_max = -lo / scale, levels - hi / scale
    zero = from_min if abs(lo / scale) < abs(levels) - abs(hi / scale) else from_max
    zero = int(np.clip(np.rint(zero), 0, levels))
    s = np.float32(scale)
    q = np.clip(np.rint(v.astype(np.float32) * np.float32(1 / s)) + zero, 0, levels)
    return (q - zero) * np.float64(s)


@pytest.mark.parametrize("spread", [1e-7, 1e-3, 1.0, 300.0])
def test_an_activation_moves_by_at_most_its_half_step(spread):
    rng = np.random.default_rng(7)
    for shift in (-1.0, 0.0, 1.0):
        v = ((rng.standard_normal((40, 6)) + shift) * spread).astype(np.float32).astype(np.float64)
        d = activation_half_step(range_bound(exact(v)))
        moved = np.abs(fbgemm_quantized(v) - v)
        assert np.all(moved <= d), (moved.max(), d)
        if spread >= 1e-3:  # below 127 * 6.1e-5 the step is the smallest scale, far above the values
            assert moved.max() > 0.2 * d  # the half step is the step: rounding reaches near it


def test_exact_zeros_quantize_exactly():
    assert activation_half_step(range_bound(exact(np.zeros((3, 2))))) == 0.0
    assert np.array_equal(fbgemm_quantized(np.zeros((3, 2))), np.zeros((3, 2)))


def test_a_range_bound_covers_every_computed_tensor():
    value, error = np.array([[-0.5, 0.2], [0.1, 0.3]]), np.full((2, 2), 0.05)
    assert range_bound(Approx(value, error)) == pytest.approx(0.35 + 0.55)
    assert range_bound(Approx(np.abs(value), error * 0)) == pytest.approx(0.5)  # 0 is always in the range


def test_a_weight_moves_by_at_most_its_half_step():
    """Per-tensor symmetric int8 (PyTorch's default dynamic qconfig): scale max|W| / 127.5, the extreme clamped
    to 127, off by s / 2."""
    rng = np.random.default_rng(3)
    W = rng.uniform(-0.4, 0.4, (12, 5)).astype(np.float32).astype(np.float64)
    s = np.float32(np.abs(W).max() / 127.5)
    q = np.clip(np.rint(W.astype(np.float32) / s), -128, 127)
    moved = np.abs(q * np.float64(s) - W)
    assert np.all(moved <= half_steps(np.float64(s), W.shape))
    assert moved.max() > 0.99 * float(s) / 2  # the clamped extreme


def test_the_quantized_bound_refuses_what_it_does_not_model():
    rnn = CellParams.random("rnn", 3, 4, 0)
    with pytest.raises(ValueError, match="LSTM and GRU"):
        quantized_reference_and_bound(rnn, rnn, np.zeros((2, 1, 3)), None)
    lstm = CellParams.random("lstm", 3, 4, 0)
    with pytest.raises(ValueError, match="shape"):
        quantized_reference_and_bound(lstm, lstm.replace(W_x=np.ones((16, 2)), W_h=np.ones((16, 4))),
                                      np.zeros((2, 1, 3)), None)


# --- a half-format weight file: the same grid, S = half the format's spacing at each weight (<= u |W|) ---------

@settings(max_examples=200, deadline=None)
@given(fmt=st.sampled_from(HALF_FORMATS),
       values=st.lists(st.floats(-7e4, 7e4, allow_nan=False, width=32), min_size=1, max_size=20))
def test_a_weight_rounded_to_a_half_format_moves_by_at_most_its_half_step(fmt, values):
    """|fl(W) - W| <= S for every float32 W in the format's range, subnormals and zero included, and S <= u |W|
    in the normal range (the formula of docs/TOLERANCES.md)."""
    W = np.array(values, np.float64)
    W = W[np.abs(W) <= float(finfo(fmt).max) * (1 - 2.0**-10)]  # beyond it, rounding gives inf (refused)
    S = rounding_half_steps(W, fmt)
    assert np.all(np.abs(round_to(W, fmt) - W) <= S)
    normal = np.abs(W) >= float(finfo(fmt).tiny)
    assert np.all(S[normal] <= UNIT_ROUNDOFF[fmt] * np.abs(W[normal]))
    assert np.all(S[W == 0] == 0)


def test_the_half_step_is_reached_and_covers_a_rounding_through_float32():
    """Half a spacing is the worst rounding (a value halfway up a binade's first step), and from float64 a value
    that ml_dtypes rounds to bfloat16 through float32 moves by a float32 rounding more."""
    for fmt in HALF_FORMATS:
        spacing = float(finfo(fmt).eps)
        W = np.array([1 + spacing / 2 * (1 - 2.0**-20)])  # just below the tie: rounds down, by nearly half a step
        assert np.abs(round_to(W, fmt) - W)[0] > 0.99 * rounding_half_steps(W, fmt)[0]
    W = np.array([1 + 2.0**-8 + 2.0**-40])  # rounds to 1 through float32 (formats.round_to's example)
    assert np.abs(round_to(W, "bfloat16") - W)[0] > rounding_half_steps(W, "bfloat16", source="float32")[0]
    assert np.abs(round_to(W, "bfloat16") - W)[0] <= rounding_half_steps(W, "bfloat16", source="float64")[0]


CASES = st.tuples(st.sampled_from(["rnn", "lstm", "gru"]), st.integers(1, 6), st.integers(1, 6),
                  st.sampled_from([(1, False), (2, False), (1, True), (2, True)]), st.integers(0, 2**16))


def half_case(family, I, H, shape, seed, fmt, steps=5):
    """A float32 stack, the same rounded to ``fmt`` (a half file's weights), and data in the format."""
    (layers, bidirectional), D = shape, 2 if shape[1] else 1
    stack = StackParams.random(family, I, H, layers, bidirectional, seed=seed, dtype=np.float32)
    xs = round_to(random_inputs(steps, 2, I, seed), fmt)
    state = {key: round_to(random_state((layers * D, 2, H), [seed, k]), fmt)
             for k, key in ((3, "h"), (4, "c"))[:2 if family == "lstm" else 1]}
    return stack, stack.rounded_to(fmt), xs, state


@settings(max_examples=30, deadline=None)
@given(case=CASES, fmt=st.sampled_from(HALF_FORMATS))
def test_the_rounded_weights_bound_holds(case, fmt):
    """The bound of a stack's weights rounded to a half format holds over seeds and sizes: the float64 reference on
    the rounded weights (float64 arithmetic: the rounding alone), and the same weights run as a half model is
    (``precision.run_rounded``, under the mixed policy and in the format throughout), whole runs, all against the
    float64 reference on the float32 weights."""
    stack, rounded, xs, state = half_case(*case, fmt)
    grid = rounding_grid(stack, fmt)
    exact, bound_64 = reference_and_bound(stack, xs, state, "float64")
    runs = {"float64": reference_and_bound(rounded, xs, state, "float64")[0],
            **{dtype: run_rounded(rounded, xs, state, dtype) for dtype in (f"mixed_{fmt}", fmt)}}
    for dtype, run in runs.items():
        value, bound = rounded_reference_and_bound(stack, grid, xs, state, dtype)
        assert all(np.array_equal(value[key], exact[key]) for key in exact)  # the analysis carries the reference
        comparison = compare_outputs(run, exact, pair_bound(bound, bound_64), f"{case} {dtype}")
        assert comparison.equivalent, comparison.message()


def test_the_weight_rounding_term_is_needed():
    """Without the grid (every S = 0: the float64 bound of the float32 weights) the rounded weights exceed it many
    times; with it, the rounding uses a fair share of the bound (an honest bound: more than 1 %)."""
    stack, rounded, xs, state = half_case("lstm", 3, 5, (2, False), 0, "float16", steps=7)
    exact, bound_64 = reference_and_bound(stack, xs, state, "float64")
    computed = reference_and_bound(rounded, xs, state, "float64")[0]
    grid = rounding_grid(stack, "float16")
    for S, low, high in ((grid, 0.01, 1.0), (grid.map(lambda g: g.astype(np.float64).replace(
            **{name: np.zeros_like(getattr(g, name)) for name in ("W_x", "W_h", "b_x", "b_h")})), 100, np.inf)):
        bound = rounded_reference_and_bound(stack, S, xs, state, "float64")[1]
        ratio = compare_outputs(computed, exact, pair_bound(bound, bound_64), "rounded").ratio
        assert low <= ratio <= high, ratio


def test_the_rounded_weights_bound_refuses_another_structure():
    stack = StackParams.random("gru", 3, 4, 2, False, seed=0)
    with pytest.raises(ValueError, match="structure"):
        rounded_reference_and_bound(stack, StackParams.random("gru", 3, 4, 1, False, seed=0), np.zeros((2, 1, 3)),
                                    None, "float16")
    with pytest.raises(ValueError, match="shape"):
        cell = stack.layers[0][0]
        rounded_reference_and_bound(cell, cell.replace(W_h=np.ones((12, 4)), W_x=np.ones((12, 2))),
                                    np.zeros((2, 1, 3)), None, "float16")
