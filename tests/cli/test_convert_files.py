"""``rnn-equivalence convert FILE --to SYSTEM -o OUT``: the weights written in the target framework's own
format, loaded by that framework's own loader, and checked against FILE (exit 0); a target that cannot
hold the same function refuses, saying why (exit 1); bad input exits 2. The frameworks it writes for and
checks with are loaded first (``load_system``)."""

import json

import numpy as np

from tests.cli.test_framework_files import H, I, torch_file
from tests.cli.test_verify import run


def test_a_pytorch_lstm_to_keras_loads_in_keras_and_back_into_pytorch(tmp_path, load_system):
    load_system("torch-lstm-rnn"), load_system("keras-tf-lstm-rnn")
    import keras
    import torch

    torch.manual_seed(3)
    source, state = torch_file(tmp_path, torch.nn.LSTM(I, H, num_layers=2, bidirectional=True))
    result = run("convert", source, "--to", "keras-tf-lstm-rnn", "-o", tmp_path / "ported.weights.h5", "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["check"]
    assert check["equivalent"] and 0 < check["runs"]["float32"]["ratio"] <= 1  # two biases summed: one rounding
    # Keras's own loader reads it into the same layers
    layers = [keras.layers.Bidirectional(keras.layers.LSTM(H, return_sequences=True)) for _ in range(2)]
    model = keras.Sequential([keras.Input((None, I)), *layers])
    model.load_weights(tmp_path / "ported.weights.h5")
    x = np.random.default_rng(0).uniform(-1, 1, (2, 4, I)).astype(np.float32)
    reference = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True, batch_first=True)
    reference.load_state_dict(torch.load(source, weights_only=True))
    expected = reference(torch.from_numpy(x))[0].detach().numpy()
    np.testing.assert_allclose(np.asarray(model(x)), expected, atol=1e-5)  # sanity: the full check is verify's
    # and back: PyTorch's own load_state_dict takes the .pt convert writes, strictly
    result = run("convert", tmp_path / "ported.weights.h5", "--to", "torch-lstm-rnn", "-o", tmp_path / "back.pt")
    assert result.exit_code == 0, result.output
    again = torch.nn.LSTM(I, H, num_layers=2, bidirectional=True)
    again.load_state_dict(torch.load(tmp_path / "back.pt", weights_only=True), strict=True)


def test_a_target_that_cannot_hold_the_function_refuses(tmp_path, load_system):
    load_system("torch-gru-rnn")
    import torch

    source, _ = torch_file(tmp_path, torch.nn.GRU(I, H))
    result = run("convert", source, "--to", "onnx-ort-gru-reset-before", "-o", tmp_path / "x.npz")
    assert result.exit_code == 1 and "refused" in result.output and "reset_after" in result.output, result.output
    assert not (tmp_path / "x.npz").exists()


def test_bad_requests_exit_2(tmp_path, load_system):
    load_system("torch-gru-rnn")
    import torch

    source, _ = torch_file(tmp_path, torch.nn.GRU(I, H))
    cases = [(("--to", "keras-tf-gru-rnn", "-o", tmp_path / "x.pt"), "is the format of PyTorch systems"),
             (("--to", "keras-tf-gru-rnn", "-o", tmp_path / "x.txt"), "expected one of"),
             (("--to", "no-such-system", "-o", tmp_path / "x.npz"), "unknown system 'no-such-system'")]
    for args, message in cases:
        result = run("convert", source, *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    state = {k: v.numpy() for k, v in torch.nn.GRU(I, H).state_dict().items()}
    two = tmp_path / "two.npz"
    np.savez(two, **{f"{m}.{k}": v for m in ("encoder", "decoder") for k, v in state.items()})
    result = run("convert", two, "--to", "keras-tf-gru-rnn", "-o", tmp_path / "x.weights.h5")
    assert result.exit_code == 2 and "expected one recurrent module to convert, got 2" in result.output, result.output


# The LSTM's formats, each with the system that writes it: every ordered pair converted, each written by its
# framework's own writer and read back by the suite's reader (the check with the mapping and the reference;
# --no-run), and each format opened once by its framework's own loader.
LSTM_FORMATS = {".pt": "torch-lstm-rnn", ".weights.h5": "keras-tf-lstm-rnn", ".keras": "keras-tf-lstm-rnn",
                ".onnx": "onnx-ort-lstm", ".msgpack": "flax-linen-lstm", ".ckpt": "tf1-lstm"}


def test_every_pair_of_lstm_formats_converts(tmp_path, load_system):
    import torch

    for system in dict.fromkeys(LSTM_FORMATS.values()):
        load_system(system)
    torch.manual_seed(5)
    source, _ = torch_file(tmp_path, torch.nn.LSTM(I, H))
    first = {}
    for suffix, system in LSTM_FORMATS.items():
        first[suffix] = tmp_path / f"from-torch{suffix}"
        result = run("convert", source, "--to", system, "-o", first[suffix], "--no-run")
        assert result.exit_code == 0, (suffix, result.output)
    pairs = 0
    for a, path in first.items():
        for b, system in LSTM_FORMATS.items():
            if a != b:
                out = tmp_path / f"{a[1:].replace('.', '-')}-to{b}"
                result = run("convert", path, "--to", system, "-o", out, "--no-run")
                assert result.exit_code == 0 and "EQUIVALENT" in result.output, (a, b, result.output)
                pairs += 1
    assert pairs == len(LSTM_FORMATS) * (len(LSTM_FORMATS) - 1)
    # each framework's own loader opens what convert wrote
    import keras
    import onnxruntime
    import tensorflow as tf
    from flax.serialization import msgpack_restore

    model = keras.saving.load_model(first[".keras"])  # safe_mode: no code deserialised
    assert model.layers[0].cell.recurrent_kernel.shape == (H, 4 * H)
    session = onnxruntime.InferenceSession(str(first[".onnx"]), providers=["CPUExecutionProvider"])
    assert session.run(None, {"X": np.zeros((2, 1, I), np.float32)})[0].shape == (2, 1, 1, H)
    assert "rnn/lstm_cell/kernel" in tf.train.load_checkpoint(str(first[".ckpt"])).get_variable_to_shape_map()
    assert set(msgpack_restore(first[".msgpack"].read_bytes())["params"]) == \
        {"ii", "if", "ig", "io", "hi", "hf", "hg", "ho"}
