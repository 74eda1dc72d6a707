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

The same machinery bounds a half-format weight file (issue 37, lower precision: ``rnn-equivalence verify`` of a
float16 or bfloat16 file against its float32 original). ``WeightGrid`` is ``Arithmetic(dtype)`` on weights known
within a grid S, every tensor of a cell (kernels, biases, peepholes, projection); ``Quantized`` is the grid with
int8's operand quantization and its float32 roundings on top. A weight rounded to nearest in a half format moves by
at most half the format's spacing at it, ``rounding_half_steps``: S = 2^e u for |W| in [2^e, 2^(e+1)), so
S <= u |W| in the normal range (u = 2^-11 float16, 2^-8 bfloat16), half the smallest subnormal below it, 0 at 0;
no operand is quantized. ``rounded_reference_and_bound`` carries that grid through a run in any arithmetic of
``reference.tolerance``: float64 (the rounding of the weights alone), a mixed policy (float32 within each op,
results stored in half) or the format throughout.

ONNX Runtime's ``DynamicQuantizeLSTM`` (``onnxruntime.quantization.quantize_dynamic`` of an ONNX LSTM node; read in
onnxruntime's sources, contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc, providers/cpu/rnn/rnn_helpers.cc's
quantized ``ComputeGemm``, uni_directional_lstm.cc, util/qmath.h's ``GetQuantizationParameter``, and checked by
experiment with onnxruntime 1.32.0) is the same computation on another activation scheme, ``ORT_ACTIVATIONS``:

