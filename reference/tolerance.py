"""The floating-point error model behind every tolerance in the suite.

This is the one place where tolerances are defined. A comparison is allowed exactly the error this
model bounds, elementwise, and the measured error is reported as a fraction of that bound.

The model is a running rounding-error analysis for the unit roundoff u of each dtype
(``UNIT_ROUNDOFF``: 2**-24 for float32, 2**-53 for float64, 2**-11 for float16, 2**-8 for bfloat16),
and for the mixed precision policies (``rnn_equivalence.reference.formats.MIXED_POLICIES``: float32
arithmetic, results stored in half). Every value is an ``Approx``: its exact
value (float64, from the exact data) and a bound on |computed - exact|. ``Arithmetic`` carries both
through the operations every cell is built from (an affine sum in any order, an activation, a clip,
a product or sum of two computed values). The cell equations of every family (vanilla, LSTM, GRU,
with their options) are ``rnn_equivalence.reference.equations``', the reference's own, run here on
``Arithmetic``; ``rnn_equivalence.reference.stack.drive`` carries values and bounds through steps,
layers, directions, padded batches and chunks exactly as it carries the reference.

``reference_and_bound`` returns the exact results of ``rnn_equivalence.reference.stack.run_stack``
(in float64, from the exact data) and the bounds on |computed in ``dtype`` - exact|, as two dicts
with the same keys (``chunked_reference_and_bound``: the same pair per chunk). ``pair_bound`` returns
the allowed |a - b| of two computed results, each within its own bound: the sum of both bounds
(against the float64 reference that adds the tiny float64 bound). ``overflow`` says whether a
computation in a half format can (or must) exceed the format's largest finite value, so that a
framework's inf or nan can be judged.

The derivation, operation by operation and with the reason for each bound (every summation order,
each activation, clips, the recurrence, options, layers, padded and chunked runs), is in docs/TOLERANCES.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from rnn_equivalence.reference.activations import (
    BREAKPOINTS, HARD_SIGMOIDS, MAX_CURVATURE, RANGE_WIDTHS, activation, derivative, max_slope,
)
from rnn_equivalence.reference.equations import STEPS as EQUATIONS
from rnn_equivalence.reference.formats import (
    COMPOSED_ACTIVATION_POLICIES, HALF_FORMATS, MIXED_POLICIES, check_exact, finfo, storage_format,
)
from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.stack import DIRECTIONS, StackParams, drive

UNIT_ROUNDOFF = {
    "float32": 2.0**-24,
    "float64": 2.0**-53,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}

# Assumed accuracy of the library activations, in ulps of 1.0 (docs/TOLERANCES.md); the hard
# sigmoids' depends on their argument (``activation_error``).
ACTIVATION_ULPS = {"tanh": 4, "sigmoid": 4, "relu": 0, "identity": 0}
HARD_SIGMOID_ROUNDINGS = 4


def activation_error(g: str, magnitude, u: float):
    """E_g: the error of the library's g itself, at an argument of at most ``magnitude``."""
    if g in HARD_SIGMOIDS:
        a, b = HARD_SIGMOIDS[g]
        return HARD_SIGMOID_ROUNDINGS * u * (a * np.asarray(magnitude) + b)
    # zeros_like, not 0 * magnitude: a bound grown past float64's range (half throughout, relu over 50 steps: its
    # error terms multiply) is inf, no claim, and 0 * inf would make the next activation's bound nan, a failure.
    return ACTIVATION_ULPS[g] * 2 * u + np.zeros_like(np.asarray(magnitude, dtype=np.float64))


def gamma(n: int, u: float) -> float:
    """gamma_n = n u / (1 - n u): the relative error bound of an n-term sum or dot product."""
    if n * u >= 1:
        raise ValueError(f"gamma_n is undefined for n u >= 1 (n={n}, u={u})")
    return n * u / (1 - n * u)


