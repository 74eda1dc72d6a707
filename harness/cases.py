"""Test cases: shapes, seeds, and the data, reference and bound that go with them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.gated_tolerance import gated_stack_bound, gru_bound, lstm_bound
from harness.tolerance import error_bound, pair_bound, stack_error_bound
from reference.gated import GatedParams, gated_stack, gru_sequence, lstm_sequence
from reference.params import RNNParams, random_inputs, random_state
from reference.rnn import rnn_sequence
from reference.stack import StackedRNNParams, rnn_stack


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
# Five steps: a wrong mapping shows from the first step on, with an error/bound ratio
# in the thousands (the mutation tests ask for more than 100); the long sequences
# are for rounding, which the reference tests measure.
MUTATION_STEPS = 5
MUTATION_CASES = (Case(4, 4, batch=2, steps=MUTATION_STEPS, seed=6), Case(3, 5, batch=2, steps=MUTATION_STEPS, seed=7))


def steps_for(adapter, steps: int) -> int:
    """``steps``, capped by the adapter's ``max_steps`` (an exporter that unrolls the recurrence)."""
    return min(steps, adapter.max_steps or steps)


@dataclass(frozen=True)
class SequenceCase:
    """A sequence-layer case: one shape and seed, with the structure taken from a LayerConfig."""

    config: object  # frameworks.base.LayerConfig
    input_size: int = 5
    hidden_size: int = 4
    batch: int = 3
    steps: int = 50
    seed: int = 0

    def describe(self, g: str, dtype: str) -> str:
        return f"{self.config}, I={self.input_size} H={self.hidden_size} batch={self.batch} " \
               f"T={self.steps} g={g} {dtype} seed={self.seed}"

    def stack(self, dtype="float64") -> StackedRNNParams:
        c = self.config
        return StackedRNNParams.random(self.input_size, self.hidden_size, c.num_layers, c.bidirectional,
                                       self.seed, dtype, bias=c.bias)

    def inputs(self, dtype="float64") -> np.ndarray:
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def h0(self, dtype="float64") -> np.ndarray | None:
        if not self.config.initial_state:
            return None
        D = 2 if self.config.bidirectional else 1
        rng = np.random.default_rng([self.seed, 3])
        shape = (self.config.num_layers * D, self.batch, self.hidden_size)
        return rng.uniform(-0.5, 0.5, shape).astype(np.float32).astype(dtype)

    def reference(self, g: str, reversed_inputs: bool = False):
        """Float64 (outputs (T, batch, D*H), h_n (L*D, batch, H)).

        ``reversed_inputs``: the layer reads x_T..x_1 and reports in that order
        (Keras ``go_backwards``): the reference is the same stack on reversed inputs.
        """
        xs = self.inputs()[::-1] if reversed_inputs else self.inputs()
        return rnn_stack(self.stack(), xs, self.h0(), g)

    def bound_vs_reference(self, g: str, dtype: str, reversed_inputs: bool = False):
        """Allowed |computed in dtype - float64 reference| for (outputs, h_n)."""
        xs = self.inputs()[::-1] if reversed_inputs else self.inputs()
        args = (self.stack(), xs, self.h0(), g)
        (o, h), (o64, h64) = stack_error_bound(*args, dtype), stack_error_bound(*args, "float64")
        return pair_bound(o, o64), pair_bound(h, h64)


