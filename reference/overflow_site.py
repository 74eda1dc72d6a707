"""Where a computation in a half format first overflows: the layer, direction, step, gate and operation.

``rnn_equivalence.reference.tolerance.overflow`` says whether a run in a format can overflow (``possible``) or must
(``certain``); ``rnn_equivalence.reference.precision.run_rounded`` computes the run as a framework in that format
would, inf or nan where it overflows. Neither says where. ``first_overflow`` runs ``run_rounded``'s arithmetic
(``Rounded``: float16 or bfloat16 throughout, every product and partial sum rounded in order, or a mixed policy) and
reports the first rounding whose operand is finite and whose result is not, the bisection by hand of
apple/coremltools#2110 ("fp16 output is wrong but fp32 is right"; no layer's input or output passes 65504, an
intermediate of the converted program does) done by the reference: the first overflow is always a rounding (an
activation of a finite argument is finite, the activations' tanh forms), and every later inf or nan descends
from one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnn_equivalence.reference.equations import STEPS
from rnn_equivalence.reference.params import GATES, state_keys
from rnn_equivalence.reference.precision import Rounded
from rnn_equivalence.reference.stack import StackParams, drive
from rnn_equivalence.reference.tolerance import check_data_in


@dataclass(frozen=True)
class OverflowSite:
    """The first rounding to overflow. ``step``: the time index of the layer's input sequence (a backward direction
    reads it from the end); ``operation``: "product" (one term of an affine sum, W_ij v_j, or a whole W v under a
    mixed policy), "partial sum" (the sum so far plus the next term), "activation", "multiply", "add", "one minus";
    ``gate``: the gate whose pre-activation it belongs to (``GATES``' names; "projection"), or None for the state's
    updates; ``unit`` and ``batch``: the element (the unit within the gate); ``value``: the operation's result
    before rounding, past the format's largest finite value."""

    layer: int
    direction: int
    step: int
    operation: str
    gate: str | None
    unit: int
    batch: int
    value: float


class _Locating(Rounded):
    """``Rounded`` that remembers the first rounding to overflow, with where the equations were."""

    def __init__(self, dtype: str):
        super().__init__(dtype)
        self.site: OverflowSite | None = None
        self.where = (0, 0, 0)  # layer, direction, step
        self.params = None
        self.operation, self.gate = None, None
        self.gate_of_result: dict[int, str] = {}  # id(pre-activation) -> its gate, for the activation that reads it

    def store(self, x) -> np.ndarray:
        rounded = super().store(x)
        if self.site is None:
            x = np.asarray(x, np.float64)
            past = np.isfinite(x) & ~np.isfinite(rounded)
            if np.any(past):
                index = tuple(int(i) for i in np.argwhere(past)[0])
                row, column = (index + (0, 0))[:2] if x.ndim >= 2 else (index[0], 0)
                H = self.params.hidden_size
                unit = row % H if self.gate not in (None, "projection") else row
                self.site = OverflowSite(*self.where, self.operation, self.gate, int(unit), int(column),
                                         float(x[index]))
        return rounded

    def _gate(self, W) -> str | None:
        p = self.params
        for name, base in (("W_x", p.W_x), ("W_h", p.W_h), ("W_proj", p.W_proj)):
            if base is not None and np.shares_memory(W, base):
                if name == "W_proj":
                    return "projection"
                row = (W.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.strides[0]
                return GATES[p.family][row // p.hidden_size]
        return None

    def affine(self, products, biases=(), diagonal=()):
        self.gate = self._gate(products[0][0]) if products else None
        total = None
        self.operation = "product"
        for term in self._terms(products, biases, diagonal):
            if total is not None:
                self.operation = "partial sum"
                term = self.store(total + term)
                self.operation = "product"
            total = term
        self.gate_of_result[id(total)] = self.gate
        return total

    def act(self, g, a):
        self.operation, self.gate = "activation", self.gate_of_result.get(id(a))
        return super().act(g, a)

    def mul(self, a, b):
        self.operation, self.gate = "multiply", None
        return super().mul(a, b)

    def add(self, a, b, sign=1.0):
        self.operation, self.gate = "add", None
        return super().add(a, b, sign)

    def one_minus(self, a):
        self.operation, self.gate = "one minus", None
        return super().one_minus(a)


def first_overflow(stack, xs, state, dtype: str, forget_bias: float = 0.0) -> tuple[dict, OverflowSite | None]:
    """``run_rounded``'s results of ``stack`` on ``xs`` (T, batch, I) from ``state`` in ``dtype`` (a half format or a
    mixed policy; data exactly in its format) and the first rounding that overflowed (None: the run stays finite).
    Whole sequences (no padding)."""
    stack = StackParams.of(stack)
    check_data_in(dtype, stack, xs, state)
    ar = _Locating(dtype)
    where = {id(p): (k, d) for k, d, p in stack.cells()}
    T = np.shape(xs)[0]

    def sequence(params, xs, state) -> dict:
        k, d = where[id(params)]
        p = ar.params = params.astype(np.float64)
        batch = xs.shape[1]
        state = {key: (np.zeros((batch, p.state_size(key))) if state is None or key not in state else state[key]).T
                 for key in state_keys(p.family)}
        trace = {key: [] for key in state}
        for t, x in enumerate(xs):
            ar.where = (k, d, T - 1 - t if d else t)
            state, _ = STEPS[p.family](ar, p, x.T, state, forget_bias)
            for key, value in state.items():
                trace[key].append(value.T)
        return {key: np.stack(values) for key, values in trace.items()}

    state = None if state is None else {key: np.asarray(value, np.float64) for key, value in state.items()}
    with np.errstate(over="ignore", invalid="ignore"):
        results = drive(stack, np.asarray(xs, np.float64), state, sequence)
    return results, ar.site
