"""The weight mappings themselves: layouts, round trips, and clear errors on bad weights."""

import re

import numpy as np
import pytest

from frameworks.base import Adapter
from harness.cases import Case

CASE = Case(3, 5, batch=2, steps=4, seed=11)


def assert_params_identical(a, b):
    for name in ("W_hx", "W_hh", "b_x", "b_h"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name, strict=True)


def test_native_weights_have_the_documented_layout(adapter, dtype):
    native = adapter.to_native(CASE.params(dtype))
    spec = adapter.native_spec(CASE.input_size, CASE.hidden_size, has_bias=True)
    assert {name: value.shape for name, value in native.items()} == {n: s for n, (s, _) in spec.items()}
    assert all(value.dtype == np.dtype(dtype) for value in native.values())


@pytest.mark.only_adapters(lambda cls: cls.own_weight_shapes is not Adapter.own_weight_shapes)
def test_documented_layout_is_the_frameworks_own(adapter):
    """native_spec is our reading of the framework; hold it against a cell the framework built."""
    own = adapter.own_weight_shapes(CASE.input_size, CASE.hidden_size)
    spec = adapter.native_spec(CASE.input_size, CASE.hidden_size, has_bias=True)
    assert own == {name: shape for name, (shape, _) in spec.items()}


def test_native_round_trip_is_bitwise(adapter, dtype):
    native = adapter.to_native(CASE.params(dtype))
    again = adapter.to_native(adapter.from_native(native))
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)


def test_canonical_round_trip(adapter, dtype):
    """Bitwise where the framework keeps two biases or b_h is zero; lossy by design otherwise."""
    params = CASE.params(dtype)
    single_bias = len(adapter.bias_names) == 1
    if not single_bias:
        assert_params_identical(adapter.from_native(adapter.to_native(params)), params)
        return
    without_b_h = params.replace(b_h=np.zeros_like(params.b_h))
    assert_params_identical(adapter.from_native(adapter.to_native(without_b_h)), without_b_h)
    # One bias slot: b_x + b_h is stored as one rounded sum and comes back as b_x.
    back = adapter.from_native(adapter.to_native(params))
    np.testing.assert_array_equal(back.b_x, params.b_x + params.b_h, strict=True)
    np.testing.assert_array_equal(back.b_h, np.zeros_like(params.b_h), strict=True)
    assert not np.array_equal(back.b_x, params.b_x)


def test_wrong_weight_shape_names_the_frameworks_parameter(adapter):
    native = adapter.to_native(CASE.params("float32"))
    name = max(native, key=lambda n: native[n].ndim)  # a kernel
    bad = {**native, name: native[name][..., :-1]}
    expected = f"{name}: expected shape .* = {re.escape(str(native[name].shape))}, got {re.escape(str(bad[name].shape))}"
    with pytest.raises(ValueError, match=expected):
        adapter.run_native(bad, CASE.inputs("float32"), CASE.h0("float32"), "tanh")


def test_missing_kernel_is_named(adapter):
    native = adapter.to_native(CASE.params("float32"))
    name = next(n for n in sorted(native) if n not in adapter.bias_names)
    del native[name]
    with pytest.raises(ValueError, match=rf"missing \['{name}'\]"):
        adapter.run_native(native, CASE.inputs("float32"), CASE.h0("float32"), "tanh")


@pytest.mark.only_adapters(lambda cls: len(cls.bias_names) == 2)
def test_half_of_a_bias_pair_is_refused(adapter):
    """Two bias slots are both present (a biased cell) or both absent: one alone is a mistake."""
    native = adapter.to_native(CASE.params("float32"))
    del native[adapter.bias_names[1]]
    with pytest.raises(ValueError, match=rf"missing \['{adapter.bias_names[1]}'\]"):
        adapter.run_native(native, CASE.inputs("float32"), CASE.h0("float32"), "tanh")


def test_integer_weights_are_refused(adapter):
    native = adapter.to_native(CASE.params("float32"))
    name = sorted(native)[0]
    native[name] = native[name].astype(np.int32)
    with pytest.raises(TypeError, match=rf"{name}: expected a float32 or float64 array, got dtype int32"):
        adapter.run_native(native, CASE.inputs("float32"), CASE.h0("float32"), "tanh")


def test_mixed_dtypes_are_refused(adapter):
    with pytest.raises(TypeError, match=r"expected dtype float32 \(the inputs'\), got float64"):
        adapter.run(CASE.params("float64"), CASE.inputs("float32"), CASE.h0("float32"), "tanh")


def test_wrong_input_size_is_refused(adapter):
    xs = CASE.inputs("float32")[..., :-1]
    with pytest.raises(ValueError, match="expected shape"):
        adapter.run(CASE.params("float32"), xs, CASE.h0("float32"), "tanh")


def test_state_batch_mismatch_is_refused(adapter):
    with pytest.raises(ValueError, match=r"initial state: expected shape \(batch, hidden_size\) with batch=2, got \(3, 5\)"):
        adapter.run(CASE.params("float32"), CASE.inputs("float32"), np.zeros((3, 5), np.float32), "tanh")


def test_unsupported_activation_is_refused(adapter):
    with pytest.raises(ValueError, match=r"activation 'softplus' is not supported; expected one of"):
        adapter.run(CASE.params("float32"), CASE.inputs("float32"), CASE.h0("float32"), "softplus")
