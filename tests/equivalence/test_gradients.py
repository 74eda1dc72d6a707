"""Training equivalence: the gradients each framework's own autodiff computes, mapped back to the
canonical layout by the adapter's way back (``Adapter.gradients_from_native``), against the float64
backward pass through time (reference/backward.py), within the running error bound of that pass
(reference/tolerance.py, ``Arithmetic.slope`` and ``outer_sum``).

The loss weights every output a system returns by a fixed cotangent (harness/gradients.py), so every
path back is exercised: the gradients of every weight, of the inputs and of the initial state are
compared. Systems without autodiff here (``Adapter.autodiff`` empty: the NumPy formulas, ONNX
runtimes and exported ONNX graphs) are not in these tests, by name, rather than skipped.
"""

import re

import numpy as np
import pytest

from rnn_equivalence.frameworks.base import GATES
from rnn_equivalence.harness.cases import gradient_cases, mutation_cases
from rnn_equivalence.reference.comparison import assert_dtype, assert_within_bound, compare_outputs
from rnn_equivalence.harness.detection import ORDERS_OF_MAGNITUDE
from rnn_equivalence.harness.gradients import flatten, reference_gradients


def run_gradients(adapter, case, dtype):
    cotangents, expected, bounds = reference_gradients(adapter, case, dtype)
    stack, state = case.stack(dtype), case.state(dtype)
    result = adapter.gradients(stack, case.inputs(dtype), state, case.config, cotangents, case.padding)
    return flatten(result, stack, state is not None), without_b_hn(adapter, expected, stack), bounds


def without_b_hn(adapter, expected, stack):
    """A GRU with no slot for b_hn (Flax nnx, ``zero_b_hn``) runs with b_hn = 0 and has no gradient of it:
    the reference's dL/db_hn, which the system cannot compute, is left out (compared as 0 = 0)."""
    if not adapter.zero_b_hn:
        return expected
    H, out = stack.hidden_size, dict(expected)
    for name in out:
        if name.startswith("b_h"):
            out[name] = out[name].copy()
            out[name][2 * H:] = 0.0
    return out


@pytest.mark.design("gradients")
@pytest.mark.applies_to(lambda cls: bool(cls.autodiff))
@pytest.mark.known_issues
def test_gradients_match_float64_backward_pass(adapter, activation_spec, dtype, case, record):
    actual, expected, bounds = run_gradients(adapter, case, dtype)
    comparison = compare_outputs(actual, expected, bounds, f"{adapter.describe()} gradients ({adapter.autodiff}) vs "
                                                           f"float64 backward pass, {case.describe(dtype)}")
    record("gradients", adapter, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)  # first: the values are what a known issue is about
    assert_dtype(actual, dtype, adapter.describe())


def summed_bias_halved(adapter, params):
    """The mistake a converter makes with a stored sum b = b_x + b_h: dL/db split in half between b_x and
    b_h, as if the two shared it, where each receives the whole of it."""
    H = params.first.hidden_size
    summed = [j for j, gate in enumerate(GATES[adapter.family]) if gate not in adapter.kept_hidden_biases]

    def halve(p):
        b_x, b_h = p.b_x.copy(), p.b_h.copy()
        for j in summed:
            b_x[j * H:(j + 1) * H] /= 2
            b_h[j * H:(j + 1) * H] = b_x[j * H:(j + 1) * H]
        return p.replace(b_x=b_x, b_h=b_h)

    return params.map(halve) if summed and params.has_bias else None


def changes(mutate, weights) -> bool:
    """Whether a wrong mapping touches these weights: one of an option's weight or setting (a
    projection's, a clip's) does not, on a cell without options."""
    try:
        mutated = mutate(weights)
    except KeyError:
        return False
    return set(mutated) != set(weights) or any(
        np.shape(mutated[k]) != np.shape(weights[k]) or np.any(mutated[k] != weights[k]) for k in weights)


