"""No test that cannot fail: deliberately wrong mappings are caught, for every system.

A mutation rewrites the adapter's native weights the way a wrong mapping
would (a transposed kernel, swapped kernels or gates or directions or layers,
a dropped or doubled bias, the wrong concatenation order). On the square case
the shapes still fit, so only the values can give it away; on the non-square
case the adapter may instead refuse the shapes, which also counts as caught,
provided the error names the framework's own parameter.

Options are gotten wrong at the level of the cell (an option dropped, another activation), on
the options design's cases: ``test_options_dropped_or_confused_are_detected``.
"""

import os

import pytest

from rnn_equivalence.frameworks.base import Adapter
from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.cases import mutation_cases, one_step_mutation_case, options_to_get_wrong
from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.harness.detection import assert_detected, caught_beyond


def test_wrong_mapping_is_detected(adapter, dtype, mutation, mutation_case, record):
    """In float32, and in each half format the system runs in (frameworks/plan.py, CAPABILITY_DTYPES), from the
    case's data rounded to the format: caught beyond the half bound (``caught_beyond``). A mistake the half
    bound cannot tell from rounding on the square case (``TestPlan.mutations_within_bound``) is still not caught
    there (an entry that gets caught is stale, and fails), and caught on the one-step case instead
    (``one_step_mutation_case``), which is what is recorded."""
    case = mutation_case
    hidden = (case.input_size == case.hidden_size and mutation in adapter.mutations_within_bound.get(dtype, ()))
    if hidden:
        comparison = wrong_run(adapter, dtype, mutation, case)
        # Not caught there: within the bound (torch's half rows), or beyond it by less than ``caught_beyond``
        # (Keras's bfloat16 layers: 1.8 to 2.2 times, frameworks/keras_plan.py), which a right run may not reach.
        assert comparison.ratio <= caught_beyond(dtype), (
            f"{adapter.name} lists '{mutation}' as not caught in {dtype} on the mutation case "
            f"(mutations_within_bound), but it is caught there: remove the entry. {comparison.message()}")
        case = one_step_mutation_case(adapter)
    try:
        comparison = wrong_run(adapter, dtype, mutation, case)
    except ValueError as error:
        assert "expected shape" in str(error), error
        square = case.input_size == case.hidden_size and "projection" not in case.option_names  # P < H always
        assert not square, f"a square case must be caught by value: {error}"
        record("mutation", adapter, dtype=dtype, mutation=mutation, detected=True, by="shape check")
        return
    record("mutation", adapter, dtype=dtype, mutation=mutation, detected=not comparison.equivalent,
           by="values on one step" if hidden else "values", ratio=comparison.ratio)
    assert comparison.ratio > caught_beyond(dtype), f"mutation went undetected: {comparison.message()}"


def wrong_run(adapter, dtype, mutation, case):
    """The system run with ``mutation`` made in its native weights, against the case's reference and bound."""
    wrong = adapter.mutations[mutation](adapter.to_native(case.stack(dtype), case.config))
    actual = adapter.run_native(wrong, case.inputs(dtype), case.state(dtype), case.config, case.stack().activation)
    return compare_outputs(actual, adapter.arrange(case.reference(dtype), case.config),
                           adapter.arrange(case.bound_vs_reference(arithmetic_of(adapter, dtype)), case.config),
                           f"{adapter.describe()} with mutation '{mutation}', {case.describe(dtype)}")


# The hard sigmoid of the other Keras version (rnn_equivalence.reference.activations): the name both go by.
CONFUSED_ACTIVATIONS = {"hard_sigmoid_0.2": "hard_sigmoid_relu6", "hard_sigmoid_relu6": "hard_sigmoid_0.2"}


def options_gotten_wrong(adapter, case, dtype):
    """The case's cell as a converter gets its options wrong, as cells the system takes: each option
    dropped (a projection cannot be: W_h has its size, and its mutations are the adapters'), the
    system's default activations for the case's, and the other hard sigmoid for one."""
    stack = case.stack(dtype)
    for name in case.option_names:
        if name != "projection":
            yield f"{name} dropped", stack.map(lambda p, name=name: p.without_option(name))
    default = adapter.activations[0]
    if case.activation != default:
        yield f"activation {default} for {case.activation}", stack.map(lambda p: p.replace(activation=default))
    confused = ",".join(CONFUSED_ACTIVATIONS.get(name, name) for name in case.activation.split(","))
    if confused != case.activation and confused in adapter.activations:
        yield f"activation {confused} for {case.activation}", stack.map(lambda p: p.replace(activation=confused))


@pytest.mark.design("options")
@pytest.mark.known_issues
@pytest.mark.applies_to(lambda cls: bool(options_to_get_wrong(cls)),
                        short_of_full=lambda cls: bool(options_to_get_wrong(cls)) and not cls.converter)
def test_options_dropped_or_confused_are_detected(adapter, case, record):
    """No option test that cannot fail: on the options design's cases (where every threshold binds),
    the system run with an option dropped, or another activation, is far from the reference. Short of
    full depth, not on a converted system: each such run is a conversion of its own that re-tests the
    source system's options, which its own run of this test checks; the converter's handling of options
    is what the design's option cases check (rnn_equivalence.harness.depth)."""
    dtype = "float32"
    wrong = list(options_gotten_wrong(adapter, case, dtype))
    assert wrong, f"{case}: no option or activation to get wrong"
    for what, params in wrong:
        assert_detected(adapter, case, what, record, params, dtype)


def builds_from_activation_arguments_here(cls):
    """A gated system whose cell takes its activations as arguments (``Adapter.activation_arguments``),
    run in this process: a monkeypatch here reaches no child process (Keras on another backend)."""
    in_this_process = all(os.environ.get(key) == value for key, value in cls.process_env.items())
    return cls.family != "rnn" and in_this_process and cls.activation_arguments is not Adapter.activation_arguments


@pytest.mark.applies_to(lambda cls: builds_from_activation_arguments_here(cls),
                        short_of_full=lambda cls: builds_from_activation_arguments_here(cls) and not cls.converter)
def test_activation_arguments_exchanged_are_detected(adapter, monkeypatch, record):
    """The gates' and the candidate's activation given the wrong way round (Keras's
    recurrent_activation and activation, Flax's gate_fn and activation_fn), on every spec the system
    declares: far from the reference, on the square mutation case. Short of full depth, not on a converted
    system: the exchange is made in the source Keras layer, whose own run of this test checks it
    (rnn_equivalence.harness.depth)."""
    built = adapter.activation_arguments

    def exchanged(spec):
        (f_name, f), (g_name, g) = built(spec).items()
        return {f_name: g, g_name: f}

    monkeypatch.setattr(adapter, "activation_arguments", exchanged)
    specs = list(adapter.activations)
    assert specs
    for spec in specs:
        f_name, g_name = built(spec)
        case = mutation_cases(adapter)[0].with_(activation=spec)
        assert_detected(adapter, case, f"{f_name} and {g_name} exchanged ({spec})", record)
