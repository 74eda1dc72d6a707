"""The reference's padded batches and chunked runs, checked against what they must equal.

A padded element is its own shorter sequence; a padded step computes nothing, so it adds no
rounding; a chunked run is the whole run. Each is asserted bitwise, on the reference values and
on the error bounds alike (they come from the same driver, ``rnn_equivalence.reference.stack.drive``).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnn_equivalence.reference.tolerance import chunked_reference_and_bound, reference_and_bound
from rnn_equivalence.reference.padding import Mask, Padding
from rnn_equivalence.reference.params import random_inputs, random_state
from rnn_equivalence.reference.stack import StackParams, run_stack

FAMILIES = [("rnn", "tanh", ""), ("lstm", "default", ""), ("gru", "default", "reset_after"),
            ("gru", "default", "reset_before")]
T, I, H = 7, 3, 4


def stack_of(family, activation, variant, layers=2, bidirectional=True, seed=0):
    return StackParams.random(family, I, H, layers, bidirectional, seed, activation=activation, variant=variant)


def state_of(stack, batch, seed=0):
    shape = (stack.num_layers * stack.num_directions, batch, H)
    keys = ("h", "c") if stack.family == "lstm" else ("h",)
    return {key: random_state(shape, [seed, k]) for k, key in enumerate(keys)}


def element_alone(stack, xs, state, padding, b):
    """Element b as its own unpadded sequence: its real steps only."""
    real = padding.real_steps(b, xs.shape[0])
    return run_stack(stack, xs[real, b:b + 1], {k: v[:, b:b + 1] for k, v in state.items()})


# A mask with holes (Keras's any mask): masked steps between real ones, for three elements over T = 7.
HOLES = np.array([[t in real for real in ({0, 2, 3, 5}, set(range(T)), {3})] for t in range(T)])


@pytest.mark.parametrize("family, activation, variant", FAMILIES)
@pytest.mark.parametrize("side", ["post", "pre", "holes"])
@pytest.mark.parametrize("padded_output", ["zeros", "repeat"])
def test_each_padded_element_is_its_own_shorter_sequence(family, activation, variant, side, padded_output):
    """Real steps and final states of a padded batch equal each element run alone over its real
    steps, bitwise, through two bidirectional layers (so the backward direction starts at each
    element's own last real step, and the layer above reads the real steps only); a mask with holes
    likewise (a masked step leaves the state as it was)."""
    stack = stack_of(family, activation, variant)
    padding = Mask.of(HOLES) if side == "holes" else Padding((5, 7, 1), side)
    xs, state = random_inputs(T, 3, I, 1), state_of(stack, 3)
    padded = run_stack(stack, xs, state, padding, padded_output)
    for b in range(3):
        alone, real = element_alone(stack, xs, state, padding, b), padding.real_steps(b, T)
        for key in padded:
            if key.endswith("_n"):
                np.testing.assert_array_equal(padded[key][:, b], alone[key][:, 0], err_msg=f"{key}, element {b}")
            else:
                np.testing.assert_array_equal(padded[key][real, b], alone[key][:, 0], err_msg=f"{key}, element {b}")


@pytest.mark.parametrize("side", ["post", "pre"])
def test_padded_steps_report_zeros_or_the_last_real_output_in_reading_order(side):
    stack = stack_of("rnn", "tanh", "", layers=1)
    padding = Padding((2, 7), side)
    xs = random_inputs(T, 2, I, 2)
    zeros = run_stack(stack, xs, None, padding, "zeros")["output"]
    repeat = run_stack(stack, xs, None, padding, "repeat")["output"]
    real = padding.mask(T)[:, 0]
    forward, backward = slice(0, H), slice(H, 2 * H)
    assert np.all(zeros[~real, 0] == 0)
    first, last = np.flatnonzero(real)[[0, -1]]
    # Forward: after the last real step, its output; before the first (pre-padding), zeros.
    np.testing.assert_array_equal(repeat[last + 1:, 0, forward],
                                  np.broadcast_to(repeat[last, 0, forward], (T - last - 1, H)))
    assert np.all(repeat[:first, 0, forward] == 0)
    # Backward, which reads T-1 .. 0: before its first real step (after `last` in time), zeros;
    # after its last (before `first` in time), the output at `first`.
    assert np.all(repeat[last + 1:, 0, backward] == 0)
    np.testing.assert_array_equal(repeat[:first, 0, backward], np.broadcast_to(repeat[first, 0, backward], (first, H)))
    np.testing.assert_array_equal(zeros[real], repeat[real])  # the conventions differ on padded steps only


def test_a_masked_step_between_real_ones_repeats_the_last_output_or_reports_zeros():
    stack = stack_of("gru", "default", "reset_after", layers=1, bidirectional=False)
    xs = random_inputs(T, 3, I, 3)
    zeros = run_stack(stack, xs, None, Mask.of(HOLES), "zeros")["output"]
    repeat = run_stack(stack, xs, None, Mask.of(HOLES), "repeat")["output"]
    for t in (1, 4, 6):  # element 0's masked steps: after real steps 0, 3 and 5
        assert np.all(zeros[t, 0] == 0)
        np.testing.assert_array_equal(repeat[t, 0], repeat[t - 1, 0])
    assert np.all(repeat[:3, 2] == 0) and np.all(repeat[4:, 2] == repeat[3, 2])  # one real step, at 3
    # the same mask as post-padding is the same run, bitwise
    post = Padding((5, 7, 1))
    np.testing.assert_array_equal(run_stack(stack, xs, None, Mask.of(post.mask(T)), "repeat")["output"],
                                  run_stack(stack, xs, None, post, "repeat")["output"])


def test_a_mask_with_holes_is_checked_by_name():
    with pytest.raises(ValueError, match=r"mask: expected a mask of shape \(T, batch\) = \(8, 3\)"):
        Mask.of(HOLES).check(8, 3)
    empty = HOLES.copy()
    empty[:, 2] = False
    with pytest.raises(ValueError, match="at least one real step per element"):
        Mask.of(empty).check(T, 3)
    with pytest.raises(ValueError, match="expected booleans of shape"):
        Mask.of(HOLES.astype(int))


def test_pre_and_post_padding_give_the_same_final_states():
    stack = stack_of("lstm", "default", "")
    lengths = (5, 7, 1)
    post, pre = Padding(lengths, "post"), Padding(lengths, "pre")
    xs_post = random_inputs(T, 3, I, 3)
    xs_pre = np.zeros_like(xs_post)
    for b, n in enumerate(lengths):
        xs_pre[T - n:, b] = xs_post[:n, b]
    a, b = run_stack(stack, xs_post, None, post), run_stack(stack, xs_pre, None, pre)
    for key in ("h_n", "c_n"):
        np.testing.assert_array_equal(a[key], b[key])


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, T), min_size=1, max_size=4), side=st.sampled_from(["post", "pre"]),
       family=st.sampled_from(FAMILIES), dtype=st.sampled_from(["float32", "float64"]))
def test_a_padded_step_adds_no_rounding(lengths, side, family, dtype):
    """The bound of each element of a padded batch equals the bound of that element run alone, and
    is exactly zero on the padded steps that report zeros: padding adds nothing to the error model."""
    stack = stack_of(*family)
    padding = Padding(tuple(lengths), side)
    xs, state = random_inputs(T, len(lengths), I, 4), state_of(stack, len(lengths))
    _, bound = reference_and_bound(stack, xs, state, dtype, padding=padding)
    for b in range(len(lengths)):
        real = padding.real_steps(b, T)
        _, alone = reference_and_bound(stack, xs[real, b:b + 1], {k: v[:, b:b + 1] for k, v in state.items()}, dtype)
        np.testing.assert_array_equal(bound["h_n"][:, b], alone["h_n"][:, 0])
        np.testing.assert_array_equal(bound["output"][real, b], alone["output"][:, 0])
        assert np.all(bound["output"][~padding.mask(T)[:, b], b] == 0)


@pytest.mark.parametrize("family, activation, variant", FAMILIES)
@pytest.mark.parametrize("sizes", [(1,) * T, (3, 4), (2, 1, 4)])
def test_a_chunked_run_is_the_whole_run_values_and_bounds(family, activation, variant, sizes):
    """Each chunk from the final state of the one before: the same results and the same bounds as
    the whole run, bitwise (a call boundary adds no rounding: reference/tolerance.py)."""
    stack = stack_of(family, activation, variant, layers=2, bidirectional=False)
    xs, state = random_inputs(T, 2, I, 5), state_of(stack, 2)
    whole_values, whole_bound = reference_and_bound(stack, xs, state, "float32")
    chunks = chunked_reference_and_bound(stack, xs, state, "float32", sizes=sizes)
    keys = [k for k in whole_values if not k.endswith("_n")]
    for key in keys:
        np.testing.assert_array_equal(np.concatenate([values[key] for values, _ in chunks]), whole_values[key])
        np.testing.assert_array_equal(np.concatenate([bound[key] for _, bound in chunks]), whole_bound[key])
    for key in [k for k in whole_values if k.endswith("_n")]:
        np.testing.assert_array_equal(chunks[-1][0][key], whole_values[key])
        np.testing.assert_array_equal(chunks[-1][1][key], whole_bound[key])


def test_chunks_refuse_a_bidirectional_stack_and_sizes_that_do_not_add_up():
    bi = stack_of("rnn", "tanh", "", layers=1, bidirectional=True)
    uni = stack_of("rnn", "tanh", "", layers=1, bidirectional=False)
    xs = random_inputs(T, 2, I, 6)
    with pytest.raises(ValueError, match="bidirectional layer cannot run a sequence in chunks"):
        chunked_reference_and_bound(bi, xs, None, "float32", sizes=(3, 4))
    with pytest.raises(ValueError, match=r"adding up to T=7, got \[3, 3\]"):
        chunked_reference_and_bound(uni, xs, None, "float32", sizes=(3, 3))


@pytest.mark.parametrize("lengths, message", [
    ((5, 8), r"lengths: expected every length in 1..T = 1..7 .* got \[5, 8\]"),
    ((5, 0), r"lengths: expected every length in 1..T = 1..7 .* got \[5, 0\]"),
    ((5, -1), r"lengths: expected every length in 1..T = 1..7 .* got \[5, -1\]"),
    ((5,), r"lengths: expected one length per batch element \(2, from the inputs\), got 1: \[5\]"),
])
def test_bad_lengths_are_refused_by_name(lengths, message):
    stack = stack_of("rnn", "tanh", "", layers=1)
    with pytest.raises(ValueError, match=message):
        run_stack(stack, random_inputs(T, 2, I, 7), None, Padding(lengths))


def test_a_mask_is_read_as_lengths_or_refused_by_name():
    padding = Padding((2, 7, 1), "pre")
    assert Padding.from_mask(padding.mask(T)) == padding
    assert Padding.from_mask(Padding((3, 7)).mask(T)) == Padding((3, 7))
    with pytest.raises(TypeError, match="mask: expected a boolean array of shape \\(T, batch\\), got dtype int64"):
        Padding.from_mask(padding.mask(T).astype(np.int64))
    with pytest.raises(ValueError, match=r"mask: expected shape \(T, batch\), got \(7, 3, 1\)"):
        Padding.from_mask(padding.mask(T)[:, :, None])
    holes = Padding((7, 7)).mask(T)
    holes[3, 0] = False
    with pytest.raises(ValueError, match="mask: expected each element's real steps to be one run"):
        Padding.from_mask(holes)
    with pytest.raises(ValueError, match="padding side: expected one of"):
        Padding((1,), "middle")
