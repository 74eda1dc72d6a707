"""Flax ``nnx.RNN(seq_lengths=...)`` and TF1 cells through ``tf.compat.v1.nn.dynamic_rnn(sequence_length=...)``:
what each reports beyond what test_padded.py compares, measured on the installed versions.

test_padded.py compares both with the reference on real steps and final states. Here: what Flax
puts on padded steps (the adapter masks them, as its users must), how its reverse direction
orders a short sequence, what a zero length does in each (the suite refuses zero lengths,
test_refusals.py), and TF1's state tuple fed back as dynamic_rnn returned it.
"""

import numpy as np
import pytest

from rnn_equivalence.harness.cases import chunked_cases, padded_cases
from rnn_equivalence.reference.comparison import compare
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import StackParams, run_stack

DTYPE = "float32"


def is_flax_rnn(cls):
    return cls.name == "flax-nnx-rnn"


def is_tf1(cls):
    return cls.name in ("tf1", "tf1-basic-lstm", "tf1-lstm", "tf1-gru")


def bidirectional_case(adapter):
    return next(c for c in padded_cases(adapter) if c.config.bidirectional)


def read_in_order(case, d: int, b: int, order):
    """Direction d's cell run from its initial state over element b's steps in ``order``: the float64
    results, in reading order, and the allowed |computed in DTYPE - them|."""
    cell = StackParams([[case.stack().layers[0][d]]])
    xs = case.inputs()[np.asarray(order), b:b + 1]
    state = None if case.state() is None else {k: v[d:d + 1, b:b + 1] for k, v in case.state().items()}
    exact, bound = reference_and_bound(cell, xs, state, DTYPE)
    _, exact_bound = reference_and_bound(cell, xs, state, "float64")
    return exact["output"][:, 0], pair_bound(bound, exact_bound)["output"][:, 0]


def reading_order(length: int, steps: int, backward: bool) -> np.ndarray:
    """The steps Flax reads for one element, in order: its real steps (reversed within its own
    length when backward, flip_sequences), then its padding (reversed too when backward)."""
    real, padded = np.arange(length), np.arange(length, steps)
    return np.concatenate([real[::-1], padded[::-1]]) if backward else np.arange(steps)


def flax_unmasked(adapter, case, padding=None):
    """What nnx.RNN / nnx.Bidirectional returns for the case, padded steps as Flax leaves them."""
    return adapter.flax_call(adapter.to_native(case.stack(DTYPE)), case.inputs(DTYPE), case.state(DTYPE),
                             case.config, case.activation, padding or case.padding)


@pytest.mark.applies_to(lambda cls: is_flax_rnn(cls))
def test_flax_padded_steps_are_the_cell_run_on_over_the_padding(adapter):
    """Flax does not zero padded steps (flax.linen.RNN's docstring: "The output elements corresponding
    to padding elements are NOT zeroed out"): each direction's padded outputs are its cell run on,
    after the element's real steps, over the padding, in the direction's reading order."""
    case = bidirectional_case(adapter)
    carry, outputs = flax_unmasked(adapter, case)
    outputs, H, T = np.asarray(outputs), case.hidden_size, case.steps  # (batch, T, 2H)
    comparisons = []
    for b, length in enumerate(case.padding.lengths):
        for d in (0, 1):
            order = reading_order(length, T, backward=d == 1)
            exact, bound = read_in_order(case, d, b, order)
            actual = outputs[b, order, d * H:(d + 1) * H]  # in reading order
            comparisons.append(compare(actual, exact, bound, f"{adapter.describe()} element {b} direction {d}, "
                                                             f"every step in reading order {list(order)}"))
    worst = max(comparisons, key=lambda c: c.ratio)
    assert worst.equivalent, worst.message()
    padded = ~case.padding.mask(T).T  # (batch, T)
    assert np.abs(outputs[padded]).max() > 0.1, "padded steps are zeros: Flax masks them now"


@pytest.mark.applies_to(lambda cls: is_flax_rnn(cls))
def test_flax_reverse_without_keep_order_reports_each_element_in_its_own_reading_order(adapter):
    """reverse=True flips each element within its own length (flip_sequences), so without keep_order
    output j of element b is its step L_b - 1 - j for j < L_b (not step T - 1 - j), then its padding;
    the carry is the state after its first step. The same as the backward direction of
    nnx.Bidirectional, which test_padded.py compares, before keep_order puts it back in time order."""
    case = bidirectional_case(adapter)
    config = next(c for c in adapter.configs if c.option("reverse") and not c.option("keep_order"))
    backward = StackParams([[case.stack(DTYPE).layers[0][1]]])
    carry, outputs = adapter.flax_call(adapter.to_native(backward), case.inputs(DTYPE),
                                       {"h": case.state(DTYPE)["h"][1:2]}, config, case.activation, case.padding)
    outputs, carry = np.asarray(outputs), np.asarray(carry)
    reference = run_stack(case.stack(), case.inputs(), case.state(), case.padding)
    comparisons = []
    for b, length in enumerate(case.padding.lengths):
        exact, bound = read_in_order(case, 1, b, reading_order(length, case.steps, backward=True))
        comparisons.append(compare(outputs[b], exact, bound, f"{adapter.describe()} reverse, element {b}"))
        comparisons.append(compare(carry[b], reference["h_n"][1, b], bound[length - 1],
                                   f"{adapter.describe()} reverse, element {b}'s carry"))
        np.testing.assert_allclose(exact[:length], reference["output"][:length, b, case.hidden_size:][::-1],
                                   rtol=0, atol=1e-12)  # output j is step L_b - 1 - j of the backward direction
    worst = max(comparisons, key=lambda c: c.ratio)
    assert worst.equivalent, worst.message()


