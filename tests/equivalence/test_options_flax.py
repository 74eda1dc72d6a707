"""Flax's activations, measured on the installed version: what test_reference.py cannot show.

(``gate_fn`` and ``activation_fn`` given the wrong way round is caught by test_mutations.py's
``test_activation_arguments_exchanged_are_detected``.)

- ``jax.nn.hard_sigmoid``, the table's "hard_sigmoid_relu6", is relu6(x + 3) / 6, far from Keras
  2's "hard_sigmoid" clip(0.2 x + 0.5, 0, 1): a model ported under the name computes another cell.
"""

import pytest

from rnn_equivalence.harness.cases import mutation_cases
from rnn_equivalence.reference.comparison import compare
from rnn_equivalence.harness.detection import ORDERS_OF_MAGNITUDE

DTYPE = "float32"


def is_flax(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.flax_cells"


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
