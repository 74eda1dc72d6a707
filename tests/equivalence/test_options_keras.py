"""Keras's activations, measured on the installed versions (Keras 3 and Keras 2, ``tf_keras``): what
test_reference.py cannot show.

- "default" is what Keras builds when a model names no activation: a ported model that relied on
  the defaults computes the "default" the suite compares.
- An LSTM applies its one ``activation`` to the candidate (g) and to c (h): ONNX's "f,g,h" with h
  other than g is refused by name, not computed with h = g.

Keras 3's "hard_sigmoid" being relu6(x + 3) / 6 on each backend, and Keras 2's clip(0.2 x + 0.5,
0, 1), is test_reference.py's activation accuracy test on the SimpleRNN cells (the table:
``rnn_equivalence.frameworks.keras_runner.KERAS_ACTIVATIONS``); the two under one name, test_non_equivalence.py.

``recurrent_activation`` and ``activation`` given the wrong way round is caught by
test_mutations.py (``test_activation_arguments_exchanged_are_detected``). The first test runs where
Keras is in this process (the TensorFlow backend, tf_keras): the mapping
(``KerasRunner.activation_arguments``) is one for every backend.
"""

import os

import pytest

from rnn_equivalence.harness.cases import mutation_cases

DTYPE = "float32"


def is_keras(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.keras_adapters"


def in_this_process(cls):
    return all(os.environ.get(key) == value for key, value in cls.process_env.items())


@pytest.mark.applies_to(lambda cls: is_keras(cls) and in_this_process(cls))
def test_default_is_what_keras_builds_without_names(adapter):
    """A cell or layer built without activation arguments holds the very functions the adapter names
    for the system's first spec ("default": sigmoid gates, tanh; SimpleRNN: tanh). Keras 2 before
    2.3 defaulted the gates to hard_sigmoid; these versions do not."""
    def cell(rnn):
        return rnn.cell if adapter.layer else rnn

    built = adapter._make(2, adapter.activations[0], True, DTYPE)
    unnamed = type(built)(2, **({"reset_after": cell(built).reset_after} if adapter.family == "gru" else {}))
    for argument, name in adapter.activation_arguments(adapter.activations[0]).items():
        function = adapter.keras.activations.get(name)
        assert getattr(cell(unnamed), argument) is function is getattr(cell(built), argument), (
            f"{adapter.cell}: {argument} is {getattr(cell(unnamed), argument)} when not named; "
            f"the adapter passes {name!r} for {adapter.activations[0]!r}")


@pytest.mark.applies_to(lambda cls: is_keras(cls) and cls.family == "lstm")
def test_lstm_output_activation_other_than_the_candidates_is_refused(adapter):
    """ONNX's "sigmoid,tanh,relu" (h = relu, g = tanh) has no Keras spelling: refused by name."""
    spec = "sigmoid,tanh,relu"
    case = mutation_cases(adapter)[0].with_(activation=spec)
    with pytest.raises(ValueError, match=rf"activation '{spec}' is not supported; expected one of"):
        adapter.run(case.stack(DTYPE), case.inputs(DTYPE), case.state(DTYPE), case.config)
    with pytest.raises(ValueError, match=r"`activation` is both the candidate's \(g\) and the output's \(h\)"):
        adapter.activation_arguments(spec)
