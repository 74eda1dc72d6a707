"""Padded batches in ONNX: what each runtime does with ``sequence_lens``, measured, and what the
PyTorch exporters make of a packed sequence.

- ONNX Runtime runs each element over its first ``sequence_lens[b]`` steps (test_padded.py holds
  it to the reference, forward and bidirectional; the reverse direction is checked here).
- ``onnx.reference`` ignores ``sequence_lens`` (its "padded" row in
  ``rnn_equivalence.harness.known_issues``): here its results are shown to be the unpadded run's,
  within the bound, and far from the padded one.
- Lengths the suite refuses (``Padding.check``), run past the adapter's check: ONNX Runtime answers
  a zero length with zeros, final state included (not the initial state), and refuses lengths above
  T or below 0 itself.
- The legacy exporter turns ``pack_padded_sequence`` into ``sequence_lens``; the model it writes
  takes lengths PyTorch refuses. The dynamo exporter refuses the packing module.
"""

import numpy as np
import pytest

from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.harness.cases import LENGTHS, PADDED_STEPS, case_of, padded_cases
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.harness.known_issues import rows_of
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from rnn_equivalence.reference.padding import Padding

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect
# ONNX Runtime 1.32's wording; 1.24 says "> 0 and < seq_length" for the same refusal (the version matrix)
ORT_INVALID_LENGTHS = r"Invalid value/s in sequence_lens\. All values must be >=? 0 and <=? seq_length\. seq_length=9"


def is_onnx_operator(cls, runtime):
    return cls.__module__ == "rnn_equivalence.frameworks.onnx_rnn" and getattr(cls, "runtime", None) == runtime


def compared(adapter, case, dtype, actual, expected, bound, what):
    return compare_outputs(actual, adapter.arrange(expected, case.config), adapter.arrange(bound, case.config),
                           f"{adapter.describe()} vs {what}, {case.describe(dtype)}")


def run_padded(adapter, case, dtype, padding=None):
    native = adapter.to_native(case.stack(dtype), case.config)
    return adapter.run_native(native, case.inputs(dtype), case.state(dtype), case.config, case.activation,
                              padding=padding or case.padding)


# --- onnx.reference: sequence_lens is ignored ----------------------------------------------------
@pytest.mark.applies_to(lambda cls: is_onnx_operator(cls, "onnx.reference"))
def test_onnx_reference_ignores_sequence_lens(adapter, record):
    """Every element runs all T steps: the results are the unpadded run's (within its bound), Y is
    not zero on padded steps and Y_h is the state after step T, far outside the padded run's bound.
    The reason the padded tests of these systems are strict expected failures."""
    assert rows_of(adapter.name, ("padded",)), f"{adapter.name}: no padded row in rnn_equivalence.harness.known_issues"
    differences = []
    for case in padded_cases(adapter):
        for dtype in adapter.dtypes:
            actual = run_padded(adapter, case, dtype)
            unpadded = case.with_(padding=None)
            full = compared(adapter, case, dtype, actual, unpadded.reference(), unpadded.bound_vs_reference(dtype),
                            "the float64 reference run to full length (sequence_lens ignored)")
            padded = compared(adapter, case, dtype, actual, case.reference(), case.bound_vs_reference(dtype),
                              "the float64 reference of the padded batch")
            assert_within_bound(full)
            assert padded.ratio > ORDERS_OF_MAGNITUDE, padded.message()
            differences.append((padded.max_error, dtype, padded))
    _, dtype, smallest = min(differences, key=lambda d: d[0])  # the least the bug changes
    record("nonequivalence", adapter, other="the padded batch's reference", dtype=dtype,
           reason="onnx.reference ignores sequence_lens: every element runs all T steps", **smallest.as_record())


# --- ONNX Runtime: the reverse direction, and the lengths the suite refuses ---------------------
def reverse_case(adapter):
    config = LayerConfig(1, False, options=(("direction", "reverse"),))
    return case_of(adapter, 5, 4, len(LENGTHS), PADDED_STEPS, 531, config, padding=Padding(LENGTHS))


@pytest.mark.applies_to(lambda cls: is_onnx_operator(cls, "ONNX Runtime"))
def test_onnx_runtime_reverse_direction_starts_at_each_elements_last_real_step(adapter, record):
    """direction="reverse" with sequence_lens: element b reads x[L_b - 1] .. x[0], reported in time
    order, zeros on its padded steps. The reference reads the batch reversed, where the padding comes
    first: pre-padding. (The padded case design cannot hold this configuration: a system that reads
    reversed is compared on the reversed batch, and the case's padding is not flipped with it.)"""
    case, dtype = reverse_case(adapter), "float32"
    assert case.reversed_inputs
    xs, state = case.inputs()[::-1], case.state()
    reversed_padding = Padding(case.padding.lengths, "pre")
    expected, bound = reference_and_bound(case.stack(), xs, state, dtype, padding=reversed_padding)
    exact = reference_and_bound(case.stack(), xs, state, "float64", padding=reversed_padding)[1]
    comparison = compared(adapter, case, dtype, run_padded(adapter, case, dtype), expected, pair_bound(bound, exact),
                          "the float64 reference, read reversed from each element's last real step")
    record("padded", adapter, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: is_onnx_operator(cls, "ONNX Runtime"))
