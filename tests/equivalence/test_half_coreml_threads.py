"""Threads about Core ML's float16 (issue 37, lower precision), answered by the reference where coremltools is absent.

coremltools is not in the suite's main environment (``nox -s coreml``: frameworks/coreml_export.py,
tests/equivalence/test_coreml.py; its predictions need macOS). What the reference shows without it:

- apple/coremltools#2110 ("I converted a model to fp32 and fp16 in mlprogram format, fp16 output is wrong but fp32
  is right"; the reporter found no torch layer's input or output beyond 65504; the maintainers' answer: an
  intermediate tensor of the converted program overflows, the ops not mapping one to one, and the advice to bisect
  the model by hand, converting halves). A two-layer LSTM whose layers' inputs, outputs and exact pre-activations
  all stay far inside float16's range, but one partial sum of one gate's pre-activation passes 65504 when summed in
  float16 in order: computed in float16 throughout (``rnn_equivalence.reference.precision.Rounded``: every product
  and partial sum rounded) it overflows, the gate saturates to 1 and the output is wrong; float32 and a float32
  accumulation stored in half (the mixed policy) are right. ``first_overflow`` (reference/overflow_site.py) names
  the layer, step, gate, unit, batch element and operation: the bisection done by the reference. Whether Core ML's
  float16 kernels accumulate in half is not claimed (no Core ML runtime here): the case shows what an accumulation
  in half does and where.
"""

import numpy as np

from rnn_equivalence.reference.formats import finfo, round_to
from rnn_equivalence.reference.overflow_site import OverflowSite, first_overflow
from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.precision import run_rounded
from rnn_equivalence.reference.stack import StackParams
from rnn_equivalence.reference.tolerance import overflow, reference_and_bound

LIMIT = float(finfo("float16").max)  # 65504
I, H0, H1, T = 3, 4, 4, 4  # a stack has one hidden size
W = 33504.0  # a float16 value: 2 W h passes 65504 (rounded: 65520) once layer 0's h passes 0.978


def passing_cell_stack() -> StackParams:
    """Layer 0: an LSTM whose gates i, f, o sit at sigmoid(8) and whose candidate reads the sum of the inputs, so
    every unit's c grows step by step and its h = o tanh(c) climbs towards 1 (all four units alike). Layer 1: a
    seeded LSTM, but the forget gate's first unit reads layer 0's h with weights (W, W, -W, -W): its exact sum is 0
    (the units alike), its partial sum after two terms 2 W h, past 65504 from the step where h passes 0.978. That
    unit forgets (f = sigmoid(about -6)) and takes in about 1 each step: its c stays near 1, unless f is wrong."""
    W_x = np.zeros((4 * H0, I))
    W_x[2 * H0:3 * H0] = 1.0  # the candidate g: tanh(x_1 + x_2 + x_3)
    b_x = np.zeros(4 * H0)
    b_x[:2 * H0] = b_x[3 * H0:] = 8.0  # i, f, o
    layer0 = CellParams("lstm", W_x, np.zeros((4 * H0, H0)), b_x, np.zeros(4 * H0))
    layer1 = CellParams.random("lstm", H0, H1, 2110).rounded_to("float16")
    W_x1 = np.array(layer1.W_x, np.float64)
    W_x1[1 * H1 + 0] = [W, W, -W, -W]  # gate f (PyTorch's order i f g o), unit 0
    b_x1 = np.array(layer1.b_x, np.float64)
    b_x1[[0, H1, 2 * H1, 3 * H1]] = 6.0, -6.0, 3.0, 6.0  # unit 0: i, o open, g near 1, f shut (its c is about 1)
    layer1 = layer1.replace(W_x=W_x1, b_x=b_x1)
    return StackParams(((layer0,), (layer1,)))


def data() -> np.ndarray:
    """Batch element 0: inputs 1 (its h climbs fastest); element 1: 0.25 (slower). Float16 values."""
    xs = np.ones((T, 2, I))
    xs[:, 1] = 0.25
    return round_to(xs, "float16")


def test_coremltools_2110_the_reference_locates_the_first_float16_overflow():
    """In float16 throughout the run overflows at layer 1, step 2, gate f, unit 0, batch element 0, in a partial sum
    (found independently below from layer 0's float16 outputs); nothing the layers take or give, nor any exact
    pre-activation, is near 65504. The float16 output is then wrong (the forget gate 1 for sigmoid(about 0)) where
    the float32 run is within its bound, and a float32 accumulation stored in half does not overflow at all."""
    stack, xs = passing_cell_stack(), data()
    half, site = first_overflow(stack, xs, None, "float16")
    assert np.array_equal(half["output"], run_rounded(stack, xs, None, "float16")["output"], equal_nan=True)

    # The site, found independently: layer 0 alone in float16 gives layer 1's inputs; the first step and batch
    # element whose partial sum W h_1 + W h_2, each product rounded as the format does, passes the limit.
    h0 = run_rounded(StackParams(stack.layers[:1]), xs, None, "float16")["output"]  # (T, batch, H0)
    products = round_to(W * h0[..., :2], "float16")
    partial = products[..., 0] + products[..., 1]
    first_step = int(np.argmax(np.any(partial > LIMIT + 16, axis=1)))  # 65504 + half a step rounds to inf
    assert first_step == 2 and not np.any(partial[:first_step] > LIMIT)
    assert site == OverflowSite(layer=1, direction=0, step=first_step, operation="partial sum", gate="f", unit=0,
                                batch=int(np.argmax(partial[first_step] > LIMIT + 16)),
                                value=float(partial[first_step, 0])), site

    # What #2110's reporter checked, here true: the layers' inputs and outputs, and every exact result of the
    # equations (full sums: pre-activations, gates, states), far inside float16's range.
    exact, _ = reference_and_bound(stack, xs, None, "float64")
    assert max(np.max(np.abs(xs)), np.max(np.abs(h0)), np.max(np.abs(exact["output"]))) <= 1
    verdict16, verdict32 = overflow(stack, xs, None, "float16"), overflow(stack, xs, None, "float32")
    assert verdict16.largest < LIMIT / 100 and not verdict16.certain, verdict16  # no exact value near 65504
    assert verdict16.possible and not verdict32.possible, (verdict16, verdict32)  # a partial sum may pass it

    # The consequence: float16 throughout wrong from the located step on, float32 within its bound, and float32
    # accumulation stored in half (Keras's mixed policy) finite.
    error16 = np.abs(half["output"] - exact["output"])
    assert np.all(np.isfinite(half["output"])) and np.max(error16[first_step:]) > 0.1, error16
    assert np.max(error16[:first_step]) < 0.01, error16
    single = run_rounded(stack, xs, None, "mixed_float16")
    _, mixed_site = first_overflow(stack, xs, None, "mixed_float16")
    assert mixed_site is None and np.max(np.abs(single["output"] - exact["output"])) < 0.01
    _, bound32 = reference_and_bound(stack, xs, None, "float32")
    assert np.max(bound32["output"]) < 1e-3  # float32: no overflow and a tight bound (the run itself: torch's)