- W and R are int8 with a scale per direction (per row with ``per_channel=True``), zero point 0: W~ within s / 2;
- each GEMM quantizes its float32 operand v per tensor to uint8 over the *full* range, levels 0..255: scale
  (max(v, 0) - min(v, 0)) / 255 with no floor (1 where the range is 0: exact zeros, d = 0 as above), zero point
  round(-min / scale) to nearest even, q = saturate(round(v / scale) + zero point); each element is off by at
  most scale / 2, the clamped extremes too (the zero point moves the grid by at most half a step). The input
  GEMM runs once on the whole sequence (T * batch rows: the direction's whole input, its range the layer
  input's), the recurrent one per step on h, on the batch cut into ceil(batch / threads) rows per thread
  (``SetNumThreads``: batch > 4, or >= 2 with H <= 256): each part's range is at most the whole step's, so the
  whole step's range bounds d, whatever the thread count;
- the u8 x s8 products sum exactly in int32 (measured on an AVX512-VNNI CPU, MLAS's ``vpdpbusd`` kernels: the
  emulation in tests/equivalence/test_quantized_onnx.py agrees to 1e-7; MLAS's AVX2 kernel without VNNI,
  ``vpmaddubsw``, sums pairs in saturating int16, 2 * 255 * 127 > 2^15, which this bound does not cover), rescaled
  by the float32 product of the two scales, the recurrent result added to the input one, then the fused bias
  Wb + Rb (one float32 sum) and the float32 gates: five roundings at most per term, ``FLOAT32_ROUNDINGS`` as above.

So the bound is ``quantized_reference_and_bound`` with ``scheme=ORT_ACTIVATIONS``: 255 levels, no smallest scale.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.equations import STEPS as EQUATIONS
from rnn_equivalence.reference.formats import finfo
from rnn_equivalence.reference.stack import StackParams, drive
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, Approx, Arithmetic, _affine_terms, exact, gamma

ACTIVATION_LEVELS = 127  # uint8 with reduce_range: 0..127 (fbgemm's dynamic linear in an RNN cell)
SMALL_SCALE = float(np.float32(6.1e-5))  # QuantUtils.h's SMALL_SCALE_THRESHOLD: no activation scale below it
SLACK = 1 + 2.0**-10  # float32 roundings inside a quantization, far below it (module docstring)
FLOAT32_ROUNDINGS = 5  # the most float32 roundings any term of a quantized affine sum meets
# An activation scheme: (levels, smallest scale). fbgemm's (torch.ao): uint8 with reduce_range, scale floored at
# SMALL_SCALE; ONNX Runtime's DynamicQuantizeLSTM: uint8 over 0..255, no floor (module docstring).
FBGEMM_ACTIVATIONS = (ACTIVATION_LEVELS, SMALL_SCALE)
ORT_ACTIVATIONS = (255, 0.0)


def half_steps(scales, shape) -> np.ndarray:
    """Each weight's bound |W~ - W| as a matrix of ``shape`` (rows, columns): s / 2 of its row's scale (one
    scale per tensor or one per row), with the slack of the float32 division that rounds it."""
    scales = np.broadcast_to(np.asarray(scales, np.float64), (shape[0],))
    return np.repeat((scales / 2 * SLACK)[:, None], shape[1], axis=1)


def range_bound(v: Approx) -> float:
    """An upper bound of max(v, 0) - min(v, 0) over a computed tensor within ``v.error`` of ``v.value``."""
    return float(max(np.max(v.value + v.error, initial=0.0), 0.0) - min(np.min(v.value - v.error, initial=0.0), 0.0))


def activation_half_step(range_upper: float, levels: int = ACTIVATION_LEVELS,
                         smallest_scale: float = SMALL_SCALE) -> float:
    """d: the most an element of a tensor whose range is at most ``range_upper`` moves when quantized in
    ``levels`` steps of at least ``smallest_scale``."""
    if range_upper == 0:
        return 0.0  # exact zeros: zero is a quantized value
    scale = max(range_upper / levels, smallest_scale) * (1 + UNIT_ROUNDOFF["float32"])
    return scale / 2 * SLACK


def row_range_bounds(v: Approx) -> np.ndarray:
    """``range_bound`` of each column of a computed (features, batch) operand on its own: (1, batch), an upper bound
    of max(v_b, 0) - min(v_b, 0) for each batch row v_b (what a kernel that quantizes each row apart sees)."""
    hi = np.maximum(np.max(v.value + v.error, axis=0, keepdims=True, initial=0.0), 0.0)
    lo = np.minimum(np.min(v.value - v.error, axis=0, keepdims=True, initial=0.0), 0.0)
    return hi - lo


def activation_half_steps(range_upper, levels: int = ACTIVATION_LEVELS, smallest_scale: float = SMALL_SCALE):
    """``activation_half_step`` elementwise over an array of range bounds (0 where a range is 0)."""
    range_upper = np.asarray(range_upper, np.float64)
    scale = np.maximum(range_upper / levels, smallest_scale) * (1 + UNIT_ROUNDOFF["float32"])
    return np.where(range_upper == 0, 0.0, scale / 2 * SLACK)


class WeightGrid(Arithmetic):
    """``Arithmetic(dtype)`` on weights known within a grid: the computation multiplies (or adds) each tensor W of
    the cell as some W~ with |W~ - W| <= S, elementwise. ``grids``: (tensor, S, operand) for each of the cell's
    float64 tensors (a kernel, a bias, peepholes, a projection), ``operand`` what a kernel multiplies ("x", "h").

    An affine sum's terms are then W~ v~ with |W~ v~ - W v| <= |W| e + S (|v| + e) (exact: W (v~ - v) +
    (W~ - W) v~), a bias b~ within S_b of b, a peephole term within S_d (|v| + e), and the sum's own rounding
    (``roundoff``) is of the computed terms' magnitudes, (|W| + S) (|v| + e). ``operand_step`` is where a
    computation also moves each operand, by at most d (int8 dynamic quantization, ``Quantized``); 0 here."""

    def __init__(self, dtype: str, grids):
        super().__init__(dtype)
        self.grids = [(base, np.asarray(S, np.float64), operand) for base, S, operand in grids]

    def grid_of(self, tensor):
        """The grid of ``tensor``, a block of rows (or entries) of one of the cell's tensors (the equations'
        ``block``: a view), and what it multiplies; None for a constant the equations add (TF1's forget_bias)."""
        for base, S, operand in self.grids:
            if np.shares_memory(tensor, base):
                row = (tensor.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.strides[0]
                return S[row:row + tensor.shape[0]], operand
        return None

    def operand_step(self, operand: str, v: Approx) -> float:
        return 0.0

    def roundoff(self, n: int, groups: int) -> float:
        return self.sum_roundoff(n, groups)

    def affine(self, products, biases=(), diagonal=()) -> Approx:
        n = sum(W.shape[1] for W, _ in products) + len(biases) + len(diagonal)
        value, _, propagated = _affine_terms(products, biases, diagonal)
        moved, magnitude = np.zeros_like(value), np.zeros_like(value)
        for b in biases:
            S = self._grid_or_exact(b)
            moved, magnitude = moved + S[:, None], magnitude + (np.abs(b) + S)[:, None]
        for W, v in products:
            found = self.grid_of(W)
            if found is None:
                raise ValueError("a weight grid's affine sum met a weight that is none of the cell's tensors")
            S, operand = found
            d = self.operand_step(operand, v)
            moved = moved + (np.abs(W) + S).sum(axis=1, keepdims=True) * d + S @ v.magnitude
            magnitude = magnitude + (np.abs(W) + S) @ (v.magnitude + d)
        for diagonal_weights, v in diagonal:
            S = self._grid_or_exact(diagonal_weights)
            moved = moved + S[:, None] * v.magnitude
            magnitude = magnitude + (np.abs(diagonal_weights) + S)[:, None] * v.magnitude
        groups = len(products) + len(biases) + len(diagonal)
        return Approx(value, propagated + moved + self.roundoff(n, groups) * magnitude)

    def _grid_or_exact(self, tensor):
        found = self.grid_of(tensor)
        return np.zeros(np.shape(tensor)) if found is None else found[0]


class Quantized(WeightGrid):
    """``Arithmetic("float32")`` whose affine sums multiply int8-quantized weights by dynamically quantized
    operands: one cell (one layer and direction) of a quantized layer. ``weights``: the cell's float64
    W_x and W_h with their half steps (``half_steps``); ``input_range``: a bound of the range of the whole
    layer input, which the input linear quantizes at once. The biases are float, exact."""

    def __init__(self, W_x, W_x_half, W_h, W_h_half, input_range: float, levels: int = ACTIVATION_LEVELS,
                 smallest_scale: float = SMALL_SCALE):
        super().__init__("float32", [(W_x, W_x_half, "x"), (W_h, W_h_half, "h")])
        self.input_range, self.levels, self.smallest_scale = input_range, levels, smallest_scale

    def operand_step(self, operand: str, v: Approx) -> float:
        """d: the input linear quantizes the whole layer input at once, the recurrent one each step's h."""
        return activation_half_step(self.input_range if operand == "x" else range_bound(v), self.levels,
                                    self.smallest_scale)

    def roundoff(self, n: int, groups: int) -> float:
        return gamma(max(n, FLOAT32_ROUNDINGS), self.u_sum)

    def affine(self, products, biases=(), diagonal=()) -> Approx:
        if len(diagonal):
            raise ValueError("a quantized layer has no peepholes (PyTorch's nn.LSTM has none)")
        return super().affine(products, biases, diagonal)


class RowQuantized(Quantized):
    """``Quantized`` for a kernel that quantizes each batch row of each matmul's operand with its own scale
    (TFLite's hybrid kernels, ``BatchQuantizeFloats``): d per column of the (features, batch) operand, from that
    row's own range, the step's x and the step's h alike (a row of x is one step's one batch element whether the
    input matmul runs per step or on the whole sequence, so the layer input's range is not needed)."""

    def operand_step(self, operand: str, v: Approx) -> np.ndarray:
        return activation_half_steps(row_range_bounds(v), self.levels, self.smallest_scale)


def quantized_reference_and_bound(stack, grid, xs, state, levels: int = ACTIVATION_LEVELS, scheme=None,
                                  per_row: bool = False):
    """The exact results of the float layer ``stack`` (float64, ``rnn_equivalence.reference.stack.run_stack``'s
    keys) and bounds on |the quantized layer's results - exact|, two dicts with the same keys.

    ``grid``: a stack of the same structure whose W_x and W_h hold each weight's bound |W~ - W|
    (``half_steps`` of the quantized model's scales, in the canonical layout: the quantized mapping of
    frameworks/torch_quantized.py). ``levels``: the activations' quantization levels (127: uint8 with
    reduce_range); ``scheme``: (levels, smallest scale), in its place (``ORT_ACTIVATIONS``: ONNX Runtime's
    DynamicQuantizeLSTM, frameworks/onnx_quantized.py). ``per_row``: each batch row of each operand quantized with
    its own scale (``RowQuantized``: TFLite's hybrid kernels), d from that row's range, not the whole tensor's.
    Whole sequences only: a packed batch quantizes its packed data, another tensor."""
    levels, smallest_scale = (levels, SMALL_SCALE) if scheme is None else scheme
    stack, grid = StackParams.of(stack), StackParams.of(grid)
    if stack.family == "rnn" or any(p.W_proj is not None or p.peepholes is not None for _, _, p in stack.cells()):
        raise ValueError("a quantized layer: PyTorch's dynamically quantized LSTM and GRU, ONNX Runtime's LSTM, "
                         "without projection or peepholes")
    if [(k, d) for k, d, _ in stack.cells()] != [(k, d) for k, d, _ in grid.cells()]:
        raise ValueError("grid: expected the structure of the stack (layers and directions)")

    def arithmetic(p, g, xs: Approx) -> Quantized:
        return (RowQuantized if per_row else Quantized)(p.W_x, np.asarray(g.W_x, np.float64), p.W_h,
                                                        np.asarray(g.W_h, np.float64), range_bound(xs), levels,
                                                        smallest_scale)

    return _grid_run(stack, grid, xs, state, arithmetic, ("W_x", "W_h"))


def _grid_run(stack, grid, xs, state, arithmetic, names, padding=None):
    """``stack``'s exact results and their bounds, every cell run on ``arithmetic(p, g, xs)``: the cell's float64
    parameters ``p``, its grid ``g`` (the tensors ``names`` checked against ``p``'s shapes) and the direction's
    input, for the whole sequence (an int8 input linear quantizes it at once)."""
    grids = {id(p): g for (_, _, p), (_, _, g) in zip(stack.cells(), grid.cells())}

    def sequence(p, xs: Approx, state) -> dict:
        g = grids[id(p)]
        p = p.astype(np.float64)  # its own arrays: ``WeightGrid.grid_of`` finds a block by the memory it shares
        for name in names:
            weight, half = getattr(p, name), getattr(g, name)
            if (weight is None) != (half is None) or (weight is not None and np.shape(half) != weight.shape):
                raise ValueError(f"grid: {name} {None if half is None else np.shape(half)}, expected the shape "
                                 f"{None if weight is None else weight.shape} of the weights")
        ar = arithmetic(p, g, xs)
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
    approx = drive(stack, exact(xs), state, sequence, padding)
    return {k: a.value for k, a in approx.items()}, {k: a.error for k, a in approx.items()}


# --- a half-format weight file: the weights rounded to float16 or bfloat16, no activation quantization ----------

WEIGHT_TENSORS = ("W_x", "W_h", "b_x", "b_h", "peepholes", "W_proj")


def format_spacing(array, fmt: str) -> np.ndarray:
    """The spacing of the half format ``fmt`` around each value of ``array`` (float64 values): 2^e eps for |W|
    in [2^e, 2^(e+1)), the smallest subnormal below the normal range (and at 0)."""
    info = finfo(fmt)
    _, exponent = np.frexp(np.abs(np.asarray(array, np.float64)))  # |W| = m 2^exponent, m in [0.5, 1)
    return np.maximum(np.ldexp(float(info.eps), exponent - 1), float(info.smallest_subnormal))


def rounding_half_steps(array, fmt: str, source: str = "float32") -> np.ndarray:
    """The bound S of |fl(W) - W| for each value W of ``array`` rounded to nearest in the half format ``fmt``:
    half the format's spacing at W, at most u |W| in the normal range (2^e u against |W| >= 2^e), half the
    smallest subnormal below it, 0 at 0 (exact). From float64 values (``source``) a rounding may pass through
    float32 first (ml_dtypes' bfloat16 does; a converter may), which moves W by u_32 |W| more."""
    array = np.abs(np.asarray(array, np.float64))
    half = np.where(array == 0, 0.0, format_spacing(array, fmt) / 2)
    return half + (UNIT_ROUNDOFF["float32"] * array if source == "float64" else 0.0)


def rounding_grid(stack, fmt: str):
    """The grid of ``stack`` rounded to ``fmt`` tensor by tensor (``rounding_half_steps`` of each, from the
    stack's own dtype): a stack of the same structure holding S where the stack holds W."""
    def cell(p):
        source = np.asarray(p.W_x).dtype.name
        return p.replace(**{name: rounding_half_steps(getattr(p, name), fmt, source)
                            for name in WEIGHT_TENSORS if getattr(p, name) is not None})

    return StackParams.of(stack).map(cell)


def rounded_reference_and_bound(stack, grid, xs, state, dtype: str, padding=None):
    """The exact results of ``stack`` (float64, ``run_stack``'s keys) and bounds on |a run of weights within
    ``grid`` of ``stack``'s, computed in ``dtype``, - exact|: a half-format weight file (its weights ``stack``'s
    rounded, ``rounding_grid``) run in the format ("float16": every operation in half) or under a mixed policy
    ("mixed_float16": float32 within each operation, results stored in half), on the data ``xs`` and ``state``
    exactly in the format (round them once: ``formats.round_to``). Every tensor of every cell carries its grid,
    the biases and peepholes too; nothing else is quantized (``WeightGrid``). Padded batches as ``drive``'s."""
    stack, grid = StackParams.of(stack), StackParams.of(grid)
    if [(k, d) for k, d, _ in stack.cells()] != [(k, d) for k, d, _ in grid.cells()]:
        raise ValueError("grid: expected the structure of the stack (layers and directions)")

    def arithmetic(p, g, xs: Approx) -> WeightGrid:
        return WeightGrid(dtype, [(getattr(p, name), getattr(g, name), name) for name in WEIGHT_TENSORS
                                  if getattr(p, name) is not None])

    return _grid_run(stack, grid, xs, state, arithmetic, WEIGHT_TENSORS, padding)


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