def operation_roundoff(dtype: str) -> float:
    """The relative error of one operation's result computed in ``dtype``, a format or a mixed policy.

    float32 and float64: u, rounded once. A half format: a CPU has no half arithmetic, and PyTorch,
    Eigen (TensorFlow), XLA, NumPy's float16 and ml_dtypes compute a half operation in float32 and round
    the result to the format, twice: u_32 + u + u_32 u (a native half operation rounds once, u). A mixed
    policy likewise: float32 arithmetic, its result stored in half."""
    storage = storage_format(dtype)
    if storage not in HALF_FORMATS:
        return UNIT_ROUNDOFF[dtype]
    u_32, u = UNIT_ROUNDOFF["float32"], UNIT_ROUNDOFF[storage]
    return u_32 + u + u_32 * u


@dataclass(frozen=True)
class Approx:
    """An exact value and a bound on |computed - exact|, elementwise, with the same shape."""

    value: np.ndarray
    error: np.ndarray

    @property
    def magnitude(self) -> np.ndarray:
        """Bound on |computed|."""
        return np.abs(self.value) + self.error

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def T(self) -> "Approx":
        return Approx(self.value.T, self.error.T)

    # Slicing, concatenation and stacking, as ``rnn_equivalence.reference.stack.drive`` does to arrays.
    def __getitem__(self, index) -> "Approx":
        return Approx(self.value[index], self.error[index])

    @staticmethod
    def concatenate(parts, axis=-1) -> "Approx":
        return Approx(np.concatenate([p.value for p in parts], axis=axis),
                      np.concatenate([p.error for p in parts], axis=axis))

    def zeros_like(self) -> "Approx":
        """An exact zero: what a padded step reports (``rnn_equivalence.reference.stack.drive``)."""
        return exact(np.zeros_like(self.value))

    @staticmethod
    def stack(parts) -> "Approx":
        return Approx(np.stack([p.value for p in parts]), np.stack([p.error for p in parts]))


def exact(value) -> Approx:
    value = np.asarray(value, np.float64)
    return Approx(value, np.zeros_like(value))


def _affine_terms(products, biases, diagonal):
    """An affine sum's exact value, the sum of its terms' computed magnitudes, and the errors its operands
    carry in, propagated (``Arithmetic.affine``)."""
    value = (sum(W @ v.value for W, v in products) + sum(b[:, None] for b in biases)
             + sum(d[:, None] * v.value for d, v in diagonal))
    magnitude = (sum(np.abs(W) @ v.magnitude for W, v in products) + sum(np.abs(b)[:, None] for b in biases)
                 + sum(np.abs(d)[:, None] * v.magnitude for d, v in diagonal))
    propagated = sum(np.abs(W) @ v.error for W, v in products) + sum(np.abs(d)[:, None] * v.error
                                                                       for d, v in diagonal)
    return value, magnitude, propagated


