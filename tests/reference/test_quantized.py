"""Pins on the int8 quantization bound's building blocks (rnn_equivalence.reference.quantized), in NumPy alone:
the half steps it allows against the quantizers it models, written out from PyTorch's sources (QuantUtils.h's
ChooseQuantizationParams with reduce_range; a per-tensor symmetric int8 weight), and its refusals."""

import numpy as np
import pytest

from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.quantized import (
    ACTIVATION_LEVELS, SMALL_SCALE, activation_half_step, half_steps, quantized_reference_and_bound, range_bound,
)
from rnn_equivalence.reference.tolerance import Approx, exact


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
