"""ONNX Runtime's RNN, LSTM and GRU nodes in float16 (issue 37): it takes them, and computes them in float32.

ONNX Runtime's CPU kernels for the three nodes are registered for float only, yet a float16 node loads and runs:
its graph transformer casts the inputs and initializers to float32 around the kernel and the outputs back
(``InsertCastTransformer``). So a float16 model claims half precision and computes in float32, rounding only
what leaves the node. Measured here, per system of the ONNX Runtime family (onnxruntime 1.32.0):

- the float16 run is bitwise the float32 run of the same (float16) numbers, its outputs rounded once to float16:
  the state between steps is never rounded to half;
- it is within the bound of that arithmetic, the float32 bound of the reference on the float16 data plus one
  rounding of each output (``reference.tolerance.stored_once_in``): err/bound 0.86 to 0.96 on every
  configuration, the rounding of the outputs most of it. The bound of PyTorch's arithmetic (float32 within each
  operation, each result stored in half) is 73 to 219 times wider on these cases, too loose to judge by (more
  than 100 times the error it allows), and would not name what ONNX Runtime does;
- a wrong mapping of the weights is still caught in float16, beyond ``ORDERS_OF_MAGNITUDE`` times that bound.

The systems keep float32 as their dtype (frameworks/onnx_rnn.py, ``OnnxRuntimeSystem.dtypes``): their float16
runs are these tests', not the designs', so the report has no float16 rows for them (and the tests record no
comparison: a float16 record of a system without float16 would make a row with nothing compared). Depth: short of
full, the last (richest) configuration of each system and its first wrong mapping; at full depth every
configuration and every wrong mapping. Each run is a model of one node, built and run in milliseconds.
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.onnx_nodes import node_outputs
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.harness.detection import ORDERS_OF_MAGNITUDE, wrong_natives
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound, stored_once_in

ONNX_NODES = "rnn_equivalence.frameworks.onnx_rnn"


def runs_in_onnxruntime(cls) -> bool:
    return cls.__module__ == ONNX_NODES and "onnxruntime" in cls.distributions


def in_float32(native, state):
    widened = {k: np.asarray(v, np.float32) if np.asarray(v).dtype == np.float16 else v for k, v in native.items()}
    return widened, None if state is None else {k: np.asarray(v, np.float32) for k, v in state.items()}


def stored_once_bound(adapter, case):
    """The reference on the case's float16 data, and the bound of float32 arithmetic on it with every output
    stored once in float16 (plus the reference's own), arranged as the node returns them."""
    stack, xs, state = case.exact_data("float16")
    xs = case._read(xs)  # a reverse node's reference reads the sequence reversed, as the case's own does
    exact, bound32 = reference_and_bound(stack, xs, state, "float32", case.forget_bias)
    bound = pair_bound(stored_once_in(exact, bound32, "float16"),
                       reference_and_bound(stack, xs, state, "float64", case.forget_bias)[1])
    return adapter.arrange(exact, case.config), adapter.arrange(bound, case.config)


def configs_at(adapter, depth):
    configs = adapter.configs if depth == "full" else adapter.configs[-1:]
    assert configs, f"{adapter.name} has no configuration"
    return configs


@pytest.mark.applies_to(lambda cls: runs_in_onnxruntime(cls))
def test_a_float16_node_is_computed_in_float32_and_rounded_once(adapter, depth):
    """Bitwise the float32 run rounded to float16, and within the bound of that arithmetic (measured err/bound
    0.86 to 0.96, onnxruntime 1.32.0: the rounding of the outputs is most of it)."""
    for k, config in enumerate(configs_at(adapter, depth)):
        case = case_of(adapter, 7, 5, 3, 12, 1600 + k, config)
        native = adapter.to_native(case.stack("float16"), config)
        xs, state = case.inputs("float16"), case.state("float16")
        half = node_outputs(adapter, native, xs, state, config, case.activation)
        assert half and all(v.dtype == np.float16 for v in half.values()), {k: v.dtype for k, v in half.items()}
        widened, state32 = in_float32(native, state)
        single = node_outputs(adapter, widened, xs.astype(np.float32), state32, config, case.activation)
        for key in half:
            np.testing.assert_array_equal(half[key], single[key].astype(np.float16), strict=True,
                                          err_msg=f"{adapter.name} {config}: float16 {key} is not float32's rounded")
        exact, bound = stored_once_bound(adapter, case)
        comparison = compare_outputs({key: half[key].astype(np.float64) for key in half},
                                     {key: exact[key] for key in half}, {key: bound[key] for key in half},
                                     f"{adapter.name} in float16 vs float64 reference, float32 arithmetic stored "
                                     f"once in float16, {case.describe('float16')}")
        assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: runs_in_onnxruntime(cls))
def test_a_wrong_mapping_is_caught_in_a_float16_node(adapter, depth):
    config = adapter.mutation_config
    case = case_of(adapter, 5, 5, 3, 12, 1700, config)  # square: the shapes fit, only the values can tell
    native = adapter.to_native(case.stack("float16"), config)
    exact, bound = stored_once_bound(adapter, case)
    for mutation, wrong in wrong_natives(adapter, native, depth):
        half = node_outputs(adapter, wrong, case.inputs("float16"), case.state("float16"), config, case.activation)
        comparison = compare_outputs({key: half[key].astype(np.float64) for key in half},
                                     {key: exact[key] for key in half}, {key: bound[key] for key in half},
                                     f"{adapter.name} with mutation '{mutation}' in float16")
        assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