class Arithmetic:
    """The three operations of the model on ``Approx`` values, for a dtype or a mixed policy.

    ``u``: one operation's rounding (``operation_roundoff``). ``u_sum``: the unit roundoff sums
    accumulate in and activations are evaluated in, the dtype's own (float32 under a mixed policy).
    ``u_stored``: a mixed policy's, the half format's, which each of its results meets once more when
    stored (0 otherwise). docs/TOLERANCES.md, "Lower precision", derives the half and mixed bounds."""

    def __init__(self, dtype: str):
        mixed = dtype in MIXED_POLICIES or dtype in COMPOSED_ACTIVATION_POLICIES
        self.u = operation_roundoff(dtype)
        self.u_sum = UNIT_ROUNDOFF["float32" if mixed else dtype]
        self.u_stored = UNIT_ROUNDOFF[storage_format(dtype)] if mixed else 0.0
        # Activations composed of several operations, each stored in half (formats.COMPOSED_ACTIVATION_POLICIES):
        # their inner roundings (``composed_error``).
        self.composed = dtype in COMPOSED_ACTIVATION_POLICIES
        # Gradual underflow: a result rounded to a half format below its smallest normal (float16: 6.1e-5) is off
        # by up to half the subnormal spacing, absolutely (float16: 2**-25 = 3.0e-8; u |x| does not cover it), once
        # per rounding to the format. Measured: Keras's float16 relu and GRU layers over 50 steps, one subnormal ulp
        # off where u |x| allowed a tenth of it. float32 and float64 results never come near their subnormals.
        storage = storage_format(dtype)
        self.eta = float(finfo(storage).smallest_subnormal) / 2 if storage in HALF_FORMATS else 0.0

    def affine(self, products, biases=(), diagonal=()) -> Approx:
        """sum_k W_k v_k + sum biases (+ sum d * v for ``diagonal`` pairs (d, v): peepholes), as one
        sum of n terms in any order."""
        n = sum(W.shape[1] for W, _ in products) + len(biases) + len(diagonal)
        groups = len(products) + len(biases) + len(diagonal)
        value, magnitude, propagated = _affine_terms(products, biases, diagonal)
        # roundings to the half format: each product and partial sum (2 n), or each group's store and sum (2 groups)
        underflow = self.eta * 2 * (groups if self.u_stored else n)
        return Approx(value, self.sum_roundoff(n, groups) * magnitude + propagated + underflow)

    def sum_roundoff(self, n: int, groups: int) -> float:
        """The relative error of an n-term sum, in any order, against its terms' magnitudes: gamma_n.

        Under a mixed policy the framework computes each of the sum's ``groups`` (a product W v, a bias,
        a peephole term) in float32 and stores it in half, and so each sum of groups (Keras: the kernel's
        product, + the recurrent kernel's, + the bias): a term meets at most n float32 roundings (its
        group's, then one per group added) and ``groups`` half ones (its group's store, then one per
        group added): (1 + gamma_n(u_32)) (1 + gamma_groups(u_half)) - 1."""
        if not self.u_stored:
            return gamma(n, self.u_sum)
        return (1 + gamma(n, self.u_sum)) * (1 + gamma(groups, self.u_stored)) - 1

    def stored(self, value, error):
        """A mixed policy's float32 result stored in half: one more rounding of |result| (unchanged for a
        dtype, whose results are already in it)."""
        if not self.u_stored:
            return error
        return error + self.u_stored * (np.abs(value) + error)

    def act(self, g: str, a: Approx) -> Approx:
        """L e + E_g (L: g's largest slope on [z - e, z + e]); never more, for a bounded g, than the width of
        its range and its own error: where the argument's error is no longer small (a long recurrence in
        half precision), the first term would grow without end, and a computed g does not."""
        slope = max_slope(g, a.value - a.error, a.value + a.error)
        value = activation(g)(a.value)
        error = slope * a.error + activation_error(g, a.magnitude, self.u_sum)
        inner = self.composed_error(g, a, np.abs(value) + slope * a.error) if self.composed else 0.0
        error = error + inner
        if g in RANGE_WIDTHS:
            error = np.minimum(error, RANGE_WIDTHS[g] + activation_error(g, 0.0, self.u_sum) + inner)
        return Approx(value, self.stored(value, error) + self.eta)

    def composed_error(self, g: str, a: Approx, largest) -> np.ndarray:
        """Under a policy of composed activations, the roundings inside g before its last (which ``stored``
        counts), g at the computed argument being at most ``largest`` (|g(z)| + L e). sigmoid as 1 / (1 + exp(-z))
        (jax.nn.sigmoid), exp(-z) and 1 + exp(-z) each stored in half: a relative error within gamma_3 (Higham's
        lemma 3.1: a product of three factors (1 + d)^-1 or (1 + d), |d| <= one operation's u_op plus float32 exp's
        own 4 ulps; three, not two, for the last rounding's u_op beyond the u_s ``stored`` counts). The relu6 hard
        sigmoid as relu6(z + 3) / 6 (jax.nn.hard_sigmoid), z + 3 stored: u_op |z + 3| / 6 <= u_op (a (|z| + e) + b).
        tanh, relu and identity are one operation each: nothing more."""
        # Both are within [0, 1] whatever their argument, so their inner roundings are relative to at most 1: without
        # that cap an argument's error grown past float64's range (relu over 50 steps) would make the range cap of
        # ``activation`` inf too.
        if g == "sigmoid":
            return gamma(3, self.u + ACTIVATION_ULPS["sigmoid"] * 2 * self.u_sum) * np.minimum(largest, 1.0)
        if g == "hard_sigmoid_relu6":
            # relu6(z + 3) / 6 moves only where the stored z + 3 is in [0, 6 (1 + u)]: at most u (1 + u)
            slope, offset = HARD_SIGMOIDS[g]
            return self.u * np.minimum(slope * (np.asarray(a.magnitude) + a.error) + offset, 1.0 + self.u)
        return np.zeros_like(np.asarray(largest, np.float64))

    def clip(self, a: Approx, threshold) -> Approx:
        if threshold is None:
            return a
        clipped = (a.value - a.error >= threshold) | (a.value + a.error <= -threshold)
        rounded_threshold = self.u * threshold  # the threshold in this dtype: 0.4 is not a float32
        return Approx(np.clip(a.value, -threshold, threshold), np.where(clipped, 0.0, a.error) + rounded_threshold)

    def mul(self, a: Approx, b: Approx) -> Approx:
        error = np.abs(a.value) * b.error + np.abs(b.value) * a.error + a.error * b.error
        return Approx(a.value * b.value, error + self.u * (np.abs(a.value * b.value) + error) + self.eta)

    def add(self, a: Approx, b: Approx, sign: float = 1.0) -> Approx:
        error = a.error + b.error
        value = a.value + sign * b.value
        return Approx(value, error + self.u * (np.abs(value) + error) + self.eta)

    def one_minus(self, a: Approx) -> Approx:
        return self.add(exact(np.ones_like(a.value)), a, sign=-1.0)

    # --- what the backward pass adds (rnn_equivalence.reference.backward runs on these) ---------------------------
    def lift(self, array) -> Approx:
        return exact(array)

    def slope(self, g: str, a: Approx) -> Approx:
        """g' at a computed argument: the derivative a framework's autodiff multiplies by.

        Smooth g (tanh, sigmoid): |g'(z + e) - g'(z)| <= max|g''| e (``MAX_CURVATURE``), and the
        framework evaluates g' from its own computed g (1 - y^2, y (1 - y)), which is within E_g of
        g, so within 2 E_g (|d(1 - y^2)/dy| <= 2) and four roundings (<= 1 each) of g'.
        Piecewise-linear g (relu, the hard sigmoids, identity): g' is exact between breakpoints
        (up to the rounding of the slope a), and where [z - e, z + e] reaches a breakpoint the
        computed side may be the other one: the whole jump (``BREAKPOINTS``)."""
        value = derivative(g)(a.value)
        if g in MAX_CURVATURE:
            error = (MAX_CURVATURE[g] * a.error + 2 * activation_error(g, a.magnitude, self.u) + 4 * self.u)
        else:
            points, jump = BREAKPOINTS[g]
            near = np.zeros(a.shape, bool)
            for point in points:
                near |= (a.value - a.error <= point) & (point <= a.value + a.error)
            error = np.where(near, jump, self.u * np.abs(value))
        return Approx(value, error)

    def outer_sum(self, pairs) -> Approx:
        """sum_k c_k v_k^T over (c_k (N, B_k), v_k (M, B_k)): a weight's gradient, every step's and
        element's product, one sum of n = sum_k B_k terms per entry in any order (a framework adds
        them step by step, or in one product over all steps, or per batch then per step)."""
        n = sum(c.shape[1] for c, _ in pairs)
        value = sum(c.value @ v.value.T for c, v in pairs)
        magnitude = sum(c.magnitude @ v.magnitude.T for c, v in pairs)
        propagated = sum(np.abs(c.value) @ v.error.T + c.error @ np.abs(v.value).T + c.error @ v.error.T
                         for c, v in pairs)
        return Approx(value, gamma(n, self.u) * magnitude + propagated)

    def slack(self, a: Approx, roundings: int, *products) -> Approx:
        """``a`` computed in another order of the same operations: ``roundings`` more roundings of each
        product of the magnitudes of ``products`` (tuples of values)."""
        extra = sum(np.prod([x.magnitude for x in factors], axis=0) for factors in products)
        return Approx(a.value, a.error + roundings * (self.u * extra + self.eta))


