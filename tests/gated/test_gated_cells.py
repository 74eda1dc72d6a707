"""LSTM and GRU cells of every framework against the float64 reference of the variant they compute."""

from dataclasses import replace

import numpy as np
import pytest

from frameworks.base import Adapter
from harness.cases import GATED_CASES, MUTATION_STEPS, steps_for
from harness.compare import assert_within_bound, compare


def expected_and_bounds(adapter, case, dtype):
    """The reference and its bounds for the outputs this adapter returns. ONNX's LSTM gives
    only the final c, as "c_last"."""
    expected = case.reference(adapter.gru_variant)
    bounds = case.bound_vs_reference(dtype, adapter.gru_variant, adapter.forget_bias)
    if "c" in expected:
        expected["c_last"], bounds["c_last"] = expected["c"][-1], bounds["c"][-1]
    return expected, bounds


def cases_for(adapter):
    return [replace(case, zero_b_hn=adapter.zero_b_hn, steps=steps_for(adapter, case.steps))
            for case in GATED_CASES[adapter.cell_type]]


@pytest.mark.known_issues
@pytest.mark.parametrize("case_index", [0, 1])
def test_gated_cell_matches_float64_reference(gated, g, dtype, case_index, record):
    case = cases_for(gated)[case_index]
    actual = gated.run(case.params(dtype), case.inputs(dtype), case.h0(dtype), case.c0(dtype))
    expected, bounds = expected_and_bounds(gated, case, dtype)
    assert "h" in actual and set(actual) <= set(expected), f"{gated.cell} returned {sorted(actual)}"
    comparisons = [compare(actual[k], expected[k], bounds[k], f"{gated.describe()} {k} vs float64 reference "
                           f"({gated.gru_variant if gated.cell_type == 'gru' else 'lstm'}), {case.describe(dtype)}")
                   for k in actual]
    record("reference", gated, dtype=dtype, **max(comparisons, key=lambda c: c.ratio).as_record())
    for key in actual:
        assert actual[key].dtype == np.dtype(dtype), f"{gated.cell} {key}: dtype {actual[key].dtype}, not {dtype}"
    for comparison in comparisons:
        assert_within_bound(comparison)


def test_wrong_gated_mapping_is_detected(gated, mutation, record):
    case, dtype = replace(cases_for(gated)[1], steps=MUTATION_STEPS), "float32"
    wrong = gated.mutations[mutation](gated.to_native(case.params(dtype)))
    actual = gated.run_native(wrong, case.inputs(dtype), case.h0(dtype), case.c0(dtype))
    expected, bounds = expected_and_bounds(gated, case, dtype)
    ratio = max(compare(actual[k], expected[k], bounds[k], k).ratio for k in actual)
    record("mutation", gated, mutation=mutation, detected=ratio > 1, by="values", ratio=ratio)
    assert ratio > 100, f"{gated.describe()}: mutation '{mutation}' gave worst error/bound {ratio:.3g}"


def test_gated_native_round_trip_is_bitwise(gated, dtype):
    native = gated.to_native(cases_for(gated)[1].params(dtype))
    again = gated.to_native(gated.from_native(native))
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)


@pytest.mark.only_adapters(lambda cls: cls.name.startswith(("torch", "onnx")) or cls.name.endswith("-gru")
                           and cls.name.startswith(("keras", "tf-keras")))
def test_gated_canonical_round_trip_is_bitwise_with_two_biases(gated, dtype):
    params = cases_for(gated)[1].params(dtype)
    back = gated.from_native(gated.to_native(params))
    for name in ("W_x", "W_h", "b_x", "b_h"):
        np.testing.assert_array_equal(getattr(back, name), getattr(params, name), err_msg=name, strict=True)


@pytest.mark.only_adapters(lambda cls: cls.own_weight_shapes is not Adapter.own_weight_shapes)
def test_gated_layout_is_the_frameworks_own(gated):
    own = gated.own_weight_shapes(5, 4)
    assert own == {name: shape for name, (shape, _) in gated.native_spec(5, 4).items()}
