"""``rnn-equivalence inspect``: a user's weight file, its recurrent modules found where they are, read by
the suite's mapping (the canonical parameters bitwise those written), the rest listed as skipped; a file
that is not weights, or recurrent weights that do not read, refused with exit 2 and one line, never a
traceback, never unpickled."""

import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rnn_equivalence.frameworks.convert import write
from rnn_equivalence.frameworks.files import FileRefused, find_recurrent, load_weights
from rnn_equivalence.cli import WIDTH, main
from rnn_equivalence.reference.stack import StackParams

# A model as users have one: an embedding, a 2-layer bidirectional LSTM with non-square sizes, a dense head.
I, H = 5, 3


def lstm_stack(seed=0):
    return StackParams.random("lstm", I, H, 2, True, seed=seed)


def model_weights(seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    rnn = write(lstm_stack(seed), "torch-lstm-rnn")
    return {"embedding.weight": rng.standard_normal((11, I)),
            **{f"encoder.rnn.{name}": value for name, value in rnn.items()},
            "head.weight": rng.standard_normal((2, 2 * H)), "head.bias": rng.standard_normal(2)}


def save(path, weights):
    if path.suffix == ".npz":
        np.savez(path, **weights)
    else:
        from safetensors.numpy import save_file

        save_file({k: np.ascontiguousarray(v) for k, v in weights.items()}, str(path))
    return path


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_a_model_file_is_read_module_by_module(tmp_path, suffix):
    inspection = find_recurrent(load_weights(save(tmp_path / f"model{suffix}", model_weights())))
    assert len(inspection.modules) == 1
    module = inspection.modules[0]
    assert (module.location, module.system, module.family) == ("encoder.rnn", "torch-lstm-rnn", "lstm")
    assert ((module.input_size, module.hidden_size, module.config.num_layers, module.config.bidirectional)
            == (I, H, 2, True))
    assert sorted(inspection.skipped) == ["embedding.weight", "head.bias", "head.weight"]
    expected = lstm_stack()
    cells = list(module.params.cells())
    assert len(cells) == 4
    for (k, d, cell), (_, _, want) in zip(cells, expected.cells()):
        for name in ("W_x", "W_h", "b_x", "b_h"):  # gate order and layout read back exactly
            np.testing.assert_array_equal(getattr(cell, name), getattr(want, name), err_msg=f"layer {k} dir {d} {name}")


def test_cells_and_families_are_told_apart(tmp_path):
    gru = write(StackParams.random("gru", I, H, 1, False, seed=1), "torch-gru")
    rnn = write(StackParams.random("rnn", I, H, 1, False, seed=2), "torch")
    weights = {**{f"decoder.cell.{n}": v for n, v in gru.items()}, **{f"aux.{n}": v for n, v in rnn.items()}}
    found = {m.location: m for m in find_recurrent(load_weights(save(tmp_path / "cells.npz", weights))).modules}
    assert {k: (m.system, m.family) for k, m in found.items()} == {"decoder.cell": ("torch-gru", "gru"),
                                                                   "aux": ("torch", "rnn")}
    assert found["decoder.cell"].summary()["gru_variant"] == "reset_after"  # PyTorch's: r applied after W_hn h


def test_a_real_torch_save_file_is_read_with_weights_only(tmp_path, load_system):
    load_system("torch-gru-rnn")  # a visible skip where torch is not selected (an error under CI if missing)
    import torch

    model = torch.nn.ModuleDict({"emb": torch.nn.Embedding(7, I), "gru": torch.nn.GRU(I, H, num_layers=2)})
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    (module,) = find_recurrent(load_weights(path)).modules
    assert (module.location, module.system, module.config.num_layers) == ("gru", "torch-gru-rnn", 2)
    own = {k[len("gru."):]: v.numpy() for k, v in model.state_dict().items() if k.startswith("gru.")}
    for name, value in own.items():
        np.testing.assert_array_equal(module.weights[name], value)


def test_a_pickle_with_code_is_refused_not_run(tmp_path, load_system):
    """A payload that would create a file when unpickled, and a whole pickled module: refused, the payload
    not run, and the message says how to save a state_dict."""
    load_system("torch")
    import torch

    marker = tmp_path / "payload-ran"
    path = tmp_path / "hostile.pt"
    torch.save({"weight_ih": torch.zeros(3, 3), "payload": Payload(marker)}, path)
    assert not marker.exists()
    whole = tmp_path / "module.pt"
    torch.save(torch.nn.GRU(I, H), whole)  # the module pickled, code and all
    for hostile in (path, whole):
        with pytest.raises(FileRefused,
                           match=r"weights_only=True\) refused it.*torch.save\(model.state_dict\(\), path\)"):
            load_weights(hostile)
    assert not marker.exists()


class Payload:
    """Unpickled, it would create ``marker`` (open(marker, "w")): code running from a weight file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def run(*args):
    result = CliRunner().invoke(main, list(map(str, args)))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def test_the_command_prints_the_modules_within_100_columns_and_json(tmp_path):
    path = save(tmp_path / "model.safetensors", model_weights())
    result = run("inspect", path)
    assert result.exit_code == 0, result.output
    assert "encoder.rnn: torch-lstm-rnn (lstm)" in result.output and "skipped" in result.output
    assert max(map(len, result.output.splitlines())) <= WIDTH
    document = json.loads(run("inspect", path, "--json").output)
    (module,) = document["modules"]
    assert (module["system"], module["input_size"], module["hidden_size"]) == ("torch-lstm-rnn", I, H)
    assert module["weights"]["weight_hh_l1_reverse"] == [4 * H, H]


@pytest.mark.parametrize("name, content, message", [
    ("garbage.safetensors", b"\x00" * 40, "not a readable safetensors file"),
    ("garbage.pt", b"not a zip", "expected a torch.save file"),
    ("pickled.npz", None, "expected numeric arrays"),
    ("weights.txt", b"1 2 3", "expected one of"),
    ("missing.npz", False, "no such file"),
])
def test_bad_files_exit_2_with_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        np.savez(path, weights=np.array([{"a": 1}], dtype=object))  # an object array needs pickle
    elif content is not False:
        path.write_bytes(content)
    result = run("inspect", path)
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output


def test_recurrent_weights_that_do_not_read_are_refused_by_name(tmp_path):
    weights = model_weights()
    weights["encoder.rnn.weight_hh_l0"] = weights["encoder.rnn.weight_hh_l0"][:-1]  # 4H - 1 rows
    result = run("inspect", save(tmp_path / "bad.npz", weights))
    assert result.exit_code == 2, result.output
    assert "module 'encoder.rnn'" in result.output and "weight_hh_l0" in result.output
    wrong_shape = model_weights()
    wrong_shape["encoder.rnn.weight_ih_l1"] = wrong_shape["encoder.rnn.weight_ih_l1"].T  # transposed
    result = run("inspect", save(tmp_path / "transposed.npz", wrong_shape))
    assert result.exit_code == 2 and "weight_ih_l1" in result.output, result.output


def test_the_pickle_module_is_never_used_on_npz(tmp_path, monkeypatch):
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("pickle.loads called"))
    path = save(tmp_path / "model.npz", model_weights())
    assert find_recurrent(load_weights(path)).modules


def test_hostile_and_malformed_framework_files_exit_2(tmp_path):
    """Files that claim more than they hold, or are not what their suffix says: one line, exit 2."""
    import zipfile

    import h5py

    huge = tmp_path / "huge.weights.h5"
    with h5py.File(huge, "w") as f:  # 2^40 elements declared, a few bytes stored (chunked, never written)
        f.create_dataset("layers/lstm/cell/vars/0", shape=(2**20, 2**20), dtype="f4", chunks=(1, 1))
    strings = tmp_path / "strings.h5"
    with h5py.File(strings, "w") as f:
        f.create_dataset("lstm/lstm/lstm_cell/kernel:0", data=np.array([b"abc"]))
    no_weights = tmp_path / "model.keras"
    with zipfile.ZipFile(no_weights, "w") as archive:
        archive.writestr("config.json", "{}")
    cases = {huge: "declares shape (1048576, 1048576)", strings: "expected numeric weights",
             no_weights: "holding model.weights.h5"}
    (tmp_path / "garbage.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 20)
    (tmp_path / "garbage.onnx").write_bytes(b"\xff" * 64)
    cases.update({tmp_path / "garbage.h5": "not a readable HDF5 file",
                  tmp_path / "garbage.onnx": "not a readable ONNX"})
    failures = []  # every file that is not refused clearly, not only the first
    for path, message in cases.items():
        result = run("inspect", path)
        if result.exit_code != 2 or message not in result.output or "Traceback" in result.output:
            failures.append(f"{path.name}: exit {result.exit_code}, expected 2 and {message!r}: {result.output}")
    assert not failures, "\n".join(failures)


def _valid_file(tmp_path, suffix, load_system):
    """A small valid file of each format, holding a recurrent module (a PyTorch GRU's weights where the
    format takes any names)."""
    weights = {f"rnn.{k}": v.astype(np.float32)
               for k, v in write(StackParams.random("gru", I, H), "torch-gru-rnn").items()}
    path = tmp_path / f"model{suffix}"
    if suffix in (".npz", ".safetensors"):
        return save(path, weights)
    if suffix == ".pdparams":  # written by Paddle itself (tests/cli/data/make_paddle_fixtures.py)
        path.write_bytes((Path(__file__).resolve().parent / "data" / "paddle_gru.pdparams").read_bytes())
        return path
    if suffix == ".pt":
        load_system("torch")
        import torch

        torch.save({k: torch.from_numpy(v) for k, v in weights.items()}, path)
    elif suffix in (".weights.h5", ".keras"):
        import h5py

        target = path if suffix == ".weights.h5" else tmp_path / "model.weights.h5"
        native = write(StackParams.random("gru", I, H), "keras-tf-gru")
        with h5py.File(target, "w") as f:
            for index, name in enumerate(("kernel", "recurrent_kernel", "bias")):
                f[f"layers/gru/cell/vars/{index}"] = native[name]
        if suffix == ".keras":
            with zipfile.ZipFile(path, "w") as archive:
                archive.write(target, "model.weights.h5")
                archive.writestr("config.json", "{not json at all: the config is never read")
    elif suffix == ".onnx":
        load_system("onnx-ort-gru")
        import onnx

        native = write(StackParams.random("gru", I, H), "onnx-ort-gru")
        node = onnx.helper.make_node("GRU", ["X", "W", "R", "B"], ["Y"], hidden_size=H, linear_before_reset=1)
        graph = onnx.helper.make_graph(
            [node], "g", [onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, ["T", "batch", I])],
            [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
            [onnx.numpy_helper.from_array(native[n].astype(np.float32), n) for n in ("W", "R", "B")])
        onnx.save(onnx.helper.make_model(graph), path)
    elif suffix == ".msgpack":
        load_system("flax-linen-gru")
        from flax import serialization

        native = write(StackParams.random("gru", I, H), "flax-linen-gru")
        tree = {}
        for name, value in native.items():
            module, weight = name.split(".")
            tree.setdefault(module, {})[weight] = value
        path.write_bytes(serialization.to_bytes({"params": tree}))
    return path


FORMATS = [".npz", ".safetensors", ".pt", ".weights.h5", ".keras", ".onnx", ".msgpack", ".pdparams"]


@pytest.mark.parametrize("suffix", FORMATS)
def test_every_format_valid_truncated_and_empty(tmp_path, suffix, load_system):
    """Each format: a valid file reads (one recurrent module); the same file cut in half, and an empty
    one, exit 2 naming the file, never a traceback."""
    path = _valid_file(tmp_path, suffix, load_system)
    result = run("inspect", path)
    assert result.exit_code == 0 and "1 recurrent module(s)" in result.output, result.output
    data = path.read_bytes()
    for name, content in (("truncated", data[:len(data) // 2]), ("empty", b"")):
        broken = tmp_path / f"{name}{suffix}"
        broken.write_bytes(content)
        result = run("inspect", broken)
        assert result.exit_code == 2 and broken.name in result.output, (name, result.output)
        assert "Traceback" not in result.output


def test_onnx_external_data_outside_the_models_folder_is_refused(tmp_path, load_system):
    load_system("onnx-ort-gru")
    import onnx

    path = _valid_file(tmp_path, ".onnx", load_system)
    model = onnx.load(str(path))
    outside = tmp_path.parent / f"{tmp_path.name}-secret.bin"
    outside.write_bytes(b"\x00" * 4096)
    tensor = model.graph.initializer[0]
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=f"../{outside.name}")
    onnx.save(model, path)
    result = run("inspect", path)
    assert result.exit_code == 2 and "outside the model's folder" in result.output, result.output


def test_a_keras_file_with_a_lambda_layer_is_read_without_running_it(tmp_path, load_system):
    """A ``.keras`` model whose ``Lambda`` layer would create a file when called (code Keras stores in the
    model's config): inspect reads the LSTM's weights from the archive's ``model.weights.h5`` alone, the
    config and its Lambda never loaded, and the file is not created."""
    load_system("keras-tf-lstm-rnn")
    import keras

    marker = tmp_path / "lambda-ran"
    touch = str(marker)
    model = keras.Sequential([keras.Input((6, I)),
                              keras.layers.Lambda(lambda x: (open(touch, "w").close(), x)[1]),
                              keras.layers.LSTM(H, return_sequences=True), keras.layers.Dense(2)])
    path = tmp_path / "model.keras"
    model.save(path)
    assert marker.exists()  # the Lambda runs when Keras calls it
    marker.unlink()
    result = run("inspect", path, "--json")
    assert result.exit_code == 0, result.output
    modules = json.loads(result.output)["modules"]
    assert [m["system"] for m in modules] == ["keras-tf-lstm-rnn"]
    assert not marker.exists()