# The cell equations are rnn_equivalence.reference.equations', the one definition: run here on ``Arithmetic``,
# each step's value is the reference's and its error the bound (the tape is the backward pass's, unused here).
def _next_state(step):
    """``step`` without its tape: (ar, p, x, state, forget_bias) -> the next state."""
    return lambda *args: step(*args)[0]


STEPS = {family: _next_state(step) for family, step in EQUATIONS.items()}


def _bound_sequence(ar: Arithmetic, forget_bias: float, p: CellParams, xs: Approx, state) -> dict:
    """One direction, forward: {"h": Approx (T, batch, H), ...}, like ``rnn_equivalence.reference.cells.sequence``."""
    p = p.astype(np.float64)
    batch = xs.value.shape[1]
    keys = ("h", "c") if p.family == "lstm" else ("h",)
    zeros = {key: exact(np.zeros((batch, p.state_size(key)))) for key in keys}  # as in the reference
    state = {key: (zeros[key] if state is None or key not in state else state[key]).T for key in keys}
    trace = {key: [] for key in keys}
    for t in range(xs.value.shape[0]):
        state = STEPS[p.family](ar, p, xs[t].T, state, forget_bias)
        for key in keys:
            trace[key].append(state[key].T)
    return {key: Approx.stack(values) for key, values in trace.items()}


