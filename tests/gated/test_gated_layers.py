"""LSTM and GRU sequence layers (stacked, bidirectional, with their options) against the reference."""

import numpy as np
import pytest

from harness.cases import MUTATION_STEPS, GatedSequenceCase
from harness.compare import assert_within_bound, compare


def reference_and_bounds(layer, case, dtype, config):
    reversed_inputs = layer.reads_reversed(config)
    expected = layer.arrange(*case.reference(layer.gru_variant, reversed_inputs), config)
    bounds = layer.arrange(*case.bound_vs_reference(dtype, layer.gru_variant, reversed_inputs), config)
    return expected, bounds


@pytest.mark.known_issues
def test_gated_layer_matches_float64_reference(gated_layer, g, dtype, config, record):
    layer = gated_layer
    case = GatedSequenceCase(layer.cell_type, config)
    h0, c0 = case.states(dtype)
    actual = layer.run(case.layers(dtype), case.inputs(dtype), h0, c0, config)
    expected, bounds = reference_and_bounds(layer, case, dtype, config)
    assert sorted(actual) == sorted(expected), f"{layer.cell} returned {sorted(actual)}"
    comparisons = []
    for key in expected:
        assert actual[key].shape == expected[key].shape, f"{layer.cell} {key}: {actual[key].shape} ({config})"
        comparisons.append(compare(actual[key], expected[key], bounds[key],
                                   f"{layer.describe()} {key} vs float64 reference, {case.describe(dtype)}"))
    record("reference", layer, dtype=dtype, **max(comparisons, key=lambda c: c.ratio).as_record())
    for key in expected:
        assert actual[key].dtype == np.dtype(dtype), f"{layer.cell} {key}: dtype {actual[key].dtype}, not {dtype}"
    for comparison in comparisons:
        assert_within_bound(comparison)


def test_wrong_gated_layer_mapping_is_detected(gated_layer, mutation, record):
    layer, dtype, config = gated_layer, "float32", gated_layer.mutation_config
    case = GatedSequenceCase(layer.cell_type, config, input_size=4, hidden_size=4, steps=MUTATION_STEPS)
    wrong = layer.mutations[mutation](layer.to_native(case.layers(dtype), config))
    actual = layer.run_native(wrong, case.inputs(dtype), *case.states(dtype), config)
    expected, bounds = reference_and_bounds(layer, case, dtype, config)
    ratio = max(compare(actual[k], expected[k], bounds[k], k).ratio for k in expected)
    record("mutation", layer, mutation=mutation, detected=ratio > 1, by="values", ratio=ratio)
    assert ratio > 100, f"{layer.describe()}: mutation '{mutation}' gave worst error/bound {ratio:.3g}"


def test_gated_layer_native_round_trip_is_bitwise(gated_layer, dtype):
    config = gated_layer.mutation_config
    native = gated_layer.to_native(GatedSequenceCase(gated_layer.cell_type, config).layers(dtype), config)
    again = gated_layer.to_native(gated_layer.from_native(native, config), config)
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)
