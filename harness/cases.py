"""Test cases: one shape, structure and seed, and the data, reference and bound that go with them.

One case type for every cell of the family and every system, cell or layer: a
single cell unrolled over a sequence is the one-layer, one-direction stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from frameworks.base import CELL, LayerConfig
from harness.tolerance import pair_bound, reference_and_bound
from reference.cells import state_keys
from reference.params import GATED, random_inputs, random_state
from reference.stack import StackParams, run_stack


@dataclass(frozen=True)
class Case:
    """A family member (``family``, ``activation`` or GRU ``variant``), a structure (``config``),
    a shape and a seed."""

    family: str
    input_size: int
    hidden_size: int
    batch: int
    steps: int
    seed: int = 0
    config: LayerConfig = CELL
    activation: str = ""  # rnn: g; gated: "default"
    variant: str = ""  # gru: "reset_after" or "reset_before"
    zero_b_hn: bool = False  # for a GRU that cannot hold b_hn (Flax nnx GRUCell)
    reversed_inputs: bool = False  # the system reads x_T..x_1 and reports in that order (go_backwards)
    forget_bias: float = field(default=0.0, compare=False)  # folded by the mapping (TF1 LSTM); enters the bound

    def __str__(self) -> str:
        text = f"I{self.input_size}-H{self.hidden_size}-B{self.batch}-T{self.steps}-seed{self.seed}"
        return text if self.config.bias else text + "-nobias"

    def describe(self, dtype: str) -> str:
        kind = self.stack().kind.replace("rnn-", "rnn g=")
        structure = "" if self.config == CELL else f"{self.config}, "
        return (f"{kind} {structure}I={self.input_size} H={self.hidden_size} batch={self.batch} T={self.steps} "
                f"{dtype} seed={self.seed}" + ("" if self.config.bias else " no bias")
                + (" b_hn=0" if self.zero_b_hn else "") + (" read reversed" if self.reversed_inputs else ""))

    def with_(self, **changes) -> "Case":
        return replace(self, **changes)

    def stack(self, dtype="float64") -> StackParams:
        c = self.config
        stack = StackParams.random(self.family, self.input_size, self.hidden_size, c.num_layers, c.bidirectional,
                                   self.seed, dtype, c.bias, self.activation, self.variant)
        if self.zero_b_hn:
            def without_b_hn(p):
                b_h = p.b_h.copy()
                b_h[2 * p.hidden_size:] = 0
                return p.replace(b_h=b_h)

            stack = stack.map(without_b_hn)
        return stack

    def params(self, dtype="float64"):
        """The one cell of a cell case."""
        return self.stack(dtype).first

    def inputs(self, dtype="float64") -> np.ndarray:
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def state(self, dtype="float64") -> dict | None:
        """{"h": (L*D, batch, H)}, and "c" for an LSTM; None where the config gives no initial state."""
        if not self.config.initial_state:
            return None
        shape = (self.config.num_layers * self.config.num_directions, self.batch, self.hidden_size)
        return {key: random_state(shape, [self.seed, 3 + k], dtype) for k, key in enumerate(state_keys(self.family))}

    def _read(self, xs):
        return xs[::-1] if self.reversed_inputs else xs

    def reference(self) -> dict:
        """The float64 reference's canonical results (``reference.stack.drive``'s keys)."""
        return run_stack(self.stack(), self._read(self.inputs()), self.state())

    def bound(self, dtype: str) -> dict:
        """Bound on |computed in ``dtype`` - exact| for every canonical result."""
        return reference_and_bound(self.stack(), self._read(self.inputs()), self.state(), dtype, self.forget_bias)[1]

    def bound_vs_reference(self, dtype: str) -> dict:
        """Allowed |computed in dtype - float64 reference|: both carry rounding error."""
        return pair_bound(self.bound(dtype), self.bound("float64"))


def cases_for(adapter, activation: str) -> list[Case]:
    """The cases a system (an adapter or its class) is compared on, for one activation
    ("default" for a gated cell)."""
    def case(**fields):
        return Case(adapter.family, activation=activation, variant=adapter.variant, zero_b_hn=adapter.zero_b_hn,
                    forget_bias=adapter.forget_bias, **fields)

    if adapter.layer:
        return [case(input_size=5, hidden_size=4, batch=3, steps=steps_for(adapter, 50), config=config,
                     reversed_inputs=_reads_reversed(adapter, config))
                for config in adapter.configs]
    shapes = CELL_SHAPES if adapter.family == "rnn" else GATED_CELL_SHAPES
    return [case(input_size=I, hidden_size=H, batch=B, steps=steps_for(adapter, T), seed=seed,
                 config=CELL if bias else LayerConfig(bias=False))
            for I, H, B, T, seed, bias in shapes]


# Non-square throughout (I != H), both I < H and I > H, batch 1 and more,
# one step and long sequences: (I, H, batch, T, seed, bias).
CELL_SHAPES = (
    (3, 4, 1, 1, 0, True),
    (3, 4, 2, 50, 1, True),
    (7, 5, 1, 50, 2, True),
    (16, 9, 4, 20, 3, True),
    (5, 12, 3, 1, 4, True),
    (6, 4, 2, 10, 5, False),
)
GATED_CELL_SHAPES = ((3, 4, 1, 1, 0, True), (7, 5, 3, 50, 1, True))

def pair_cases(anchor, other) -> list[Case]:
    """Two cells against each other: the longest sequence and the widest shape, in the
    activations every vanilla framework supports (tanh saturates, relu does not)."""
    if anchor.family == "rnn":
        cases = [c for g in ("tanh", "relu") for c in cases_for(anchor, g) if str(c).startswith(("I3-H4-B2-T50", "I16"))]
    else:
        cases = [c for c in cases_for(anchor, GATED) if c.steps > 1]
    return [c.with_(steps=steps_for(other, c.steps), zero_b_hn=c.zero_b_hn or other.zero_b_hn) for c in cases]


# Mutations: five steps. A wrong mapping shows from the first step on, with an error/bound
# ratio in the thousands (the mutation tests ask for more than 100); long sequences are for
# rounding, which the reference tests measure. A square shape too, for mutations that only
# fit a square kernel (a transposed W_hx needs I == H): values, not shapes, must give the
# mistake away.
MUTATION_STEPS = 5


def mutation_cases(adapter) -> list[Case]:
    activation = adapter.activations[0]
    base = Case(adapter.family, 4, 4, batch=2, steps=MUTATION_STEPS, seed=6, activation=activation,
                variant=adapter.variant, zero_b_hn=adapter.zero_b_hn, forget_bias=adapter.forget_bias,
                config=adapter.mutation_config)
    base = base.with_(reversed_inputs=_reads_reversed(adapter, base.config))
    if adapter.layer:
        return [base]
    return [base, base.with_(input_size=3, hidden_size=5, seed=7)]


def _reads_reversed(adapter, config) -> bool:
    """``reads_reversed`` of an adapter instance, or of its class (cases are made at collection)."""
    if isinstance(adapter, type):
        return adapter.reads_reversed(adapter, config)
    return adapter.reads_reversed(config)


def steps_for(adapter, steps: int) -> int:
    """``steps``, capped by the adapter's ``max_steps`` (an exporter that unrolls the recurrence)."""
    return min(steps, adapter.max_steps or steps)


__all__ = ["CELL", "Case", "GATED", "LayerConfig", "MUTATION_STEPS", "cases_for", "mutation_cases", "steps_for"]