def reference_and_bound(stack, xs, state, dtype: str, forget_bias: float = 0.0, padding=None,
                        padded_output: str = "zeros"):
    """The exact results of ``rnn_equivalence.reference.stack.run_stack`` (in float64, from the exact data) and
    bounds on |computed in ``dtype`` - exact|, as two dicts with the same keys.

    ``state`` may hold ``Approx`` values: a state computed earlier, with its own bound (a chunked
    run, ``chunked_reference_and_bound``). ``dtype`` may be a mixed policy ("mixed_float16"). In a half
    format (a mixed policy's too) the parameters, inputs and state must be exactly in it
    (``rnn_equivalence.reference.formats.round_to``): the bound starts from the reference's numbers."""
    approx = _approx_results(stack, xs, state, dtype, forget_bias, padding, padded_output)
    return {k: a.value for k, a in approx.items()}, {k: a.error for k, a in approx.items()}


def _approx_results(stack, xs, state, dtype, forget_bias, padding=None, padded_output="zeros", ar=None) -> dict:
    stack = StackParams.of(stack)
    check_data_in(dtype, stack, xs, state)
    state = None if state is None else {key: v if isinstance(v, Approx) else exact(v) for key, v in state.items()}
    ar = Arithmetic(dtype) if ar is None else ar
    return drive(stack, exact(xs), state, partial(_bound_sequence, ar, forget_bias), padding, padded_output)


TENSORS = ("W_x", "W_h", "b_x", "b_h", "peepholes", "W_proj")


def check_data_in(dtype: str, stack, xs, state) -> None:
    """A half format's bound assumes the data in the format, as float32's assumes exact float32 data
    (``CellParams.random``'s): refuse any other, naming the tensor (a float32 or float64 array is the
    framework's data as it is, and its bound in float32 adds no rounding of it). A state computed earlier
    (an ``Approx``) carries its own bound."""
    storage, stack = storage_format(dtype), StackParams.of(stack)
    if storage not in HALF_FORMATS:
        return
    arrays = {f"layer {k} {DIRECTIONS[d]} {name}": getattr(p, name)
              for k, d, p in stack.cells() for name in TENSORS if getattr(p, name) is not None}
    arrays["xs"] = xs
    arrays.update({f"{key}0": value for key, value in (state or {}).items() if not isinstance(value, Approx)})
    check_exact(arrays, storage)


