"""The files frameworks write, read as users have them: a PyTorch LSTM saved with torch.save, ported to
Keras by the mapping and saved with Keras's own save_weights (.weights.h5) and save (.keras), exported
to ONNX by torch.onnx.export; verify settles each port against the PyTorch file, and the ports people
get wrong (bias_hh left out, the Keras GRU's gates copied in PyTorch's order) are caught and named.
Each test loads the systems whose frameworks it uses (``load_system``: a visible skip where a run does
not select them or, locally, where the framework is missing; an error under CI)."""

import json

import numpy as np

from rnn_equivalence.frameworks.convert import convert
from rnn_equivalence.reference.config import LayerConfig
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


def test_a_pytorch_lstm_ported_to_keras_and_onnx_verifies(tmp_path, load_system):
    for system in ("torch-lstm-rnn", "keras-tf-lstm-rnn", "onnx-ort-lstm"):
        load_system(system)
    import torch

    torch.manual_seed(0)
    source, state = torch_file(tmp_path, torch.nn.LSTM(I, H, bidirectional=True))
    native = convert(state, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(1, True))
    model = keras_bidirectional("LSTM", native)
    model.save_weights(tmp_path / "ported.weights.h5")
    model.save(tmp_path / "ported.keras")
    for port in ("ported.weights.h5", "ported.keras"):
        result = run("verify", "--run", source, tmp_path / port)
        assert result.exit_code == 0, (port, result.output)
    # each side's framework ran its own weights, in both dtypes, within the bound
    (pair,) = json.loads(run("verify", "--run", source, tmp_path / "ported.keras", "--json").output)["pairs"]
    assert {side: sorted(runs) for side, runs in pair["frameworks"].items()} == \
        {"A": ["float32", "float64"], "B": ["float32", "float64"]}
    assert all(c["ratio"] <= 1 for runs in pair["frameworks"].values() for c in runs.values())
    onnx = tmp_path / "exported.onnx"
    torch.onnx.export(_loaded(state), (torch.zeros(2, 1, I),), str(onnx), dynamo=False)  # an LSTM node
    result = run("verify", "--run", source, onnx)
    assert result.exit_code == 0, result.output
    assert "onnx-ort-lstm" in run("inspect", onnx).output


def _loaded(state):
    import torch

    module = torch.nn.LSTM(I, H, bidirectional=True)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return module.eval()


def test_a_port_without_bias_hh_is_caught_and_named(tmp_path, load_system):
    load_system("torch-lstm-rnn"), load_system("keras-tf-lstm-rnn")
    import torch

    torch.manual_seed(1)
    source, state = torch_file(tmp_path, torch.nn.LSTM(I, H, bidirectional=True))
    wrong = {k: (np.zeros_like(v) if k.startswith("bias_hh") else v) for k, v in state.items()}
    native = convert(wrong, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(1, True))
    keras_bidirectional("LSTM", native).save_weights(tmp_path / "wrong.weights.h5")
    result = run("verify", "--run", source, tmp_path / "wrong.weights.h5")
    assert result.exit_code == 1, result.output
    assert "B is A with b_h (bias_hh, the recurrent bias) dropped" in result.output


def test_a_keras_gru_with_pytorchs_gate_order_is_caught_and_named(tmp_path, load_system):
    load_system("torch-gru-rnn"), load_system("keras-tf-gru-rnn")
    import torch

    torch.manual_seed(2)
    source, state = torch_file(tmp_path, torch.nn.GRU(I, H, bidirectional=True))
    native = convert(state, "torch-gru-rnn", "keras-tf-gru-rnn", config=LayerConfig(1, True))
    # Keras's columns are z r h; PyTorch's rows r z n, copied across as they were (transposed only).
    copied = {name: np.concatenate([np.split(v, 3, axis=-1)[i] for i in (1, 0, 2)], axis=-1)
              for name, v in native.items()}
    keras_bidirectional("GRU", copied, reset_after=True).save_weights(tmp_path / "copied.weights.h5")
    result = run("verify", "--run", source, tmp_path / "copied.weights.h5")
    assert result.exit_code == 1, result.output
    assert "B is A with the GRU gates r and z exchanged in W_x, W_h and the biases" in result.output


def test_a_keras_2_h5_file_is_read_layer_by_layer(tmp_path, load_system):
    load_system("tf-keras-rnn")
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
    result = run("verify", "--run", tmp_path / "model.h5", tmp_path / "changed.h5")
    assert result.exit_code == 1 and "each gate block of W_h transposed" in result.output, result.output