@dataclass(frozen=True)
class GatedCase:
    """A gated-cell case: an LSTM or GRU of one shape and seed, over T steps."""

    cell: str  # "lstm" or "gru"
    input_size: int
    hidden_size: int
    batch: int
    steps: int
    seed: int = 0
    zero_b_hn: bool = False  # for a GRU that cannot hold b_hn

    def __str__(self) -> str:
        return f"I{self.input_size}-H{self.hidden_size}-B{self.batch}-T{self.steps}-seed{self.seed}"

    def describe(self, dtype: str) -> str:
        return f"{self.cell} I={self.input_size} H={self.hidden_size} batch={self.batch} T={self.steps} " \
               f"{dtype} seed={self.seed}" + (" b_hn=0" if self.zero_b_hn else "")

    def params(self, dtype="float64") -> GatedParams:
        params = GatedParams.random(self.cell, self.input_size, self.hidden_size, self.seed, dtype)
        if self.zero_b_hn:
            b_h = params.b_h.copy()
            b_h[2 * self.hidden_size:] = 0
            params = params.replace(b_h=b_h)
        return params

    def inputs(self, dtype="float64") -> np.ndarray:
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def h0(self, dtype="float64") -> np.ndarray:
        return random_state(self.batch, self.hidden_size, self.seed, dtype)

    def c0(self, dtype="float64") -> np.ndarray:
        return random_state(self.batch, self.hidden_size, self.seed + 1000, dtype)

    def reference(self, variant: str = "reset_after") -> dict[str, np.ndarray]:
        """Float64 states: {"h": ..., "c": ...} (LSTM) or {"h": ...} (GRU, in ``variant``)."""
        if self.cell == "lstm":
            h, c = lstm_sequence(self.params(), self.inputs(), self.h0(), self.c0())
            return {"h": h, "c": c}
        return {"h": gru_sequence(self.params(), self.inputs(), self.h0(), variant)}

    def bound(self, dtype: str, variant: str = "reset_after", forget_bias: float = 0.0) -> dict[str, np.ndarray]:
        if self.cell == "lstm":
            h, c = lstm_bound(self.params(), self.inputs(), self.h0(), self.c0(), dtype, forget_bias)
            return {"h": h, "c": c}
        return {"h": gru_bound(self.params(), self.inputs(), self.h0(), dtype, variant)}

    def bound_vs_reference(self, dtype: str, variant: str = "reset_after", forget_bias: float = 0.0):
        mine, reference = self.bound(dtype, variant, forget_bias), self.bound("float64", variant)
        return {key: pair_bound(mine[key], reference[key]) for key in mine}


# One step, and 50 steps; non-square, I < H and I > H, batch 1 and more.
GATED_CASES = {
    cell: (GatedCase(cell, 3, 4, 1, 1), GatedCase(cell, 7, 5, 3, 50, seed=1)) for cell in ("lstm", "gru")
}


@dataclass(frozen=True)
class GatedSequenceCase:
    """A stacked / bidirectional LSTM or GRU case, structure from a LayerConfig."""

    cell: str
    config: object  # frameworks.base.LayerConfig
    input_size: int = 5
    hidden_size: int = 4
    batch: int = 3
    steps: int = 50
    seed: int = 0

    def describe(self, dtype: str) -> str:
        return f"{self.cell} {self.config}, I={self.input_size} H={self.hidden_size} batch={self.batch} " \
               f"T={self.steps} {dtype} seed={self.seed}"

    def layers(self, dtype="float64"):
        c = self.config
        D = 2 if c.bidirectional else 1
        return [[GatedParams.random(self.cell, self.input_size if k == 0 else D * self.hidden_size,
                                    self.hidden_size, [self.seed, k, d], dtype) for d in range(D)]
                for k in range(c.num_layers)]

    def inputs(self, dtype="float64") -> np.ndarray:
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def states(self, dtype="float64"):
        """(h0, c0), each (L*D, batch, H) or None when the config gives no initial state."""
        if not self.config.initial_state:
            return None, None
        D = 2 if self.config.bidirectional else 1
        rng = np.random.default_rng([self.seed, 5])
        shape = (self.config.num_layers * D, self.batch, self.hidden_size)
        h0, c0 = (rng.uniform(-0.5, 0.5, shape).astype(np.float32).astype(dtype) for _ in range(2))
        return h0, (c0 if self.cell == "lstm" else None)

    def reference(self, variant: str, reversed_inputs: bool = False):
        xs = self.inputs()[::-1] if reversed_inputs else self.inputs()
        return gated_stack(self.layers(), xs, *self.states(), variant)

    def bound_vs_reference(self, dtype: str, variant: str, reversed_inputs: bool = False):
        xs = self.inputs()[::-1] if reversed_inputs else self.inputs()
        mine = gated_stack_bound(self.layers(), xs, *self.states(), dtype, variant)
        ref = gated_stack_bound(self.layers(), xs, *self.states(), "float64", variant)
        return tuple(None if a is None else pair_bound(a, b) for a, b in zip(mine, ref))
