"""Sequences as users feed them: padded batches of mixed lengths, and one sequence run in chunks
with the state carried from call to call, for every layer system that takes them.

The reference (``rnn_equivalence.reference.stack.drive`` with a
``rnn_equivalence.reference.padding.Padding``) runs each element over its own real steps; what a system
reports on a padded step ("zeros" or "repeat") is its declared convention (``Adapter.padded_output``), and
the tests hold it to it. A chunked run is compared chunk by chunk with the whole run's reference over
those steps.
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.cases import chunked_cases, padded_cases, padded_right_in_float32
from rnn_equivalence.reference.comparison import assert_dtype, assert_within_bound, compare_outputs
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import run_stack

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect


def run_padded(adapter, case, dtype, padding="case"):
    padding = case.padding if padding == "case" else padding
    return adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config, padding)


def against_reference(adapter, case, dtype, actual, expected=None, what=""):
    expected = adapter.arrange(case.reference(dtype) if expected is None else expected, case.config)
    bounds = adapter.arrange(case.bound_vs_reference(arithmetic_of(adapter, dtype)), case.config)
    return compare_outputs(actual, expected, bounds,
                           f"{adapter.describe()}{what} vs float64 reference, {case.describe(dtype)}")


@pytest.mark.design("padded")
@pytest.mark.applies_to(lambda cls: bool(cls.padded_configs))
@pytest.mark.known_issues
def test_padded_batch_matches_float64_reference(adapter, activation_spec, dtype, case, record):
    actual = run_padded(adapter, case, dtype)
    comparison = against_reference(adapter, case, dtype, actual)
    record("padded", adapter, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)  # first: the values are what a known issue is about
    assert_dtype(actual, dtype, adapter.describe())


def run_in_chunks(adapter, case, dtype, carry=True):
    """Each call's outputs against the reference of the whole run over the same steps."""
    stack, state = case.stack(dtype), case.state(dtype)
    if carry:
        outputs = adapter.run_chunks(stack, case.chunk_inputs(dtype), state, case.config)
    else:  # the mutation: every call starts afresh from the initial state
        outputs = [adapter.run(stack, xs, state, case.config) for xs in case.chunk_inputs(dtype)]
    comparisons = []
    for j, (actual, (expected, bound)) in enumerate(zip(outputs, case.chunk_references(arithmetic_of(adapter, dtype)))):
        comparisons.append(compare_outputs(actual, adapter.arrange(expected, case.config),
                                           adapter.arrange(bound, case.config),
                                           f"{adapter.describe()} call {j + 1} of {len(outputs)} vs the whole run's "
                                           f"float64 reference, {case.describe(dtype)}"))
    return outputs, max(comparisons, key=lambda c: np.inf if np.isnan(c.ratio) else c.ratio)


@pytest.mark.design("chunked")
@pytest.mark.applies_to(lambda cls: bool(cls.chunked_configs))
@pytest.mark.known_issues
def test_chunked_run_matches_whole_run(adapter, activation_spec, dtype, case, record):
    outputs, comparison = run_in_chunks(adapter, case, dtype)
    record("chunked", adapter, dtype=dtype, **comparison.as_record())
    for actual in outputs:
        assert_within_bound(comparison)  # first: the values are what a known issue is about
    assert_dtype(actual, dtype, adapter.describe())


# --- no test that cannot fail: wrong runs are caught ---------------------------------------------
def one_shorter(padding: Padding) -> Padding:
    return Padding(tuple(n - 1 if n > 1 else n for n in padding.lengths), padding.side)


@pytest.mark.applies_to(lambda cls: padded_right_in_float32(cls))
@pytest.mark.parametrize("wrong", ["lengths one short", "mask ignored"])
def test_wrong_lengths_are_detected(adapter, wrong, record):
    """The system run with each length one short (a length-1 element kept), or on the padded
    batch as if every element were full length: far outside the bound of the right answer, on the
    first padded case (a wrong run shows on any)."""
    case = padded_cases(adapter, "quick")[0]
    padding = one_shorter(case.padding) if wrong == "lengths one short" else None
    comparison = against_reference(adapter, case, "float32", run_padded(adapter, case, "float32", padding),
                                   what=f" ({wrong})")
    record("mutation", adapter, mutation=wrong, detected=not comparison.equivalent, by="values", ratio=comparison.ratio)
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"{wrong} went undetected: {comparison.message()}"


@pytest.mark.applies_to(lambda cls: any(c.bidirectional for c in cls.padded_configs))
def test_backward_direction_started_at_the_padded_end_is_detected(adapter, record):
    """A backward direction that reads an element's padding as real steps (starting at T, not at its
    own last real step) is the classic bidirectional mistake. Its results (the reference with the
    backward direction run over all T steps, in the system's own shapes) are far outside the bound
    of the right answer, so a system that made it would fail test_padded_batch_matches_float64_reference."""
    bidirectional = [c for c in padded_cases(adapter, "quick") + padded_cases(adapter) if c.config.bidirectional]
    assert bidirectional, f"{adapter.name}: no bidirectional padded case to check"
    for case in bidirectional[:1]:
        full_length = Padding((case.steps,) * case.batch)  # every step real: on either side
        wrong = run_stack(case.stack(), case._read(case.inputs()), case.state(), (case.padding, full_length),
                          case.padded_output)
        comparison = against_reference(adapter, case, "float32", adapter.arrange(wrong, case.config),
                                       what=" (backward started at the padded end)")
        record("mutation", adapter, mutation="backward direction started at the padded end",
               detected=not comparison.equivalent, by="values", ratio=comparison.ratio)
        assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.applies_to(lambda cls: bool(cls.chunked_configs))
def test_state_not_carried_between_chunks_is_detected(adapter, record):
    """Every call started from the initial state, not from the state the previous call returned."""
    case = chunked_cases(adapter, "quick")[0]
    _, comparison = run_in_chunks(adapter, case, "float32", carry=False)
    record("mutation", adapter, mutation="state not carried between chunks", detected=not comparison.equivalent,
           by="values", ratio=comparison.ratio)
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"state not carried went undetected: {comparison.message()}"
