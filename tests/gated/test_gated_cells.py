"""LSTM and GRU cells of every framework against the float64 reference of the variant they compute."""

from dataclasses import replace

import numpy as np
import pytest

from harness.cases import GATED_CASES
from harness.compare import assert_within_bound, compare


def cases_for(adapter):
    return [replace(case, zero_b_hn=adapter.zero_b_hn) for case in GATED_CASES[adapter.cell_type]]


@pytest.mark.known_issues
@pytest.mark.parametrize("case_index", [0, 1, 2])
def test_gated_cell_matches_float64_reference(gated, g, dtype, case_index, record):
    case = cases_for(gated)[case_index]
    actual = gated.run(case.params(dtype), case.inputs(dtype), case.h0(dtype), case.c0(dtype))
    expected = case.reference(gated.gru_variant)
    bounds = case.bound_vs_reference(dtype, gated.gru_variant, gated.forget_bias)
    assert sorted(actual) == sorted(expected), f"{gated.cell} returned {sorted(actual)}"
    comparisons = [compare(actual[k], expected[k], bounds[k], f"{gated.describe()} {k} vs float64 reference "
                           f"({gated.gru_variant if gated.cell_type == 'gru' else 'lstm'}), {case.describe(dtype)}")
                   for k in expected]
    record("reference", gated, dtype=dtype, **max(comparisons, key=lambda c: c.ratio).as_record())
    for key in expected:
        assert actual[key].dtype == np.dtype(dtype), f"{gated.cell} {key}: dtype {actual[key].dtype}, not {dtype}"
    for comparison in comparisons:
        assert_within_bound(comparison)


def test_wrong_gated_mapping_is_detected(gated, mutation, record):
    case, dtype = cases_for(gated)[1], "float32"
    wrong = gated.mutations[mutation](gated.to_native(case.params(dtype)))
    actual = gated.run_native(wrong, case.inputs(dtype), case.h0(dtype), case.c0(dtype))
    expected = case.reference(gated.gru_variant)
    bounds = case.bound_vs_reference(dtype, gated.gru_variant, gated.forget_bias)
    ratio = max(compare(actual[k], expected[k], bounds[k], k).ratio for k in expected)
    record("mutation", gated, mutation=mutation, detected=ratio > 1, by="values", ratio=ratio)
    assert ratio > 100, f"{gated.describe()}: mutation '{mutation}' gave worst error/bound {ratio:.3g}"


def test_gated_native_round_trip_is_bitwise(gated, dtype):
    native = gated.to_native(cases_for(gated)[1].params(dtype))
    again = gated.to_native(gated.from_native(native))
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)


@pytest.mark.only_adapters(lambda cls: cls.kind == "gated" and len(getattr(cls, "bias_names", ())) == 2
                           and cls.name.startswith("torch"))
def test_gated_canonical_round_trip_is_bitwise_with_two_biases(gated, dtype):
    params = cases_for(gated)[1].params(dtype)
    back = gated.from_native(gated.to_native(params))
    for name in ("W_x", "W_h", "b_x", "b_h"):
        np.testing.assert_array_equal(getattr(back, name), getattr(params, name), err_msg=name, strict=True)


def test_gated_layout_is_the_frameworks_own(gated):
    own = gated.own_weight_shapes(5, 4)
    assert own == {name: shape for name, (shape, _) in gated.native_spec(5, 4).items()}
