"""The files frameworks write, read as users have them: a PyTorch LSTM saved with torch.save, ported to
Keras by the mapping and saved with Keras's own save_weights (.weights.h5) and save (.keras), exported
to ONNX by torch.onnx.export; verify settles each port against the PyTorch file, and the ports people
get wrong (bias_hh left out, the Keras GRU's gates copied in PyTorch's order) are caught and named."""

import json

import numpy as np

from frameworks.convert import convert
from reference.config import LayerConfig
from tests.cli.test_verify import run

I, H = 5, 3


def torch_file(tmp_path, module, name="model.pt"):
    import torch

    path = tmp_path / name
    torch.save(module.state_dict(), path)
    return path, {k: v.detach().numpy() for k, v in module.state_dict().items()}


def keras_bidirectional(kind, native, bias=True, **options):
    """A Keras 3 model around one Bidirectional layer holding ``native`` (the keras-tf-*-rnn mapping's names)."""
    import keras

    layer = keras.layers.Bidirectional(getattr(keras.layers, kind)(H, return_sequences=True, use_bias=bias,
                                                                   **options))
    model = keras.Sequential([keras.Input((None, I)), layer, keras.layers.Dense(1)])
    for d, half in enumerate((layer.forward_layer, layer.backward_layer)):
        for name in ("kernel", "recurrent_kernel", "bias"):
            getattr(half.cell, name).assign(native[f"layer0.{('forward', 'backward')[d]}.{name}"])
    return model


def test_a_pytorch_lstm_ported_to_keras_and_onnx_verifies(tmp_path):
    import torch

    torch.manual_seed(0)
    source, state = torch_file(tmp_path, torch.nn.LSTM(I, H, bidirectional=True))
    native = convert(state, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(1, True))
    model = keras_bidirectional("LSTM", native)
    model.save_weights(tmp_path / "ported.weights.h5")
    model.save(tmp_path / "ported.keras")
    for port in ("ported.weights.h5", "ported.keras"):
        result = run("verify", source, tmp_path / port)
        assert result.exit_code == 0, (port, result.output)
    # each side's framework ran its own weights, in both dtypes, within the bound
    (pair,) = json.loads(run("verify", source, tmp_path / "ported.keras", "--json").output)["pairs"]
    assert {side: sorted(runs) for side, runs in pair["frameworks"].items()} == \
        {"A": ["float32", "float64"], "B": ["float32", "float64"]}
    assert all(c["ratio"] <= 1 for runs in pair["frameworks"].values() for c in runs.values())
    onnx = tmp_path / "exported.onnx"
    torch.onnx.export(_loaded(state), (torch.zeros(2, 1, I),), str(onnx), dynamo=False)  # an LSTM node
    result = run("verify", source, onnx)
    assert result.exit_code == 0, result.output
    assert "onnx-ort-lstm" in run("inspect", onnx).output


def _loaded(state):
    import torch

    module = torch.nn.LSTM(I, H, bidirectional=True)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return module.eval()


def test_a_port_without_bias_hh_is_caught_and_named(tmp_path):
    import torch

    torch.manual_seed(1)
    source, state = torch_file(tmp_path, torch.nn.LSTM(I, H, bidirectional=True))
    wrong = {k: (np.zeros_like(v) if k.startswith("bias_hh") else v) for k, v in state.items()}
    native = convert(wrong, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(1, True))
    keras_bidirectional("LSTM", native).save_weights(tmp_path / "wrong.weights.h5")
    result = run("verify", source, tmp_path / "wrong.weights.h5")
    assert result.exit_code == 1, result.output
    assert "B is A with b_h (bias_hh, the recurrent bias) dropped" in result.output


def test_a_keras_gru_with_pytorchs_gate_order_is_caught_and_named(tmp_path):
    import torch

    torch.manual_seed(2)
    source, state = torch_file(tmp_path, torch.nn.GRU(I, H, bidirectional=True))
    native = convert(state, "torch-gru-rnn", "keras-tf-gru-rnn", config=LayerConfig(1, True))
    # Keras's columns are z r h; PyTorch's rows r z n, copied across as they were (transposed only).
    copied = {name: np.concatenate([np.split(v, 3, axis=-1)[i] for i in (1, 0, 2)], axis=-1)
              for name, v in native.items()}
    keras_bidirectional("GRU", copied, reset_after=True).save_weights(tmp_path / "copied.weights.h5")
    result = run("verify", source, tmp_path / "copied.weights.h5")
    assert result.exit_code == 1, result.output
    assert "B is A with the GRU gates r and z exchanged in W_x, W_h and the biases" in result.output


def test_a_keras_2_h5_file_is_read_layer_by_layer(tmp_path):
    import tf_keras

    model = tf_keras.Sequential([tf_keras.layers.InputLayer((None, I)),
                                 tf_keras.layers.SimpleRNN(H, return_sequences=True),
                                 tf_keras.layers.Bidirectional(tf_keras.layers.GRU(H, reset_after=False)),
                                 tf_keras.layers.Dense(1)])
    model.save_weights(tmp_path / "model.h5")
    document = json.loads(run("inspect", tmp_path / "model.h5", "--json").output)
    found = {(m["system"], m["gru_variant"], m["bidirectional"], m["input_size"]) for m in document["modules"]}
    assert found == {("tf-keras-rnn", None, False, I), ("keras-tf-gru-reset-before-rnn", "reset_before", True, H)}
    assert sorted(document["skipped"]) == ["dense/dense/bias:0", "dense/dense/kernel:0"]
    # the same model with one recurrent weight changed: not equivalent
    rnn = model.layers[0]
    rnn.cell.recurrent_kernel.assign(rnn.cell.recurrent_kernel.numpy().T)
    model.save_weights(tmp_path / "changed.h5")
    result = run("verify", tmp_path / "model.h5", tmp_path / "changed.h5")
    assert result.exit_code == 1 and "each gate block of W_h transposed" in result.output, result.output
