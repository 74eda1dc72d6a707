"""Test cases: shapes, seeds, and the data, reference and bound that go with them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.tolerance import error_bound, pair_bound
from reference.params import RNNParams, random_inputs, random_state
from reference.rnn import rnn_sequence


@dataclass(frozen=True)
class Case:
    input_size: int
    hidden_size: int
    batch: int
    steps: int
    seed: int = 0
    bias: bool = True

    def __str__(self) -> str:
        text = f"I{self.input_size}-H{self.hidden_size}-B{self.batch}-T{self.steps}-seed{self.seed}"
        return text if self.bias else text + "-nobias"

    def params(self, dtype="float64") -> RNNParams:
        params = RNNParams.random(self.input_size, self.hidden_size, self.seed, dtype)
        return params if self.bias else params.without_bias()

    def inputs(self, dtype="float64") -> np.ndarray:
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def h0(self, dtype="float64") -> np.ndarray:
        return random_state(self.batch, self.hidden_size, self.seed, dtype)

    def reference(self, g: str) -> np.ndarray:
        """The float64 reference, formula 2, on this case's (exactly float32) data."""
        return rnn_sequence(self.params(), self.inputs(), self.h0(), g, formula="split")

    def bound(self, g: str, dtype: str) -> np.ndarray:
        """Error bound for one computation in ``dtype`` (see harness/tolerance.py)."""
        return error_bound(self.params(), self.inputs(), self.h0(), g, dtype)

    def bound_vs_reference(self, g: str, dtype: str) -> np.ndarray:
        """Allowed |computed in dtype - float64 reference|: both carry rounding error."""
        return pair_bound(self.bound(g, dtype), self.bound(g, "float64"))

    def describe(self, g: str, dtype: str) -> str:
        return f"I={self.input_size} H={self.hidden_size} batch={self.batch} T={self.steps} " \
               f"g={g} {dtype} seed={self.seed}{'' if self.bias else ' no bias'}"


# Non-square throughout (I != H), both I < H and I > H, batch 1 and more,
# one step and long sequences.
CASES = (
    Case(3, 4, batch=1, steps=1),
    Case(3, 4, batch=2, steps=50, seed=1),
    Case(7, 5, batch=1, steps=50, seed=2),
    Case(16, 9, batch=4, steps=20, seed=3),
    Case(5, 12, batch=3, steps=1, seed=4),
    Case(6, 4, batch=2, steps=10, seed=5, bias=False),
)

# For mutations that only fit a square kernel (a transposed W_hh always fits;
# a transposed or swapped W_hx needs I == H), a square case too: values, not
# shapes, must give the mistake away.
MUTATION_CASES = (Case(4, 4, batch=2, steps=5, seed=6), Case(3, 5, batch=2, steps=5, seed=7))
