"""The reference's equations computed in a half format or under a mixed policy, rounding as a framework does.

The cell equations are written once (``rnn_equivalence.reference.equations``). ``Rounded`` is one more
arithmetic for them: each operation computed in NumPy and its result rounded to the format, float16
(NumPy's) or bfloat16 (ml_dtypes'), so that a run stands for a framework computing in that format,
to be held to the bound of ``rnn_equivalence.reference.tolerance`` (tests/reference/test_half_precision.py):

- a half format ("float16", "bfloat16"): every product and every addition of a sum rounded, in order,
  one term after the other (the most roundings a sum can take; a framework that accumulates in float32
  rounds less), an activation evaluated exactly and rounded once;
- a mixed policy ("mixed_float16", "mixed_bfloat16", Keras's: variables and arithmetic in float32,
  results stored in half), operation by operation as Keras's cells run on half tensors: each product
  W v computed in float32 and stored in half, the biases (half values) added one group at a time, each
  partial sum computed in float32 and stored in half; an activation evaluated in float32 on the stored
  argument, its result stored; a product or a sum of two values computed in float32 and stored.

Values are float64 arrays holding numbers of the format (inf where the format overflows).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.equations import STEPS
from rnn_equivalence.reference.formats import HALF_FORMATS, MIXED_POLICIES, numpy_dtype, storage_format
from rnn_equivalence.reference.params import CellParams, state_keys
from rnn_equivalence.reference.stack import StackParams, drive
from rnn_equivalence.reference.tolerance import check_data_in


class Rounded:
    """The arithmetic of a framework computing in a half format (``dtype``) or a mixed policy."""

    def __init__(self, dtype: str):
        self.storage = storage_format(dtype)
        if self.storage not in HALF_FORMATS:
            raise ValueError(f"dtype: expected a half format {HALF_FORMATS} or a mixed policy "
                             f"{tuple(MIXED_POLICIES)}, got {dtype!r}")
        self.mixed = dtype in MIXED_POLICIES
        self.dtype = numpy_dtype(self.storage)

    def store(self, x) -> np.ndarray:
        """A result as the format holds it (computed in float32 first under a mixed policy)."""
        x = np.asarray(x, np.float64)
        if self.mixed:
            x = x.astype(np.float32)
        return x.astype(self.dtype).astype(np.float64)

    def lift(self, array) -> np.ndarray:
        return np.asarray(array, np.float64)

    def affine(self, products, biases=(), diagonal=()):
        """sum_k W_k v_k + the biases (+ d * v for each (d, v) of ``diagonal``): its terms (``_terms``)
        added in that order, each partial sum rounded."""
        total = None
        for term in self._terms(products, biases, diagonal):
            total = term if total is None else self.store(total + term)
        return total

    def _terms(self, products, biases, diagonal):
        """An affine sum's terms as the framework adds them: in a half format every product W_ij v_j,
        rounded, one term after the other (the most roundings a sum can take); under a mixed policy each
        W v in float32 (NumPy's float32 matrix product), stored; then the biases (values of the format),
        then the peephole terms d * v, rounded."""
        for W, v in products:
            if self.mixed:
                yield self.store(W.astype(np.float32) @ v.astype(np.float32))
                continue
            for k in range(W.shape[1]):
                yield self.store(W[:, k:k + 1] * v[k:k + 1])
        for b in biases:
            yield b[:, None]
        for d, v in diagonal:
            yield self.store(d[:, None] * v)

    def act(self, g, a):
        return self.store(activation(g)(a.astype(np.float32) if self.mixed else a))

    def clip(self, a, threshold):
        """``a`` clipped to the threshold as the format holds it (0.8 is not a float16)."""
        if threshold is None:
            return a
        t = float(self.store(threshold))
        return np.clip(a, -t, t)

    def mul(self, a, b):
        return self.store(a * b)

    def add(self, a, b, sign=1.0):
        return self.store(a + sign * b)

    def one_minus(self, a):
        return self.store(1.0 - a)

    def slack(self, a, roundings, *products):
        return a  # one order of the operations is computed; the bound covers the others


def _sequence(ar: Rounded, forget_bias: float, p: CellParams, xs, state) -> dict:
    """One direction, forward, like ``rnn_equivalence.reference.cells.sequence``, on ``ar``."""
    p = p.astype(np.float64)
    batch = xs.shape[1]
    state = {key: (np.zeros((batch, p.state_size(key))) if state is None or key not in state else state[key]).T
             for key in state_keys(p.family)}
    trace = {key: [] for key in state}
    for x in xs:
        state, _ = STEPS[p.family](ar, p, x.T, state, forget_bias)
        for key, value in state.items():
            trace[key].append(value.T)
    return {key: np.stack(values) for key, values in trace.items()}


def run_rounded(stack, xs, state, dtype: str, forget_bias: float = 0.0, padding=None,
                padded_output: str = "zeros") -> dict:
    """``rnn_equivalence.reference.stack.run_stack``'s results computed in ``dtype``, a half format or a
    mixed policy (``Rounded``), from data exactly in its format (``formats.round_to``). Where the format
    overflows the results hold inf or nan, as a framework's would, without a warning."""
    stack = StackParams.of(stack)
    check_data_in(dtype, stack, xs, state)
    state = None if state is None else {key: np.asarray(value, np.float64) for key, value in state.items()}
    with np.errstate(over="ignore", invalid="ignore"):
        return drive(stack, np.asarray(xs, np.float64), state, partial(_sequence, Rounded(dtype), forget_bias),
                     padding, padded_output)
