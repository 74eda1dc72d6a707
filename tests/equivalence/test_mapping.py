"""The weight mappings themselves: documented layouts, the framework's own layout, round trips."""

import numpy as np
import pytest

from rnn_equivalence.frameworks.base import Adapter
from rnn_equivalence.harness.cases import Case, case_of


def case_in(adapter, config) -> Case:
    return case_of(adapter, 3, 5, batch=2, steps=4, seed=11, config=config)


def test_native_weights_have_the_documented_layout(adapter, dtype):
    """Every configuration's native weights have the documented shapes and the run's dtype; every
    configuration that does not is reported, not only the first."""
    failures = []
    for config in dict.fromkeys([*adapter.configs, adapter.mutation_config]):
        case = case_in(adapter, config)
        native = adapter.to_native(case.stack(dtype), config)
        spec = adapter.native_spec(config, case.input_size, case.hidden_size)
        shapes, documented = {n: np.shape(v) for n, v in native.items()}, {n: s for n, (s, _) in spec.items()}
        if shapes != documented:
            failures.append(f"{config}: shapes {shapes}, documented {documented}")
        dtypes = {n: str(np.asarray(v).dtype) for n, v in native.items() if np.asarray(v).dtype != np.dtype(dtype)}
        if dtypes:
            failures.append(f"{config}: expected {dtype}, got {dtypes}")
    assert not failures, "\n".join(failures)


@pytest.mark.applies_to(lambda cls: cls.own_weight_shapes is not Adapter.own_weight_shapes)
def test_documented_layout_is_the_frameworks_own(adapter):
    """native_spec is our reading of the framework; hold it against a cell or layer the framework built."""
    own = adapter.own_weight_shapes(3, 5)
    assert own == {name: shape for name, (shape, _) in adapter.native_spec(adapter.layout_config, 3, 5).items()}


def test_native_round_trip_is_bitwise(adapter, dtype):
    config = adapter.mutation_config
    native = adapter.to_native(case_in(adapter, config).stack(dtype), config)
    again = adapter.to_native(adapter.from_native(native, config), config)
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)


def test_canonical_round_trip(adapter, dtype):
    """Bitwise for the biases a system keeps apart (``kept_hidden_biases``). A system with one
    bias slot per gate stores b_x + b_h as one rounded sum and returns it as b_x, with b_h = 0:
    the same function, other parameters. A constant the mapping folds out and back in
    (TF1's forget_bias) rounds twice, each time at the size of the constant."""
    config = adapter.mutation_config
    stack = case_in(adapter, config).stack(dtype)
    back = adapter.from_native(adapter.to_native(stack, config), config)
    for (k, d, before), (_, _, after) in zip(stack.cells(), back.cells()):
        where = f"layer {k} direction {d}"
        np.testing.assert_array_equal(after.W_x, before.W_x, err_msg=f"W_x, {where}", strict=True)
        np.testing.assert_array_equal(after.W_h, before.W_h, err_msg=f"W_h, {where}", strict=True)
        assert after.has_bias == before.has_bias, where
        if not before.has_bias:
            continue
        for gate in before.gates:
            b_x, b_h = before.gate(before.b_x, gate), before.gate(before.b_h, gate)
            kept = gate in adapter.kept_hidden_biases
            expected_x, expected_h = (b_x, b_h) if kept else (b_x + b_h, np.zeros_like(b_h))
            got_x = after.gate(after.b_x, gate)
            if gate == "f" and adapter.forget_bias:
                # (b - fb) + fb rounds twice at the size of fb: up to one ulp of |b| + fb each time.
                tolerance = 2 * np.spacing(np.abs(expected_x) + expected_x.dtype.type(adapter.forget_bias))
                assert np.all(np.abs(got_x - expected_x) <= tolerance), f"b_x of gate f, {where}"
            else:
                np.testing.assert_array_equal(got_x, expected_x, err_msg=f"b_x of gate {gate}, {where}", strict=True)
            np.testing.assert_array_equal(after.gate(after.b_h, gate), expected_h,
                                          err_msg=f"b_h of gate {gate}, {where}", strict=True)