def test_onnx_runtime_answers_a_zero_length_with_zeros(adapter):
    """A zero length (refused by the suite, and by PyTorch's pack_padded_sequence) is taken: that
    element's Y is zero, and so are its Y_h and Y_c, not its initial state (what the reference's
    convention, the state after the last real step, would give; onnx/onnx#1674 asked which, unanswered).
    The other elements are unaffected."""
    dtype = "float32"
    for case in padded_cases(adapter):
        lengths = list(case.padding.lengths)
        empty = lengths.index(min(lengths))
        lengths[empty] = 0
        actual = run_padded(adapter, case, dtype, Padding(lengths))
        initial = case.state(dtype)
        for name, value in actual.items():  # Y (T, D, batch, H); Y_h, Y_c (D, batch, H)
            assert np.all(np.take(value, empty, axis=value.ndim - 2) == 0), name
        assert np.all(initial["h"][:, empty] != 0)  # so zeros are not the initial state
        others = [b for b in range(case.batch) if b != empty]
        rest = case.with_(batch=len(others))
        xs, state = case.inputs()[:, others], {k: v[:, others] for k, v in case.state().items()}
        sub = Padding([lengths[b] for b in others])
        expected, bound = reference_and_bound(case.stack(), xs, state, dtype, padding=sub)
        exact = reference_and_bound(case.stack(), xs, state, "float64", padding=sub)[1]
        kept = {name: np.take(value, others, axis=value.ndim - 2) for name, value in actual.items()}
        assert_within_bound(compared(adapter, rest.with_(padding=sub), dtype, kept, expected,
                                     pair_bound(bound, exact), "the float64 reference of the other elements"))


@pytest.mark.applies_to(lambda cls: is_onnx_operator(cls, "ONNX Runtime"))
@pytest.mark.parametrize("lengths", [(5, 10, 1, 7), (5, 9, -1, 7)], ids=["longer-than-T", "negative"])
def test_onnx_runtime_refuses_lengths_outside_0_to_T(adapter, lengths):
    case = padded_cases(adapter, "quick")[0]
    with pytest.raises(Exception, match=ORT_INVALID_LENGTHS):
        run_padded(adapter, case, "float32", Padding(lengths))


# --- the PyTorch exporters on a packed sequence ---------------------------------------------------
@pytest.mark.applies_to(lambda cls: cls.__module__ == "rnn_equivalence.frameworks.torch_export" and cls.dynamo)
def test_dynamo_exporter_refuses_a_packed_sequence(adapter):
    """A module that packs its input with lengths it is given (pack_padded_sequence, the layer,
    pad_packed_sequence) does not export: torch.export cannot guard on the packed batch_sizes, which
    depend on the lengths' values (pytorch/pytorch#112044, open): "Could not guard on data-dependent
    expression" (nn.RNN, nn.GRU), "Could not extract specialized integer from data-dependent
    expression" (nn.LSTM). Hence no padded configurations."""
    import torch

    config = LayerConfig(1, False, options=(("batch_first", False), ("enforce_sorted", False)))
    case = case_of(adapter, 5, 4, len(LENGTHS), PADDED_STEPS, 532, config, padding=Padding(LENGTHS))
    module, args = adapter.module(adapter.to_native(case.stack("float32"), config), case.inputs("float32"),
                                  case.state("float32"), config, case.activation)
    args = (args[0], torch.tensor(LENGTHS), *args[1:])
    packed, args = adapter.packed(module, args, config, case.steps)
    names = ["x", "lengths", "h0", "c0"][:2 + len(case.state())]
    with pytest.raises(torch.onnx.OnnxExporterError, match=r"(?s)Failed to export the model with torch\.export.*"
                                                           r"GuardOnDataDependentSymNode.*data-dependent expression"):
        adapter.export(packed, args, names)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-onnx-legacy")
def test_legacy_export_takes_lengths_pytorch_refuses(adapter):
    """The legacy exporter's model of a packed sequence takes the lengths as an input, exported as
    sequence_lens, and computes any valid lengths right (test_padded.py). It also takes what
    pack_padded_sequence refuses: unsorted lengths in a model exported with enforce_sorted=True
    (answered right: the ONNX operator needs no order) and a zero length (answered with zeros, final
    state included, as ONNX Runtime does)."""
    case, dtype = next(c for c in padded_cases(adapter) if c.config.option("enforce_sorted")), "float32"
    assert list(case.padding.lengths) == sorted(case.padding.lengths, reverse=True)
    run_padded(adapter, case, dtype)  # the export, with lengths PyTorch takes
    unsorted = case.with_(padding=Padding(LENGTHS))
    assert list(LENGTHS) != sorted(LENGTHS, reverse=True)
    comparison = compared(adapter, unsorted, dtype, run_padded(adapter, unsorted, dtype), unsorted.reference(),
                          unsorted.bound_vs_reference(dtype), "the float64 reference (unsorted lengths)")
    assert_within_bound(comparison)
    zero = list(case.padding.lengths[:-1]) + [0]
    actual = run_padded(adapter, case, dtype, Padding(zero))
    assert np.all(actual["output"][:, -1] == 0) and np.all(actual["h_n"][:, -1] == 0)
    assert np.all(case.state(dtype)["h"][:, -1] != 0)
