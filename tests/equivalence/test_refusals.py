"""Bad input gets a clear error, never a wrong answer: for every system, the message says what
was expected and what was received, in the framework's own parameter names.

Sizes are read from the weights (the hidden size from the recurrent kernel) and the inputs,
and the argument that disagrees with them is the one named.
"""

import re

import numpy as np
import pytest

from rnn_equivalence.harness.cases import HOLED_MASK, Case, case_of, padded_cases
from rnn_equivalence.reference.padding import HOLES, Mask, Padding
from rnn_equivalence.reference.params import LSTM_ONLY_OPTIONS, OPTIONS


def case_with_state(adapter) -> Case:
    config = next((c for c in (adapter.mutation_config, *adapter.configs) if c.initial_state), adapter.mutation_config)
    return case_of(adapter, 3, 5, batch=2, steps=4, seed=11, config=config)


def run_native(adapter, case, native=None, xs=None, state="given", g=None):
    native = adapter.to_native(case.stack("float32"), case.config) if native is None else native
    return adapter.run_native(native, case.inputs("float32") if xs is None else xs,
                              case.state("float32") if state == "given" else state, case.config,
                              g or case.stack().activation)


def test_wrong_weight_shape_names_the_frameworks_parameter(adapter):
    case = case_with_state(adapter)
    native = adapter.to_native(case.stack("float32"), case.config)
    recurrent = adapter.recurrent_kernel(case.config)
    name = next((n for n in sorted(native) if n != recurrent and np.ndim(native[n]) >= 2), recurrent)
    bad = {**native, name: np.asarray(native[name])[..., :-1]}
    expected = f"{re.escape(name)}: expected shape .* = {re.escape(str(np.shape(native[name])))}, " \
               f"got {re.escape(str(bad[name].shape))}"
    with pytest.raises(ValueError, match=expected):
        run_native(adapter, case, bad)


def test_every_missing_weight_is_named(adapter):
    case = case_with_state(adapter)
    native = adapter.to_native(case.stack("float32"), case.config)
    for name in native:
        with pytest.raises(ValueError,
                           match=rf"missing \[{re.escape(repr(name))}\]|\(missing {re.escape(repr(name))}\)"):
            run_native(adapter, case, {n: v for n, v in native.items() if n != name})


def test_integer_weights_are_refused(adapter):
    case = case_with_state(adapter)
    native = adapter.to_native(case.stack("float32"), case.config)
    name = next(n for n in sorted(native) if n != adapter.recurrent_kernel(case.config))
    native[name] = np.asarray(native[name]).astype(np.int32)
    expected = "expected a float16, bfloat16, float32 or float64 array, got dtype int32"
    with pytest.raises(TypeError, match=rf"{re.escape(name)}: {expected}"):
        run_native(adapter, case, native)


def test_weights_in_another_dtype_than_the_inputs_are_refused(adapter):
    case = case_with_state(adapter)
    other = "float16" if "float16" not in adapter.dtypes else "int32"  # a dtype the system does not run in
    xs = case.inputs("float32").astype(other)
    with pytest.raises(TypeError, match=rf"inputs: expected dtype in .* got {other}"):
        run_native(adapter, case, xs=xs)
    if "float64" in adapter.dtypes:
        with pytest.raises(TypeError, match=r"expected dtype float64 \(the inputs'\), got float32"):
            run_native(adapter, case, xs=case.inputs("float64"), state=None)


def test_wrong_input_size_names_the_input_kernel(adapter):
    case = case_with_state(adapter)
    with pytest.raises(ValueError, match=r"expected shape .* \(input_size=2 from the inputs"):
        run_native(adapter, case, xs=case.inputs("float32")[..., :-1])


@pytest.mark.applies_to(lambda cls: True in cls.initial_states)
def test_wrong_state_width_names_the_state_not_a_weight(adapter):
    """The hidden size is read from the weights, so a state of the wrong width is blamed itself."""
    case = case_with_state(adapter)
    state = {key: value[..., :-1] for key, value in case.state("float32").items()}
    key = next(iter(state))
    with pytest.raises(ValueError, match=rf"{re.escape(adapter.state_names[key])}: expected shape .* "
                                          rf"\(batch from the inputs, hidden_size=5 from .*got .*4\)"):
        run_native(adapter, case, state=state)


@pytest.mark.applies_to(lambda cls: True in cls.initial_states)
def test_state_batch_mismatch_is_refused(adapter):
    case = case_with_state(adapter)
    state = {key: np.concatenate([value, value[:, :1]], axis=1) for key, value in case.state("float32").items()}
    with pytest.raises(ValueError, match=r"expected shape \(.*, batch, hidden_size\) = \(\d+, 2, 5\)"):
        run_native(adapter, case, state=state)


@pytest.mark.applies_to(lambda cls: True in cls.initial_states)
def test_unknown_state_is_refused(adapter):
    case = case_with_state(adapter)
    state = {**case.state("float32"), "m": case.state("float32")["h"]}
    with pytest.raises(ValueError, match=r"initial state: expected a dict with keys \[.*\] \(or None\), got \[.*'m'"):
        run_native(adapter, case, state=state)


def test_unsupported_activation_is_refused(adapter):
    case = case_with_state(adapter)
    with pytest.raises(ValueError, match=r"activation 'softplus' is not supported; expected one of"):
        run_native(adapter, case, g="softplus")


