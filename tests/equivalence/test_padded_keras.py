"""Keras RNN layers with a mask: what they do beyond what test_padded.py compares, measured on the
installed versions (keras 3 on each backend, and Keras 2, ``tf_keras``).

test_padded.py compares the Keras layers with the reference on the configurations they declare
(``rnn_equivalence.frameworks.keras_plan.PADDED_CONFIGS``). Here: a ``Masking`` layer's mask lost when the call also
takes ``initial_state`` (Keras 3 only), the jax backend's output on steps masked before the first
real one, ``zero_output_for_mask`` without ``return_sequences``, ``go_backwards`` with a mask,
and masks the suite's ``Padding`` cannot describe (holes, an all-masked row), which Keras takes.
"""

import numpy as np
import pytest

from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import StackParams

DTYPE = "float32"  # float64 on jax and torch is a known upstream issue (harness/known_issues.py)
ORDERS_OF_MAGNITUDE = 100
LENGTHS = (5, 9, 1, 7)
SEQUENCES = (("return_sequences", True), ("return_state", True))


def is_keras_simple_rnn_layer(cls, modules=("keras", "tf_keras"), backends=(None, "tensorflow", "jax", "torch")):
    return (cls.layer and cls.family == "rnn" and getattr(cls, "module", None) in modules
            and getattr(cls, "backend", None) in backends
            and cls.__module__ == "rnn_equivalence.frameworks.keras_adapters")  # not a converted model


def case(adapter, config, padding, seed=900):
    return case_of(adapter, 3, 6, len(padding.lengths), 9, seed, config, padding=padding)


def reference(case, xs=None, padding="case", padded_output=None):
    """The float64 results and the allowed |computed in DTYPE - them| for the case's weights and
    state, over ``xs`` (the case's inputs unless given) with ``padding`` (the case's unless given)."""
    xs = case.inputs() if xs is None else xs
    padding = case.padding if isinstance(padding, str) else padding
    padded_output = padded_output or case.padded_output
    exact, bound = reference_and_bound(case.stack(), xs, case.state(), DTYPE, 0.0, padding, padded_output)
    _, exact_bound = reference_and_bound(case.stack(), xs, case.state(), "float64", 0.0, padding, padded_output)
    return exact, pair_bound(bound, exact_bound)


def run(adapter, case, padding="case", xs=None):
    """The adapter's own run on the case (``run_native``: a padding it would refuse is taken too)."""
    padding = case.padding if isinstance(padding, str) else padding
    xs = case.inputs(DTYPE) if xs is None else xs
    return adapter.run_native(adapter.to_native(case.stack(DTYPE), case.config), xs, case.state(DTYPE), case.config,
                              case.activation, padding=padding)


def against(adapter, case, actual, exact_and_bound, what):
    exact, bound = exact_and_bound
    return compare_outputs(actual, adapter.arrange(exact, case.config), adapter.arrange(bound, case.config),
                           f"{adapter.describe()} {what}, {case.describe(DTYPE)}")


MASKING_FROM_A_STATE = LayerConfig(1, False, options=(*SEQUENCES, ("mask", "Masking")))


@pytest.mark.applies_to(lambda cls: is_keras_simple_rnn_layer(cls))
def test_masking_layer_with_an_initial_state(adapter):
    """Keras 3 drops a Masking layer's mask when the RNN call also takes ``initial_state``:
    Layer.__call__ (keras/src/layers/layer.py, "Populate mask argument(s)") fills ``mask`` from
    the inputs' ``_keras_mask`` only when the call has one tensor argument. The layer then runs
    over every step, the padded ones as Masking zeroed them. Keras 2 (tf_keras) keeps the mask.
    (Explicit ``mask=`` is kept in both: test_padded.py's first configuration.)"""
    padded = case(adapter, MASKING_FROM_A_STATE, Padding(LENGTHS))
    actual = run(adapter, padded)
    masked = against(adapter, padded, actual, reference(padded), "Masking + initial_state vs the padded reference")
    zeroed = padded.inputs().copy()
    zeroed[~padded.padding.mask(padded.steps)] = 0.0  # what Masking hands on: padded steps zeroed
    unmasked = against(adapter, padded, actual, reference(padded, zeroed, padding=None),
                       "Masking + initial_state vs an unmasked run over zeroed padding")
    if adapter.module == "keras":
        assert unmasked.equivalent, unmasked.message()
        assert masked.ratio > ORDERS_OF_MAGNITUDE, f"Keras 3 now keeps the mask: {masked.message()}"
    else:
        assert masked.equivalent, masked.message()


REPEAT_FROM_A_STATE = LayerConfig(1, False, options=(*SEQUENCES, ("mask", "argument")))


@pytest.mark.applies_to(lambda cls: is_keras_simple_rnn_layer(cls, ("keras",)))
def test_steps_masked_before_the_first_real_one(adapter):
    """zero_output_for_mask=False: tensorflow and torch report zeros on steps masked before the
    first real one (their loop starts from a zero previous output); jax reports the initial state
    (keras/src/backend/jax/rnn.py: ``output_tm1 = states[0]``). Pre-padded, from an initial state;
    every other step agrees with the reference on all three."""
    padded = case(adapter, REPEAT_FROM_A_STATE, Padding(LENGTHS, "pre"))
    actual = run(adapter, padded)
    exact, bound = reference(padded)
    leading = ~padded.padding.mask(padded.steps)  # (T, batch): pre-padding's steps all come first
    if adapter.backend == "jax":
        exact = {**exact, "output": np.where(leading[..., None], padded.state()["h"][0][None], exact["output"])}
    comparison = against(adapter, padded, actual, (exact, bound),
                         "vs the reference" + (", the initial state on leading masked steps" if adapter.backend == "jax"
                                               else ""))
    assert comparison.equivalent, comparison.message()
    on_leading = actual["output"].transpose(1, 0, 2)[leading]
    size = np.abs(on_leading).max()
    assert (size > 0.1) if adapter.backend == "jax" else (size == 0), f"|output| on leading masked steps: {size}"


