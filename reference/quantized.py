"""How far an int8 dynamically quantized layer may be from the float layer (issue 37, int8): a derived bound.

A dynamically quantized LSTM or GRU (PyTorch's ``torch.ao.quantization.quantize_dynamic`` with qint8 weights,
fbgemm's kernels) computes another function than the float layer: there is no equivalence claim. What is
claimed, and bounded here, is how far it may be from the float64 reference run on the *float* weights.

What the quantized layer computes (read in PyTorch's sources, aten/src/ATen/native/RNN.cpp and
quantized/cpu/qlinear_dynamic.cpp, QuantUtils.h, and checked by experiment with torch 2.13.0):

- every weight W (each kernel of each layer and direction) is stored as int8 q with a scale s per tensor
  (per output channel, i.e. per row, with a per-channel qconfig) and zero point 0: the kernel multiplies by
  W~ = s q, |W~ - W| <= s / 2 (round to nearest; the one clamped value, max|W| = 127.5 s, is off by s / 2
  too; the float32 division that rounds adds far less than the slack (1 + 2^-10) allowed);
- each linear (x W^T + b, bias in float) quantizes its float32 input v *per tensor* to uint8 with
  ``reduce_range`` (levels 0..127): scale s_v = max((max(v, 0) - min(v, 0)) / 127, 6.1e-5), an integer zero
  point, so each element is off by at most s_v / 2 (an element clamped at either end of the range too:
  the zero point is rounded by at most half a step). On a CPU the input linear runs once on the whole
  sequence (``FullLayer``: ``linear_ih(inputs)`` before the steps), so its range is the whole layer
  input's, (T, batch, I) or the layer below's (T, batch, D*H); the recurrent one runs per step on that
  step's h, (batch, H), per direction;
- the int8 x uint8 products are accumulated in int32, exactly (with 7-bit activations no pair of products
  saturates int16, 2 * 127 * 128 < 2^15), then rescaled and the bias added in float32; the gates' sums,
  activations and elementwise products are float32 (``LSTMCell`` / ``GRUCell`` of RNN.cpp).

The bound, for an affine sum of products (W_k, v_k) and biases b, exact value z = sum_k W_k v_k + b on the
float weights and exact operands, v_k computed within e_k (all elementwise, S_k the matrix of W_k's half
steps s/2, d_k the half step of v_k's quantization):

    |W~ v~ - W v| <= |W| e + (|W| + S) d + S (|v| + e)          (exact: W~ v~ - W v = W (v' - v) + W dv +
                                                                  dW v' + dW dv, with v' the computed v)
    + gamma_m(u_32) * (sum_k (|W_k| + S_k) (|v_k| + e_k + d_k) + |b|),   m = max(n, 5)

the last line the float32 roundings of the rescaling and the sums in any order (the int32 sum is exact; at
most five roundings meet any term: int32 to float, the product of the two scales, the rescale, the bias,
the sum of the input and recurrent linears; n terms' gamma_n covers any order besides). d_k is computed
from an upper bound of the range the kernel sees: max(value + error, 0) - min(value - error, 0) over the
tensor it quantizes (the scale grows with the range, so this bounds it), times (1 + u_32) for the float32
scale, and d_k = s_v / 2 (1 + 2^-10) (the float32 multiply by 1 / s_v before rounding moves an element by at
most 2 u_32 |v| <= 256 u_32 s_v). A tensor whose range bound is 0 holds exact zeros, which quantize exactly:
d_k = 0. Everything after the linears is the float32 arithmetic of ``rnn_equivalence.reference.tolerance``
(``Arithmetic("float32")``) on the cell equations of ``rnn_equivalence.reference.equations``, so the bound is
that analysis with one more rounding per operand of each product, and, like it, a worst case, not a
first-order estimate. Against the float64 reference its own float64 bound is added (``pair_bound``).

A sequence's error compounds through the recurrence as the float bound's does: the bound is honest over
short sequences and a few layers (err/bound in tests/equivalence/test_quantized_torch.py) and grows loose
beyond them, as the half-precision bounds do (docs/TOLERANCES.md).
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.equations import STEPS as EQUATIONS
from rnn_equivalence.reference.stack import StackParams, drive
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, Approx, Arithmetic, _affine_terms, exact, gamma

ACTIVATION_LEVELS = 127  # uint8 with reduce_range: 0..127 (fbgemm's dynamic linear in an RNN cell)
SMALL_SCALE = float(np.float32(6.1e-5))  # QuantUtils.h's SMALL_SCALE_THRESHOLD: no activation scale below it
SLACK = 1 + 2.0**-10  # float32 roundings inside a quantization, far below it (module docstring)
FLOAT32_ROUNDINGS = 5  # the most float32 roundings any term of a quantized affine sum meets


def half_steps(scales, shape) -> np.ndarray:
    """Each weight's bound |W~ - W| as a matrix of ``shape`` (rows, columns): s / 2 of its row's scale (one
    scale per tensor or one per row), with the slack of the float32 division that rounds it."""
    scales = np.broadcast_to(np.asarray(scales, np.float64), (shape[0],))
    return np.repeat((scales / 2 * SLACK)[:, None], shape[1], axis=1)


def range_bound(v: Approx) -> float:
    """An upper bound of max(v, 0) - min(v, 0) over a computed tensor within ``v.error`` of ``v.value``."""
    return float(max(np.max(v.value + v.error, initial=0.0), 0.0) - min(np.min(v.value - v.error, initial=0.0), 0.0))


def activation_half_step(range_upper: float, levels: int = ACTIVATION_LEVELS) -> float:
    """d: the most an element of a tensor whose range is at most ``range_upper`` moves when quantized."""
    if range_upper == 0:
        return 0.0  # exact zeros: zero is a quantized value
    scale = max(range_upper / levels, SMALL_SCALE) * (1 + UNIT_ROUNDOFF["float32"])
    return scale / 2 * SLACK


class Quantized(Arithmetic):
    """``Arithmetic("float32")`` whose affine sums multiply int8-quantized weights by dynamically quantized
    operands: one cell (one layer and direction) of a quantized layer. ``weights``: the cell's float64
    W_x and W_h with their half steps (``half_steps``); ``input_range``: a bound of the range of the whole
    layer input, which the input linear quantizes at once."""

    def __init__(self, W_x, W_x_half, W_h, W_h_half, input_range: float, levels: int = ACTIVATION_LEVELS):
        super().__init__("float32")
        self.weights = ((W_x, W_x_half, "x"), (W_h, W_h_half, "h"))
        self.input_range, self.levels = input_range, levels

    def _half_step_of(self, W):
        """The half steps of ``W``, a block of rows of W_x or W_h (the equations' ``block``: a view), and
        which operand it multiplies."""
        for base, half, operand in self.weights:
            if np.shares_memory(W, base):
                row = (W.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.strides[0]
                return half[row:row + W.shape[0]], operand
        raise ValueError("a quantized affine sum met a weight that is neither this cell's W_x nor its W_h")

    def affine(self, products, biases=(), diagonal=()) -> Approx:
        if len(diagonal):
            raise ValueError("a quantized layer has no peepholes (PyTorch's nn.LSTM has none)")
        n = sum(W.shape[1] for W, _ in products) + len(biases)
        value, _, propagated = _affine_terms(products, biases, ())
        quantization = np.zeros_like(value)
        magnitude = sum((np.abs(b)[:, None] for b in biases), np.zeros_like(value))
        for W, v in products:
            S, operand = self._half_step_of(W)
            d = activation_half_step(self.input_range if operand == "x" else range_bound(v), self.levels)
            quantization = quantization + (np.abs(W) + S).sum(axis=1, keepdims=True) * d + S @ v.magnitude
            magnitude = magnitude + (np.abs(W) + S) @ (v.magnitude + d)
        rounding = gamma(max(n, FLOAT32_ROUNDINGS), self.u_sum) * magnitude
        return Approx(value, propagated + quantization + rounding)


def quantized_reference_and_bound(stack, grid, xs, state, levels: int = ACTIVATION_LEVELS):
    """The exact results of the float layer ``stack`` (float64, ``rnn_equivalence.reference.stack.run_stack``'s
    keys) and bounds on |the quantized layer's results - exact|, two dicts with the same keys.

    ``grid``: a stack of the same structure whose W_x and W_h hold each weight's bound |W~ - W|
    (``half_steps`` of the quantized model's scales, in the canonical layout: the quantized mapping of
    frameworks/torch_quantized.py). ``levels``: the activations' quantization levels (127: uint8 with
    reduce_range). Whole sequences only: a packed batch quantizes its packed data, another tensor."""
    stack, grid = StackParams.of(stack), StackParams.of(grid)
    if stack.family == "rnn" or any(p.W_proj is not None or p.peepholes is not None for _, _, p in stack.cells()):
        raise ValueError("a quantized layer: PyTorch's dynamically quantized LSTM and GRU, without projection")
    if [(k, d) for k, d, _ in stack.cells()] != [(k, d) for k, d, _ in grid.cells()]:
        raise ValueError("grid: expected the structure of the stack (layers and directions)")
    halves = {id(p): (g.W_x, g.W_h) for (_, _, p), (_, _, g) in zip(stack.cells(), grid.cells())}

    def sequence(p, xs: Approx, state) -> dict:
        W_x_half, W_h_half = halves[id(p)]
        p = p.astype(np.float64)
        for name, weight, half in (("W_x", p.W_x, W_x_half), ("W_h", p.W_h, W_h_half)):
            if np.shape(half) != weight.shape:
                raise ValueError(f"grid: {name} {np.shape(half)}, expected the shape {weight.shape} of the weights")
        ar = Quantized(p.W_x, np.asarray(W_x_half, np.float64), p.W_h, np.asarray(W_h_half, np.float64),
                       range_bound(xs), levels)
        batch, keys = xs.value.shape[1], ("h", "c") if p.family == "lstm" else ("h",)
        state = {key: (exact(np.zeros((batch, p.state_size(key)))) if state is None or key not in state
                       else state[key]).T for key in keys}
        trace = {key: [] for key in keys}
        for t in range(xs.value.shape[0]):
            state, _ = EQUATIONS[p.family](ar, p, xs[t].T, state)
            for key in keys:
                trace[key].append(state[key].T)
        return {key: Approx.stack(values) for key, values in trace.items()}

    state = None if state is None else {key: exact(value) for key, value in state.items()}
    approx = drive(stack, exact(xs), state, sequence)
    return {k: a.value for k, a in approx.items()}, {k: a.error for k, a in approx.items()}


def off_grid(stack, dequantized, grid) -> dict:
    """Each weight tensor's worst |W~ - W| / bound (``grid``), named "layer k direction W_x": what the bound
    assumes is at most 1 everywhere (the quantized model holds the float weights rounded to its grid)."""
    worst = {}
    for (k, d, p), (_, _, q), (_, _, g) in zip(StackParams.of(stack).cells(), StackParams.of(dequantized).cells(),
                                               StackParams.of(grid).cells()):
        for name in ("W_x", "W_h"):
            error = np.abs(np.asarray(getattr(q, name), np.float64) - np.asarray(getattr(p, name), np.float64))
            worst[f"layer {k} {('forward', 'backward')[d]} {name}"] = float(np.max(error / getattr(g, name)))
    return worst