def test_parameters_of_another_cell_are_refused(adapter):
    """An LSTM's weights handed to a GRU, or a reset-after GRU's to a reset-before one, is a mistake
    the mapping could otherwise make fit."""
    case = case_with_state(adapter)
    other = {"rnn": dict(family="lstm"), "lstm": dict(family="gru"),
             "gru": dict(variant="reset_before" if adapter.variant == "reset_after" else "reset_after")}[adapter.family]
    wrong = case.with_(activation="", **{"variant": "", **other})
    with pytest.raises(ValueError, match=rf"computes a {adapter.family}.* cell; got parameters of a "):
        adapter.run(wrong.stack("float32"), case.inputs("float32"), None, case.config)


# --- padded batches ---------------------------------------------------------------------------
def padded_case(adapter):
    return padded_cases(adapter, "quick")[0]


def run_with_lengths(adapter, case, padding):
    return adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config, padding)


@pytest.mark.applies_to(lambda cls: bool(cls.padded_configs))
@pytest.mark.parametrize("lengths, why", [
    ((5, 10, 1, 7), "longer than T"), ((5, 9, 0, 7), "zero"), ((5, 9, -1, 7), "negative"), ((5, 9, 1), "too few")])
def test_bad_lengths_are_refused_in_the_frameworks_name(adapter, lengths, why):
    """A zero length is refused too, although some frameworks take it: they disagree on what it
    means (PyTorch refuses it; see the limitation tests)."""
    case = padded_case(adapter)
    expected = (rf"{re.escape(adapter.cell)}: {adapter.lengths_name}: expected "
                + (r"one length per batch element \(4" if why == "too few" else r"every length in 1..T = 1..9"))
    with pytest.raises(ValueError, match=expected):
        run_with_lengths(adapter, case, Padding(lengths, case.padding.side))


@pytest.mark.applies_to(lambda cls: bool(cls.padded_configs) and "pre" not in cls.padding_sides)
def test_pre_padding_is_refused_where_the_framework_assumes_post_padding(adapter):
    """Lengths alone cannot say where the padding is; a framework that takes lengths reads each
    element's first steps, so a pre-padded batch would silently run on its padding."""
    case = padded_case(adapter)
    with pytest.raises(ValueError, match=rf"{adapter.lengths_name}: expected padding on the side\(s\) \('post',\), "
                                         r"got 'pre'-padding"):
        run_with_lengths(adapter, case, Padding(case.padding.lengths, "pre"))


@pytest.mark.applies_to(lambda cls: bool(cls.padded_configs) and HOLES not in cls.padding_sides)
def test_a_mask_with_holes_is_refused_where_the_framework_takes_lengths(adapter):
    """A mask with masked steps between real ones (Keras's Masking on an all-zero step in the middle):
    lengths cannot say it, and a system that takes lengths would run the holes as real steps."""
    case = padded_case(adapter)
    with pytest.raises(ValueError, match=rf"{re.escape(adapter.cell)}: {adapter.lengths_name}: expected each "
                                         r"element's real steps as one run .* got a mask with holes"):
        run_with_lengths(adapter, case, Mask.of(HOLED_MASK))


@pytest.mark.applies_to(lambda cls: not cls.padded_configs)
def test_a_system_without_lengths_refuses_a_padded_batch(adapter):
    case = case_with_state(adapter)
    with pytest.raises(ValueError, match=r"padded batches are not supported by this system"):
        run_with_lengths(adapter, case, Padding((case.steps,) * case.batch))


def lacking_options(cls) -> list[str]:
    """Every option of the system's family (rnn_equivalence.reference.params.OPTIONS) it does not hold, as options sets
    to run: proj_clip comes with a projection (refused with it, or with the projection before it)."""
    lacking = [name for name in OPTIONS if name not in cls.supported_options
               and (cls.family == "lstm" or name not in LSTM_ONLY_OPTIONS)]
    return ["projection+proj_clip" if name == "proj_clip" and "projection" in cls.supported_options else name
            for name in lacking if name != "proj_clip" or "projection" in cls.supported_options]


# A system holding every option of its family (ONNX's RNN and GRU: gate_clip, their one) has nothing
# to refuse: the test is not generated for it, rather than passing on an empty loop.
@pytest.mark.applies_to(lambda cls: bool(lacking_options(cls)))
def test_an_option_the_system_lacks_is_refused_by_name(adapter):
    """A converter that meets an option the target lacks must not drop it silently: every option of
    the family (rnn_equivalence.reference.params.OPTIONS) outside the system's ``options`` is refused, naming the
    option and the framework's class (and why, where the framework has something of that name that
    computes another function: ``Adapter.refused_options``)."""
    lacking = lacking_options(adapter)
    assert lacking, adapter.name
    for options in lacking:
        case = case_of(adapter, 3, 5, batch=2, steps=3, seed=12, config=adapter.mutation_config, options=options)
        name = options.split("+")[-1]
        refused = (rf"option '{name}' refused: {re.escape(adapter.refused_options[name])}"
                   if name in adapter.refused_options else rf"has no option '{name}' .*dropped, not computed")
        with pytest.raises(ValueError, match=rf"{re.escape(adapter.cell)}:? {refused}"):
            adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
