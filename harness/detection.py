"""A mistake must be caught: run a system the wrong way and require it to be far from the reference.

Shared by the tests that make the mistakes converters make at the level of the cell (an option
dropped, activations exchanged), where ``Adapter.mutations`` (rewrites of native weights) cannot.
"""

from __future__ import annotations

from rnn_equivalence.reference.comparison import compare_outputs

ORDERS_OF_MAGNITUDE = 100  # a wrong mapping is not a rounding effect: at least this many times the bound


def assert_detected(adapter, case, what: str, record, params=None, dtype: str = "float32"):
    """Run ``adapter`` on ``case`` (with ``params``, a wrong cell, where given), record the outcome as a
    mutation, and assert the result is ``ORDERS_OF_MAGNITUDE`` times its bound from the case's reference."""
    params = case.stack(dtype) if params is None else params
    actual = adapter.run(params, case.inputs(dtype), case.state(dtype), case.config)
    comparison = compare_outputs(actual, adapter.arrange(case.reference(), case.config),
                                 adapter.arrange(case.bound_vs_reference(dtype), case.config),
                                 f"{adapter.describe()} with {what}, {case.describe(dtype)}")
    record("mutation", adapter, mutation=what, detected=not comparison.equivalent, by="values",
           ratio=comparison.ratio)
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"{what} went undetected: {comparison.message()}"
    return comparison