def chunked_reference_and_bound(stack, xs, state, dtype: str, forget_bias: float = 0.0, *, sizes):
    """A sequence run in chunks of ``sizes`` steps, each from the final state of the one before:
    per chunk, the exact results and their bounds (``reference_and_bound``'s pair).

    A call boundary adds no rounding: the state handed to the next call is the computed state
    itself, in the same dtype, so the next call continues the same recurrence with the same
    error carried in, and each chunk's bound is the whole run's bound over those steps (the
    reference tests check both, bitwise). A unidirectional stack only: a backward direction
    needs the whole sequence."""
    stack = StackParams.of(stack)
    if stack.bidirectional:
        raise ValueError("chunks: a bidirectional layer cannot run a sequence in chunks (its backward "
                         "direction starts from the end of the whole sequence)")
    if sum(sizes) != np.shape(xs)[0] or min(sizes) < 1:
        raise ValueError(f"chunks: expected sizes of at least 1 step adding up to T={np.shape(xs)[0]}, "
                         f"got {list(sizes)}")
    chunks, start = [], 0
    for size in sizes:
        approx = _approx_results(stack, xs[start:start + size], state, dtype, forget_bias)
        chunks.append(({k: a.value for k, a in approx.items()}, {k: a.error for k, a in approx.items()}))
        state = {key: approx[f"{key}_n"] for key in ("h", "c") if f"{key}_n" in approx}
        start += size
    return chunks


def optimizer_step_bound(w, w_new, g, g_bound, optimizer: dict, dtype: str, epsilon: float | None = None,
                         constants_dtype: str = ""):
    """Bound on |w' computed in ``dtype`` - w' exact| for one step (``rnn_equivalence.reference.optimizers``) from the
    exact weights ``w``, with a computed gradient within ``g_bound`` of the exact ``g`` (float64
    arrays, elementwise); ``epsilon``: Adam's e in w - lr g / (|g| + e).

    - SGD, w - lr g: the gradient's error times lr, two roundings of lr |g| (lr itself, 0.1 is not a
      float32, and the product) and one of the result.
    - Adam, w - lr phi(g), phi(g) = g / (|g| + e): phi is e / (|g| + e)^2 -Lipschitz near g, so
      the gradient's error moves it by at most lr e_g e / (max(|g| - e_g, 0) + e)^2 (and never by more
      than 2 lr: |phi| < 1); its evaluation (m, v, their corrections, the square root, the division,
      lr and the mapped epsilon) is some fifteen roundings of at most lr each, and the result one.
    Both sides add the rounding of the stored weight: a stored sum b_x + b_h is rounded once.
    ``constants_dtype``: where a framework holds its hyperparameters in another dtype than the weights
    (Keras: in floatx, float32, also for float64 weights), lr and Adam's constants are rounded to it:
    one rounding of lr |g| (SGD); for Adam, five of lr, and the bias corrections 1 - b1 and 1 - b2 of
    rounded betas, which are relatively off by u b / (1 - b) (the square root halves b2's): a framework
    may round b2 in the correction and not in v (Keras on tensorflow), and then they do not cancel."""
    u = UNIT_ROUNDOFF[dtype] + UNIT_ROUNDOFF["float64"]  # the computation's, and the float64 reference's
    u_constants = UNIT_ROUNDOFF[constants_dtype or dtype]
    lr = optimizer["learning_rate"]
    if optimizer["name"] == "sgd":
        propagated, rounding = lr * g_bound, (u + u_constants) * lr * np.abs(g)
    else:
        slope = epsilon / (np.maximum(np.abs(g) - g_bound, 0.0) + epsilon) ** 2
        b1, b2 = optimizer.get("beta_1", 0.9), optimizer.get("beta_2", 0.999)
        corrections = 5 + b1 / (1 - b1) + b2 / (2 * (1 - b2))
        propagated, rounding = np.minimum(lr * g_bound * slope, 2 * lr), (10 * u + corrections * u_constants) * lr
    return propagated + rounding + u * (np.abs(w_new) + np.abs(w))


