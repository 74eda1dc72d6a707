"""A mistake must be caught: run a system the wrong way and require it to be far from the reference.

Shared by the tests that make the mistakes converters make at the level of the cell (an option
dropped, activations exchanged), where ``Adapter.mutations`` (rewrites of native weights) cannot.
"""

from __future__ import annotations

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.reference.formats import HALF_FORMATS

ORDERS_OF_MAGNITUDE = 100  # a wrong mapping is not a rounding effect: at least this many times the bound


# In a half format, the bound of the arithmetic a system runs (frameworks/plan.py, ``arithmetic_of``: float32 within
# each op for PyTorch) is some 2**11 (float16) to 2**16 (bfloat16) times float32's, and the same wrong mappings on
# the same square case measure 2.6 to 480 times it (torch 2.13.0; the least: torch-gru-rnn bfloat16 "layers 1 and
# 2 swapped" 2.65, torch-lstm bfloat16 "gates i and f swapped" 3.70, "weight_hh transposed blockwise" 4.00), the
# right runs at most 0.49 (default depth, seeds 0 to 2). 2.5: the largest round threshold every caught one clears,
# five times the worst right run; ``ORDERS_OF_MAGNITUDE`` is out of reach of the half bounds.
HALF_CAUGHT_BEYOND = 2.5


def caught_beyond(dtype: str) -> float:
    """How many times its bound a wrong run must be off to count as caught in ``dtype``: ``ORDERS_OF_MAGNITUDE``
    in float32 and float64 (the wrong mappings measure 1e4 to 1e6 times float32's bound), ``HALF_CAUGHT_BEYOND``
    in a half format."""
    return HALF_CAUGHT_BEYOND if dtype in HALF_FORMATS else ORDERS_OF_MAGNITUDE


def assert_detected(adapter, case, what: str, record, params=None, dtype: str = "float32"):
    """Run ``adapter`` on ``case`` (with ``params``, a wrong cell, where given), record the outcome as a
    mutation, and assert the result is ``ORDERS_OF_MAGNITUDE`` times its bound from the case's reference."""
    params = case.stack(dtype) if params is None else params
    actual = adapter.run(params, case.inputs(dtype), case.state(dtype), case.config)
    comparison = compare_outputs(actual, adapter.arrange(case.reference(dtype), case.config),
                                 adapter.arrange(case.bound_vs_reference(arithmetic_of(adapter, dtype)), case.config),
                                 f"{adapter.describe()} with {what}, {case.describe(dtype)}")
    record("mutation", adapter, mutation=what, detected=not comparison.equivalent, by="values",
           ratio=comparison.ratio)
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"{what} went undetected: {comparison.message()}"
    return comparison


def wrong_natives(adapter, native, depth: str) -> list[tuple[str, dict]]:
    """The system's wrong mappings made in ``native``, by name: its first short of full depth (its structure's, as
    every converted system runs), every one at full depth; one whose weight the configuration lacks (an option's)
    left out. None at all is an error, not an empty loop: a test over them could not fail."""
    names = list(adapter.mutations) if depth == "full" else list(adapter.mutations)[:1]
    made = []
    for name in names:
        try:
            made.append((name, adapter.mutations[name](native)))
        except KeyError:  # an option's weight this configuration does not have
            continue
    assert made, f"{adapter.name}: none of its wrong mappings {names} applies to its mutation configuration"
    return made
