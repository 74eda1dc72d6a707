"""Flax's activations, measured on the installed version: what test_reference.py cannot show.

- The gated cells take two functions, ``gate_fn`` (f) and ``activation_fn`` (g, and the LSTM's h).
  Given in the wrong places, the run is far from the reference: the mutation test_mutations.py
  cannot express (its mutations rewrite weights and run on the first activation, "default").
- ``jax.nn.hard_sigmoid``, the table's "hard_sigmoid_relu6", is relu6(x + 3) / 6, far from Keras
  2's "hard_sigmoid" clip(0.2 x + 0.5, 0, 1): a model ported under the name computes another cell.
"""

import pytest

from harness.cases import mutation_cases
from harness.compare import compare
from harness.detection import ORDERS_OF_MAGNITUDE, assert_detected

DTYPE = "float32"


def is_flax(cls):
    return cls.__module__ == "frameworks.flax_cells"


@pytest.mark.applies_to(lambda cls: is_flax(cls) and cls.family != "rnn")
def test_gate_fn_and_activation_fn_exchanged_is_detected(adapter, monkeypatch, record):
    """Every declared activation spec, run with gate_fn and activation_fn exchanged, on the square
    mutation case: the error exceeds the bound by orders of magnitude."""
    built = adapter._gated_functions
    monkeypatch.setattr(adapter, "_gated_functions", lambda spec: {
        "gate_fn": built(spec)["activation_fn"], "activation_fn": built(spec)["gate_fn"]})
    for spec in adapter.activations:
        case = mutation_cases(adapter)[0].with_(activation=spec)
        assert_detected(adapter, case, f"gate_fn and activation_fn exchanged ({spec})", record)


@pytest.mark.applies_to(lambda cls: is_flax(cls) and cls.family == "rnn" and not cls.layer)
def test_jax_hard_sigmoid_is_not_keras_2_hard_sigmoid(adapter, record):
    """The cell built with jax.nn.hard_sigmoid (within its bound of "hard_sigmoid_relu6",
    test_reference.py) against the reference of "hard_sigmoid_0.2" on the same weights."""
    case = mutation_cases(adapter)[0].with_(activation="hard_sigmoid_relu6", steps=20)
    keras_2 = case.with_(activation="hard_sigmoid_0.2")
    actual = adapter.run(case.stack(DTYPE), case.inputs(DTYPE), case.state(DTYPE))["h"]
    comparison = compare(actual, keras_2.reference()["output"], keras_2.bound_vs_reference(DTYPE)["output"],
                         f"{adapter.describe()} with jax.nn.hard_sigmoid vs hard_sigmoid_0.2")
    record("nonequivalence", adapter, other="the hard_sigmoid_0.2 reference (Keras 2, ONNX)", dtype=DTYPE,
           reason="jax.nn.hard_sigmoid is relu6(x + 3) / 6: slope 1/6, not 0.2", **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
