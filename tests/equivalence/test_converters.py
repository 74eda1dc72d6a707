"""What the converters make of the layers, beyond the numbers (which the reference tests compare on every
design case): the ONNX nodes tf2onnx emits, fused or a loop, since that decides what downstream runtimes
do; and the models a converter refuses, loudly."""

import pytest

from harness.cases import case_of


def is_tf2onnx(cls):
    return cls.__module__ == "frameworks.tf2onnx_export"


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls))
def test_tf2onnx_emits_the_declared_nodes(adapter):
    """Each activation the system has, on its first configuration: the converted model holds one kind of
    recurrent node, the fused node the system declares (``FUSED``: an LSTM always, a reset-after GRU
    with the default activations) or a Loop. A release that fuses more, or less, turns this red."""
    assert adapter.activations
    for k, g in enumerate(adapter.activations):
        case = case_of(adapter, 5, 4, 2, 3, 990 + k, adapter.configs[0], activation=g)
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        assert adapter.recurrent_operators() == {adapter.expected_operator(g)}, (g, adapter.recurrent_operators())


@pytest.mark.applies_to(lambda cls: cls.name == "tf2onnx-keras2-lstm-rnn")
def test_tf2onnx_refuses_a_keras_3_model(adapter):
    """tf2onnx 1.17 reads Keras 2's internals: a Keras 3 model (tensorflow backend) is refused with a
    KeyError on its input tensor's name, never converted wrongly. Hence the tf2onnx systems are Keras 2's;
    a release that converts Keras 3 models turns this red."""
    import os

    import keras
    import tensorflow as tf

    assert os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow", "Keras 3 must run on tensorflow here"
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4, return_sequences=True)])
    with pytest.raises(KeyError, match="keras_tensor"):
        adapter.tf2onnx.convert.from_keras(model, input_signature=(tf.TensorSpec((None, 6, 3), tf.float32),),
                                           opset=17)