LAST_OUTPUT_ZEROED = LayerConfig(1, False, options=(("return_sequences", False), ("return_state", True),
                                                    ("zero_output_for_mask", True), ("mask", "argument")))


@pytest.mark.applies_to(lambda cls: is_keras_simple_rnn_layer(cls))
def test_zero_output_for_mask_without_return_sequences(adapter):
    """``zero_output_for_mask=True`` with ``return_sequences=False``: the output is the last step's,
    and a post-padded row's last step is masked, so its output is zeros, not its final state (the
    returned state is right). Bidirectional avoids it by forcing zero_output_for_mask to
    return_sequences. The same on every backend and in Keras 2."""
    padded = case(adapter, LAST_OUTPUT_ZEROED, Padding(LENGTHS))
    actual = run(adapter, padded)
    exact, bound = (adapter.arrange(r, padded.config) for r in reference(padded))
    states = {k: v for k, v in actual.items() if k != "output"}
    comparison = compare_outputs(states, {k: exact[k] for k in states}, {k: bound[k] for k in states},
                                 f"{adapter.describe()} returned state vs the reference, {padded.describe(DTYPE)}")
    assert comparison.equivalent, comparison.message()
    short = np.array(LENGTHS) < padded.steps
    assert np.all(actual["output"][short] == 0), "a short row's output is not zeros"
    assert np.array_equal(actual["output"][~short], next(iter(states.values()))[~short])


BACKWARDS = LayerConfig(1, False, initial_state=False,
                        options=(*SEQUENCES, ("go_backwards", True), ("mask", "argument")))


@pytest.mark.applies_to(lambda cls: is_keras_simple_rnn_layer(cls))
@pytest.mark.parametrize("side", ["post", "pre"])
def test_go_backwards_with_a_mask(adapter, side):
    """go_backwards reads x_T..x_1 with the mask reversed alongside and reports in reading order:
    the reference over the reversed inputs, padded on the other side, repeating (zeros before the
    first real step read). No initial state, so the jax backend agrees too (see above).
    test_padded.py could compare it if its reference flipped the padding side for a case that
    reads reversed."""
    padded = case(adapter, BACKWARDS, Padding(LENGTHS, side))
    flipped = Padding(LENGTHS, "pre" if side == "post" else "post")
    comparison = against(adapter, padded, run(adapter, padded), reference(padded, padded.inputs()[::-1], flipped),
                         "go_backwards vs the reference over reversed inputs, padding flipped")
    assert comparison.equivalent, comparison.message()


HOLES = np.array([[1, 1, 0, 0, 1, 1, 0, 1, 1],   # two holes
                  [1] * 9,                        # full length
                  [0, 1, 0, 1, 0, 1, 0, 1, 0],    # every other step
                  [0] * 9], bool).T               # all masked: (T, batch)


@pytest.mark.applies_to(lambda cls: is_keras_simple_rnn_layer(cls, backends=(None, "tensorflow", "torch")))
def test_any_mask_holds_the_state_over_masked_steps(adapter):
    """Keras takes any mask, not only a padded one: over a masked step the state is held and the
    last real output repeated (zeros before the first); an all-masked row returns its initial
    state and zeros. Each element is the reference run over its unmasked steps alone. (On GPU,
    tensorflow's cuDNN path refuses a mask that is not right-padded; keras/src/backend/tensorflow/rnn.py.)"""
    padded = case(adapter, REPEAT_FROM_A_STATE, Padding((9,) * 4))
    xs, state = padded.inputs(), padded.state()
    actual = run(adapter, padded, HOLES)  # run_native takes a raw mask
    out, h = actual["output"], actual["state layer0.forward"]
    cell = StackParams([[padded.stack().first]])
    for b in range(HOLES.shape[1]):
        real = np.flatnonzero(HOLES[:, b])
        if not len(real):
            assert np.array_equal(h[b], state["h"][0, b].astype(DTYPE)) and not out[b].any(), "all-masked row"
            continue
        exact, bound = reference_and_bound(cell, xs[real, b:b + 1], {"h": state["h"][:, b:b + 1]}, DTYPE)
        _, exact_bound = reference_and_bound(cell, xs[real, b:b + 1], {"h": state["h"][:, b:b + 1]}, "float64")
        bound = pair_bound(bound, exact_bound)
        rows = np.concatenate([[0], np.cumsum(HOLES[:, b])])[1:]  # real steps read so far; 0: none yet
        table = np.concatenate([np.zeros((1, 1, padded.hidden_size)), exact["output"]])
        table_bound = np.concatenate([np.zeros((1, 1, padded.hidden_size)), bound["output"]])
        comparison = compare_outputs({"output": out[b], "h": h[b]},
                                     {"output": table[rows, 0], "h": exact["h_n"][0, 0]},
                                     {"output": table_bound[rows, 0], "h": bound["h_n"][0, 0]},
                                     f"{adapter.describe()} element {b}, mask {HOLES[:, b].astype(int).tolist()}")
        assert comparison.equivalent, comparison.message()
