"""Sequence layers (stacked, bidirectional, with their own options) against the float64 reference."""

import numpy as np
import pytest

from frameworks.base import LayerAdapter, LayerConfig
from harness.cases import MUTATION_STEPS, SequenceCase, steps_for
from harness.compare import assert_within_bound, compare


@pytest.mark.known_issues
def test_layer_matches_float64_reference(layer, g, dtype, config, record):
    case = SequenceCase(config, steps=steps_for(layer, SequenceCase.steps))
    actual = layer.run(case.stack(dtype), case.inputs(dtype), case.h0(dtype), g, config)
    reversed_inputs = layer.reads_reversed(config)
    expected = layer.arrange(*case.reference(g, reversed_inputs), config)
    bounds = layer.arrange(*case.bound_vs_reference(g, dtype, reversed_inputs), config)

    assert sorted(actual) == sorted(expected), f"{layer.cell} returned {sorted(actual)}"
    comparisons = []
    for key in expected:
        assert actual[key].shape == expected[key].shape, \
            f"{layer.cell} {key}: shape {actual[key].shape}, expected {expected[key].shape} ({config})"
        comparisons.append(compare(actual[key], expected[key], bounds[key],
                                   f"{layer.describe()} {key} vs float64 reference, {case.describe(g, dtype)}"))
    worst = max(comparisons, key=lambda c: c.ratio)
    record("reference", layer, dtype=dtype, **worst.as_record())
    for key in expected:
        assert actual[key].dtype == np.dtype(dtype), f"{layer.cell} {key}: dtype {actual[key].dtype}, not {dtype}"
    for comparison in comparisons:
        assert_within_bound(comparison)


def test_wrong_layer_mapping_is_detected(layer, mutation, record):
    dtype, g, config = "float32", "tanh", layer.mutation_config
    case = SequenceCase(config, input_size=4, hidden_size=4, steps=MUTATION_STEPS)  # square: only values can tell
    wrong = layer.mutations[mutation](layer.to_native(case.stack(dtype), config))
    actual = layer.run_native(wrong, case.inputs(dtype), case.h0(dtype), g, config)
    reversed_inputs = layer.reads_reversed(config)
    expected = layer.arrange(*case.reference(g, reversed_inputs), config)
    bounds = layer.arrange(*case.bound_vs_reference(g, dtype, reversed_inputs), config)
    ratio = max(compare(actual[k], expected[k], bounds[k], k).ratio for k in expected)
    record("mutation", layer, mutation=mutation, detected=ratio > 1, by="values", ratio=ratio)
    assert ratio > 100, f"{layer.describe()}: mutation '{mutation}' gave worst error/bound {ratio:.3g}"


def test_layer_native_round_trip_is_bitwise(layer, dtype):
    config = layer.mutation_config
    native = layer.to_native(SequenceCase(config).stack(dtype), config)
    again = layer.to_native(layer.from_native(native, config), config)
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)


def test_layer_native_weights_have_the_documented_layout(layer):
    for config in layer.configs:
        case = SequenceCase(config)
        native = layer.to_native(case.stack("float32"), config)
        spec = layer.native_spec(config, case.input_size, case.hidden_size)
        assert {n: np.shape(v) for n, v in native.items()} == {n: s for n, (s, _) in spec.items()}, str(config)


def test_layer_refuses_a_wrong_weight_shape(layer):
    config = layer.mutation_config
    case = SequenceCase(config)
    native = layer.to_native(case.stack("float32"), config)
    name = layer.recurrent_kernel_name(config)
    native[name] = np.asarray(native[name])[..., :-1, :]
    with pytest.raises(ValueError, match=rf"{name}: expected shape"):
        layer.run_native(native, case.inputs("float32"), case.h0("float32"), "tanh", config)


def test_layer_refuses_a_wrong_initial_state(layer):
    config = next(c for c in layer.configs if c.initial_state)
    case = SequenceCase(config)
    h0 = case.h0("float32")[:, :-1]
    with pytest.raises(ValueError, match=r"initial state: expected shape \(num_layers\*num_directions, batch, hidden_size\)"):
        layer.run(case.stack("float32"), case.inputs("float32"), h0, "tanh", config)


@pytest.mark.only_adapters(lambda cls: getattr(cls, "compare_with", None))
def test_exported_model_agrees_with_its_source(request, layer, config, record):
    """An exported model against the framework module it was exported from, not only the reference."""
    from conftest import load_adapter

    source = load_adapter(request.config, layer.compare_with)
    dtype, g = "float32", "tanh"
    case = SequenceCase(config, steps=steps_for(layer, SequenceCase.steps))
    args = (case.stack(dtype), case.inputs(dtype), case.h0(dtype), g, config)
    exported, original = layer.run(*args), source.run(*args)
    bound = layer.arrange(*case.bound_vs_reference(g, dtype), config)
    for key in original:
        comparison = compare(exported[key], original[key], 2 * bound[key],
                             f"{layer.describe()} vs {source.describe()} {key}, {case.describe(g, dtype)}")
        record("pair", layer, other=source.name, dtype=dtype, **comparison.as_record())
        assert_within_bound(comparison)


def test_layer_canonical_round_trip(layer, dtype):
    """Bitwise where the layer keeps both biases (torch, ONNX); where it sums them into one,
    the round trip returns b_x + b_h as b_x and zero as b_h: the same function, other parameters."""
    config = layer.mutation_config
    stack = SequenceCase(config).stack(dtype)
    back = layer.from_native(layer.to_native(stack, config), config)
    for (_, _, before), (_, _, after) in zip(stack.cells(), back.cells()):
        if layer.sums_biases:
            np.testing.assert_array_equal(after.b_x, before.b_x + before.b_h, strict=True)
            np.testing.assert_array_equal(after.b_h, np.zeros_like(before.b_h), strict=True)
        else:
            np.testing.assert_array_equal(after.b_x, before.b_x, strict=True)
            np.testing.assert_array_equal(after.b_h, before.b_h, strict=True)
        np.testing.assert_array_equal(after.W_hx, before.W_hx, strict=True)
        np.testing.assert_array_equal(after.W_hh, before.W_hh, strict=True)


@pytest.mark.only_adapters(lambda cls: cls.own_weight_shapes is not LayerAdapter.own_weight_shapes)
def test_layer_layout_is_the_frameworks_own(layer):
    config = LayerConfig(2, True)
    own = layer.own_weight_shapes(5, 4)
    assert own == {name: shape for name, (shape, _) in layer.native_spec(config, 5, 4).items()}