@pytest.mark.applies_to(lambda cls: is_flax_rnn(cls))
def test_flax_runs_a_zero_length_element_over_all_its_steps(adapter):
    """seq_lengths 0 is taken as T, in both directions: the carry is carries[seq_lengths - 1], index -1
    (_select_last_carry), and flip_sequences flips modulo T. The reference (and TF1's dynamic_rnn,
    below) would keep the initial carry: the suite refuses zero lengths. No upstream report found."""
    case = bidirectional_case(adapter)
    lengths = tuple(0 if n == 1 else n for n in case.padding.lengths)
    carry, outputs = flax_unmasked(adapter, case, padding=Padding(lengths))
    zero = lengths.index(0)
    full = run_stack(case.stack(), case.inputs(), case.state())
    bound = case.with_(padding=None).bound_vs_reference(DTYPE)
    comparisons = [compare(np.asarray(outputs)[zero], full["output"][:, zero], bound["output"][:, zero],
                           "outputs of the zero-length element vs its full-length run")]
    comparisons += [compare(np.asarray(c)[zero], full["h_n"][d, zero], bound["h_n"][d, zero],
                            f"carry {d} of the zero-length element vs its full-length run")
                    for d, c in enumerate(carry)]
    worst = max(comparisons, key=lambda c: c.ratio)
    assert worst.equivalent, worst.message()
    assert np.abs(np.asarray(carry[0])[zero] - case.state()["h"][0, zero]).max() > 0.1, "the initial carry kept"


@pytest.mark.applies_to(lambda cls: is_tf1(cls))
def test_tf1_dynamic_rnn_keeps_the_initial_state_of_a_zero_length_element(adapter):
    """dynamic_rnn copies the state through every step at or past an element's length and zeroes its
    output (rnn._rnn_step), from step 0 for a zero length: the reference's convention, unlike Flax's.
    (Run past the suite's own refusal of zero lengths, on run_native.)"""
    case = padded_cases(adapter)[0]  # time major, an initial state
    lengths = tuple(0 if n == 1 else n for n in case.padding.lengths)
    zero, state = lengths.index(0), case.state(DTYPE)
    result = adapter.run_native(adapter.to_native(case.stack(DTYPE)), case.inputs(DTYPE), state, case.config,
                                case.activation, padding=Padding(lengths))
    assert not np.any(result["outputs"][:, zero])
    for key, value in state.items():
        assert np.array_equal(result[adapter.state_names[key]][zero], value[0, zero]), key


@pytest.mark.applies_to(lambda cls: is_tf1(cls) and cls.family == "lstm")
def test_tf1_lstm_state_tuple_fed_back_as_returned_gives_the_same_bits(adapter):
    """The chunked runs of test_padded.py hand dynamic_rnn's final state on as arrays; a user feeds
    back the LSTMStateTuple itself. Both are the same call with the same bits."""
    import tensorflow as tf

    case = chunked_cases(adapter)[0]
    stack, chunks, state = case.stack(DTYPE), case.chunk_inputs(DTYPE), case.state(DTYPE)
    expected = adapter.run_chunks(stack, chunks, state, case.config)
    cell = adapter._loaded(adapter.to_native(stack), case.input_size, case.hidden_size, case.activation, DTYPE)
    final = adapter._cell_state(state, case.batch, case.hidden_size, np.dtype(DTYPE))
    for j, xs in enumerate(chunks):
        outputs, final = tf.compat.v1.nn.dynamic_rnn(cell, tf.constant(xs), initial_state=final, time_major=True)
        assert isinstance(final, adapter.legacy_cells.LSTMStateTuple)
        assert np.array_equal(outputs.numpy(), expected[j]["outputs"]), f"call {j + 1}"
        assert np.array_equal(final.c.numpy(), expected[j]["state.c"]), f"call {j + 1}"
        assert np.array_equal(final.h.numpy(), expected[j]["state.h"]), f"call {j + 1}"
