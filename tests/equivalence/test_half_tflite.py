"""TFLite's float16 quantization (issue 37; frameworks/tflite_float16.py): a Keras model converted with its weights
stored in float16, run in LiteRT.

- what it computes: float32 arithmetic on the weights rounded to float16, native tensor by native tensor. Judged
  by the float32 bound of the float64 reference run on those rounded weights (a derived bound: the rounding is
  the data's, the arithmetic float32's), every case is within it;
- the rounding is real, and the bound is not decorative: the same outputs judged against the reference on the
  float32 weights exceed the float32 bound (measured 9.7 to 126 times), so a model that kept float32 weights,
  or rounded them otherwise, would fail one of the two;
- the model holds what the conversion says: a DEQUANTIZE in its main graph;
- a wrong mapping of the weights is still caught in this format, at ``ORDERS_OF_MAGNITUDE`` times the bound.

Depth: at full depth every TFLite system on every configuration; short of it one system per Keras (Keras 2's
LSTM, Keras 3's GRU reset after) on its first configuration (a return_state, go_backwards layer from an initial
state), each a conversion of 2 to 3 s from a cold cache (harness/depth.py).
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.tflite_float16 import float16_weights, run_with_float16_weights
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.harness.detection import ORDERS_OF_MAGNITUDE, wrong_natives
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound

TFLITE = "rnn_equivalence.frameworks.tflite_export"
SHORT_OF_FULL = ("tflite-keras2-lstm-rnn", "tflite-keras-tf-gru-rnn")


def is_tflite(cls) -> bool:
    return cls.__module__ == TFLITE


def configs_at(adapter, depth: str):
    configs = adapter.configs if depth == "full" else adapter.configs[:1]
    assert configs, f"{adapter.name} has no configuration to convert"
    return configs


def judged(adapter, case, actual: dict, stack, what: str):
    """``actual`` against the float64 reference of ``stack`` on the case's inputs and state, within the float32
    bound of that computation (plus the reference's own)."""
    args = (case._read(case.inputs()), case.state())
    exact, bound = reference_and_bound(stack, *args, "float32", case.forget_bias)
    bound = pair_bound(bound, reference_and_bound(stack, *args, "float64", case.forget_bias)[1])
    exact, bound = adapter.arrange(exact, case.config), adapter.arrange(bound, case.config)
    keys = sorted(actual)
    return compare_outputs({k: np.asarray(actual[k], np.float64) for k in keys}, {k: exact[k] for k in keys},
                           {k: bound[k] for k in keys}, what)


def run(adapter, case, native):
    return run_with_float16_weights(adapter, native, case.inputs("float32"), case.state("float32"), case.config,
                                    case.activation)


@pytest.mark.applies_to(lambda cls: is_tflite(cls), short_of_full=lambda cls: cls.name in SHORT_OF_FULL)
def test_float16_weights_are_float32_arithmetic_on_the_rounded_weights(adapter, depth, record):
    """Within the float32 bound of the reference on the weights rounded to float16 (measured err/bound 0.0025 to
    0.10, TensorFlow 2.21), and beyond the float32 bound of the reference on the float32 weights (9.7 to 126
    times): the weights are rounded, and rounded as the native tensors, not as the canonical parameters."""
    for k, config in enumerate(configs_at(adapter, depth)):
        case = case_of(adapter, 7, 5, 3, 12, 160 + k, config)
        native = adapter.to_native(case.stack("float32"), config)
        actual = run(adapter, case, native)
        assert "DEQUANTIZE" in adapter.last_operators, (config, adapter.last_operators)
        rounded = adapter.from_native(float16_weights(native), config)
        comparison = judged(adapter, case, actual, rounded,
                            f"{adapter.name}, weights in float16, vs float64 reference on those weights, "
                            f"{case.describe('float32')}")
        record("float16 weights", adapter, dtype="float32", **comparison.as_record())
        assert_within_bound(comparison)
        unrounded = judged(adapter, case, actual, case.stack(), "the same run vs the float32 weights' reference")
        assert unrounded.ratio > 3, unrounded.message()  # measured 9.7 to 126: the float16 rounding shows


@pytest.mark.applies_to(lambda cls: is_tflite(cls), short_of_full=lambda cls: cls.name in SHORT_OF_FULL)
def test_a_wrong_mapping_is_caught_with_float16_weights(adapter, depth):
    """The system's first wrong mapping (its structure's: the one every converted system runs short of full depth;
    every one at full depth), converted with float16 weights: beyond ``ORDERS_OF_MAGNITUDE`` times the bound of
    the right weights rounded to float16."""
    config = adapter.mutation_config
    case = case_of(adapter, 5, 5, 3, 12, 170, config)  # square: the shapes fit, only the values can tell
    native = adapter.to_native(case.stack("float32"), config)
    rounded = adapter.from_native(float16_weights(native), config)
    for mutation, wrong in wrong_natives(adapter, native, depth):
        comparison = judged(adapter, case, run(adapter, case, wrong), rounded,
                            f"{adapter.name} with mutation '{mutation}', weights in float16")
        assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