def test_a_tf1_checkpoint_is_read_by_its_cells_scopes(tmp_path, load_system):
    """A TF1 graph's BasicLSTMCell and GRUCell (tf_keras's legacy cells, what tf.compat.v1.nn.rnn_cell was),
    run by dynamic_rnn and saved by tf.compat.v1.train.Saver: each cell found by its variable scope, read
    by the TF1 mapping (forget_bias 1.0 folded out), and verified against the same weights converted to
    PyTorch; an optimizer's slot variables are skipped."""
    load_system("tf1-basic-lstm"), load_system("tf1-gru"), load_system("torch-lstm")
    import tensorflow as tf
    from tf_keras.src.layers.rnn import legacy_cells

    prefix = str(tmp_path / "model.ckpt")
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 4, I))
        with tf.compat.v1.variable_scope("encoder"):
            out, _ = tf.compat.v1.nn.dynamic_rnn(legacy_cells.BasicLSTMCell(H), x, dtype=tf.float32)
        with tf.compat.v1.variable_scope("decoder"):
            out, _ = tf.compat.v1.nn.dynamic_rnn(legacy_cells.GRUCell(H), out, dtype=tf.float32)
        train = tf.compat.v1.train.AdamOptimizer().minimize(tf.reduce_sum(out))
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train, {x: np.ones((2, 4, I), np.float32)})  # Adam's slots exist
            tf.compat.v1.train.Saver().save(session, prefix)
    document = json.loads(run("inspect", prefix, "--json").output)
    found = {m["location"]: (m["system"], m["input_size"], m["hidden_size"]) for m in document["modules"]}
    assert found == {"encoder/rnn/basic_lstm_cell": ("tf1-basic-lstm", I, H),
                     "decoder/rnn/gru_cell": ("tf1-gru", H, H)}
    assert any(name.endswith("/Adam") for name in document["skipped"])
    # the LSTM, ported to PyTorch by convert and checked against the checkpoint with both frameworks run
    result = run("convert", prefix + ".index", "--to", "torch-lstm", "-o", tmp_path / "lstm.npz")
    assert result.exit_code == 2 and "expected one recurrent module to convert, got 2" in result.output
    encoder = {k.split("/")[-1]: v for k, v in _checkpoint(prefix).items() if k.startswith("encoder/") and
               "Adam" not in k}
    np.savez(tmp_path / "encoder.npz", **encoder)
    result = run("convert", tmp_path / "encoder.npz", "--as", "tf1-basic-lstm", "--to", "torch-lstm",
                 "-o", tmp_path / "lstm.npz", "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["check"]
    assert all(c["ratio"] <= 1 for runs in check["frameworks"].values() for c in runs.values()), check["frameworks"]


def _checkpoint(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_a_flax_msgpack_file_is_read_by_its_cells_names(tmp_path, load_system):
    """A linen LSTMCell's variables inside a model's params, saved with flax.serialization.to_bytes: found
    by its parameters' names, read by the linen mapping, and verified against the same weights converted
    to PyTorch with both frameworks run."""
    load_system("flax-linen-lstm"), load_system("torch-lstm")
    import jax
    import jax.numpy as jnp
    from flax import linen, serialization

    cell = linen.LSTMCell(features=H)
    x = jnp.zeros((1, I))
    variables = cell.init(jax.random.PRNGKey(0), cell.initialize_carry(jax.random.PRNGKey(1), x.shape), x)
    model = {"params": {"encoder": variables["params"], "head": {"kernel": np.ones((H, 2), np.float32)}}}
    (tmp_path / "model.msgpack").write_bytes(serialization.to_bytes(model))
    document = json.loads(run("inspect", tmp_path / "model.msgpack", "--json").output)
    assert [(m["location"], m["system"], m["input_size"], m["hidden_size"]) for m in document["modules"]] == \
        [("params/encoder", "flax-linen-lstm", I, H)]
    assert document["skipped"] == ["params/head/kernel"]
    result = run("convert", tmp_path / "model.msgpack", "--to", "torch-lstm", "-o", tmp_path / "lstm.pt", "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["check"]
    assert sorted(check["frameworks"]) == ["A", "B"] and "not run" not in check["frameworks"]["A"], check["frameworks"]