@dataclass(frozen=True)
class Overflow:
    """How large the results a computation in a format stores can get, against the format's largest finite
    value ``limit`` (float16: 65504): over every value the equations compute (pre-activations, any
    partial sum of them in any order, products, gates, states, outputs), ``largest`` |exact value|, and
    the least and the most |computed value| can be at the element where each peaks (``at_least`` =
    max(|exact| - bound), ``at_most`` = max(|exact| + bound), a sum's at most the sum of its terms'
    magnitudes plus its rounding error)."""

    limit: float
    largest: float
    at_least: float
    at_most: float

    @property
    def possible(self) -> bool:
        """A correct computation may overflow (values up to limit + half an ulp round back to the limit, so
        this is a shade cautious): a framework's inf or nan is to be expected, not its fault."""
        return self.at_most > self.limit

    @property
    def certain(self) -> bool:
        """Every correct computation overflows somewhere."""
        return self.at_least > self.limit


class _Watched(Arithmetic):
    """``Arithmetic`` that also keeps, over every result the equations compute, the largest |exact value|
    and the least and the most |computed value| can be (``Overflow``)."""

    def __init__(self, dtype: str):
        super().__init__(dtype)
        self.largest = self.at_least = self.at_most = 0.0

    def _see(self, result: Approx, at_most=None) -> Approx:
        self.largest = max(self.largest, float(np.max(np.abs(result.value), initial=0.0)))
        self.at_least = max(self.at_least, float(np.max(np.abs(result.value) - result.error, initial=0.0)))
        self.at_most = max(self.at_most, float(np.max(result.magnitude if at_most is None else at_most,
                                                      initial=0.0)))
        return result

    def affine(self, products, biases=(), diagonal=()) -> Approx:
        # a partial sum, in any order, is at most the sum of its terms' computed magnitudes and its rounding
        result = super().affine(products, biases, diagonal)
        return self._see(result, _affine_terms(products, biases, diagonal)[1] + result.error)

    def act(self, g: str, a: Approx) -> Approx:
        return self._see(super().act(g, a))

    def clip(self, a: Approx, threshold) -> Approx:
        return self._see(super().clip(a, threshold))

    def mul(self, a: Approx, b: Approx) -> Approx:
        return self._see(super().mul(a, b))

    def add(self, a: Approx, b: Approx, sign: float = 1.0) -> Approx:
        return self._see(super().add(a, b, sign))


def overflow(stack, xs, state, dtype: str, forget_bias: float = 0.0, padding=None) -> Overflow:
    """Whether a run of ``stack`` on ``xs`` from ``state`` in ``dtype`` (a format or a mixed policy; the
    arguments of ``reference_and_bound``) can overflow the format it stores its results in.

    A framework that returns inf or nan where ``possible`` is False has failed on its own: the reference's
    every intermediate stays, within its bound, below the format's largest finite value. Where ``certain``,
    inf or nan is the right answer in that format. An activation's own internals (exp(-z) inside a
    sigmoid, say) are the framework's: tanh and sigmoid are bounded, and a framework whose formula for
    them overflows inside is at fault too."""
    watched = _Watched(dtype)
    _approx_results(stack, xs, state, dtype, forget_bias, padding, ar=watched)
    return Overflow(float(finfo(storage_format(dtype)).max), watched.largest, watched.at_least, watched.at_most)


def stored_once_in(exact: dict, bound: dict, fmt: str) -> dict:
    """The bound of results computed within ``bound`` of ``exact`` and then stored once in the format ``fmt``
    (rounded to nearest), elementwise, dict by dict: a runtime that takes and returns half tensors but computes in
    float32 between them (ONNX Runtime's float16 nodes on a CPU). |fl(y~) - y| <= |fl(y~) - y~| + |y~ - y|
    <= u |y~| + e <= u (|y| + e) + e, with u the format's unit roundoff."""
    u = UNIT_ROUNDOFF[fmt]
    return {key: bound[key] + u * (np.abs(exact[key]) + bound[key]) for key in bound}


def pair_bound(bound_a, bound_b):
    """Allowed |a - b| when a and b each lie within their own bound of the exact result
    (elementwise; dicts of bounds key by key)."""
    if isinstance(bound_a, dict):
        return {key: bound_a[key] + bound_b[key] for key in bound_a}
    return bound_a + bound_b