@pytest.mark.applies_to(lambda cls: bool(cls.autodiff))
def test_gradients_mapped_back_wrong_are_detected(adapter, record):
    """No gradient test that cannot fail: the native gradients mapped back the wrong way (each of the
    adapter's wrong mappings applied to them: gates not reordered, a kernel not transposed, directions
    swapped, ...), and a summed bias's gradient halved between b_x and b_h, are far from the reference,
    or refused by their shapes, naming the parameter, on a non-square case."""
    case, dtype = mutation_cases(adapter)[0].with_(options=""), "float32"  # gradients: cells without options
    cotangents, expected, bounds = reference_gradients(adapter, case, dtype)
    stack, state, config = case.stack(dtype), case.state(dtype), case.config
    expected = without_b_hn(adapter, expected, stack)
    native = adapter.to_native(stack, config)
    result = adapter.gradients_native(native, case.inputs(dtype), state, config, stack.activation, cotangents)
    right = adapter.gradients_from_native(result["weights"], config)
    wrong = {f"gradients with mutation '{name}'": lambda mutate=mutate: adapter.gradients_from_native(
        mutate(result["weights"]), config) for name, mutate in adapter.mutations.items()
        if changes(mutate, result["weights"])}
    if summed_bias_halved(adapter, right) is not None:
        wrong["the summed bias's gradient halved between b_x and b_h"] = lambda: summed_bias_halved(adapter, right)
    assert wrong, f"{adapter.name}: no wrong way back to try"
    for what, make in wrong.items():
        try:
            params = make()
        except ValueError as error:
            assert "expected shape" in str(error), error
            assert case.input_size != case.hidden_size or "projection" in case.option_names, \
                f"a square case must be caught by value: {error}"
            record("mutation", adapter, mutation=what, detected=True, by="shape check")
            continue
        actual = flatten({**result, "params": params}, stack, state is not None)
        comparison = compare_outputs(actual, expected, bounds, f"{adapter.describe()} {what}, {case.describe(dtype)}")
        record("mutation", adapter, mutation=what, detected=not comparison.equivalent, by="values",
               ratio=comparison.ratio)
        assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"{what} went undetected: {comparison.message()}"


# --- the forward pass's non-equivalences carry over to the gradients ----------------------------------
def prove_gradients_differ(record, adapter, other, actual, expected, bounds, what, reason):
    comparison = compare_outputs(actual, expected, bounds, what)
    record("nonequivalence", adapter, other=other, dtype="float32", reason=reason, **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.applies_to(lambda cls: cls.name == "torch-gru")
def test_gru_gradients_reset_after_are_not_reset_before(adapter, record):
    """PyTorch's GRU (reset after) differentiated, against the backward pass of a reset-before GRU with
    the same weights, data and loss."""
    case, dtype = gradient_cases(adapter, "quick")[0], "float32"
    actual, _, bounds = run_gradients(adapter, case, dtype)
    _, before, before_bounds = reference_gradients(adapter, case.with_(variant="reset_before"), dtype)
    prove_gradients_differ(record, adapter, "gru reset_before (reference)", actual, before,
                           {k: bounds[k] + before_bounds[k] for k in bounds},
                           f"{adapter.describe()} gradients vs a reset-before GRU's, {case.describe(dtype)}",
                           "GRU reset after vs reset before: gradients")


@pytest.mark.applies_to(lambda cls: cls.forget_bias and cls.autodiff)
def test_tf1_gradients_need_forget_bias_folded(adapter, record):
    """TF1's LSTM cells add forget_bias to f: weights ported without folding it out compute another cell,
    and so other gradients, than the canonical one."""
    case, dtype = gradient_cases(adapter, "quick")[0], "float32"
    cotangents, expected, bounds = reference_gradients(adapter, case, dtype)
    stack, state = case.stack(dtype), case.state(dtype)
    unfolded = adapter.mutations["forget_bias not folded"](adapter.to_native(stack, case.config))
    result = adapter.gradients_native(unfolded, case.inputs(dtype), state, case.config, stack.activation, cotangents)
    actual = flatten({**result, "params": adapter.gradients_from_native(result["weights"], case.config)}, stack,
                     state is not None)
    prove_gradients_differ(record, adapter, "lstm (reference)", actual, expected, bounds,
                           f"{adapter.describe()} gradients with forget_bias={adapter.forget_bias} not folded, "
                           f"{case.describe(dtype)}", f"TF1 forget_bias={adapter.forget_bias} unfolded: gradients")


@pytest.mark.applies_to(lambda cls: bool(cls.autodiff))
def test_bad_cotangents_and_optimizer_arguments_are_refused(adapter):
    """A cotangent of the wrong shape (one column short: a reshape would not notice a transposed one of
    the right size either) is refused naming it, and an optimizer argument the suite's optimizers do not
    take is refused before a run, naming the framework's optimizer."""
    case, dtype = gradient_cases(adapter, "quick")[0], "float32"
    cotangents, _, _ = reference_gradients(adapter, case, dtype)
    args = (case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    key = sorted(cotangents)[0]
    with pytest.raises(ValueError, match=re.escape(f"cotangents[{key!r}]: expected the output's shape")):
        adapter.gradients(*args, {**cotangents, key: cotangents[key][..., :-1]}, case.padding)
    if adapter.optimizers:
        with pytest.raises(ValueError, match=r"unknown argument\(s\) \['momentum'\]"):
            adapter.optimizer_step(*args, cotangents, {"name": "sgd", "learning_rate": 0.1, "momentum": 0.9})
