"""MLX's weight files, as ``mlx.nn.Module.save_weights`` writes them (.safetensors and .npz: the module tree's dotted
paths, ``encoder.Wx``, ``layers.0.Wh``), written here by MLX itself from a small model (two recurrent layers, one
with bias and one without, and a Linear head): each nn.RNN, nn.LSTM and nn.GRU found at its module path and read
by the MLX mapping (frameworks/mlx_layers.py), the head skipped. The reading is proved by MLX's own outputs: each
layer of the model, called by MLX on its inputs, is the float64 reference on the weights as read, within the
derived float32 bound (the same outputs with the gate blocks rotated are far outside it, so the comparison can
fail). ``convert`` to PyTorch's names and back gives MLX the same arrays; ``verify`` of the MLX file against a
PyTorch file of the same weights says they agree, and a port with two LSTM gate blocks swapped in ``Wx`` is caught
and named. A malformed file (a tensor missing, a shape wrong, names no MLX layer has) is refused by name, exit 2,
no traceback; and no file of one framework is read as another's (MLX's names are no other system's).

Tests that run MLX are under the marker ``environment("mlx", "mlx")``: where MLX is not installed and the run is not
MLX's nox session (``nox -s mlx``, RNN_EQ_ENVIRONMENT=mlx), deselected; there, or under CI=true, a failing import
is an error, elsewhere a skip with the reason."""

import importlib.util
import json
import os

import numpy as np
import pytest

from rnn_equivalence.frameworks import ADAPTERS, adapter_class
from rnn_equivalence.frameworks.convert import convert, mapping
from rnn_equivalence.frameworks.files import (
    FileRefused, _flax_groups, _keras_groups, _mlx_groups, _onnx_groups, _paddle_copies, _tf1_groups, PYTORCH_NAME,
    find_recurrent, load_weights,
)
from rnn_equivalence.frameworks.mlx_layers import ENVIRONMENT
from rnn_equivalence.harness.selection import ENVIRONMENT_VAR, in_environment, is_ci
from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import random_inputs, random_state
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from tests.cli.test_paddle_files import DATA, FIXTURES as PADDLE_FIXTURES
from tests.cli.test_verify import run

I, H, T, BATCH = 3, 4, 6, 2
# kind: (MLX's class, the system that reads it, PyTorch's layer system, gates)
KINDS = {"LSTM": ("mlx-lstm", "torch-lstm-rnn", 4), "GRU": ("mlx-gru", "torch-gru-rnn", 3),
         "RNN": ("mlx", "torch-rnn", 1)}
SUFFIXES = (".safetensors", ".npz")
needs_mlx = pytest.mark.environment(ENVIRONMENT, "mlx")


@pytest.fixture(scope="module")
def mlx():
    """(mlx.core, mlx.nn); missing or failing to import: an error in MLX's session or under CI=true, else a skip."""
    try:
        if importlib.util.find_spec("mlx") is None:
            raise ImportError("mlx is not installed")
        import mlx.core as mx
        import mlx.nn as nn
    except ImportError as error:
        if in_environment(ENVIRONMENT, os.environ) or is_ci(os.environ):
            where = f"{ENVIRONMENT_VAR}={ENVIRONMENT}" if in_environment(ENVIRONMENT, os.environ) else "CI=true"
            pytest.fail(f"{error} (an error, not a skip, because {where}; nox -s {ENVIRONMENT} installs it)",
                        pytrace=False)
        pytest.skip(f"mlx not available: {error} (its environment: nox -s {ENVIRONMENT})")
    return mx, nn


def model_of(mlx, kind: str, seed: int = 0):
    """An MLX model as users have one: ``encoder`` (nn.<kind>(I, H)), ``layers`` ([nn.<kind>(H, H, bias=False)]),
    a Linear head on the last step; MLX's own initialisation, seeded."""
    mx, nn = mlx
    mx.random.seed(seed)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = getattr(nn, kind)(I, H)
            self.layers = [getattr(nn, kind)(H, H, bias=False)]
            self.head = nn.Linear(H, 2)

        def __call__(self, x):
            for layer in (self.encoder, *self.layers):
                x = layer(x)
                x = x[0] if isinstance(x, tuple) else x  # an LSTM's (h, c)
            return self.head(x[:, -1])

    model = Model()
    mx.eval(model.parameters())
    return model


def saved(mlx, tmp_path, kind: str, suffix: str, seed: int = 0):
    model = model_of(mlx, kind, seed)
    path = tmp_path / f"model-{kind.lower()}{suffix}"
    model.save_weights(str(path))
    return path, model


def mlx_outputs(mlx, layer, kind: str, xs, state):
    """MLX's layer called on the reference's inputs (time-major, float32), batch first as MLX takes them:
    its outputs time-major, as the reference's: {"output"[, "c_output"]}."""
    mx, _ = mlx
    x = mx.array(xs.transpose(1, 0, 2).astype(np.float32))
    starts = [mx.array(state[key][0].astype(np.float32)) for key in ("h", "c") if key in state]
    out = layer(x, *starts)
    outputs = out if kind == "LSTM" else (out,)
    return dict(zip(("output", "c_output"), (np.asarray(v).transpose(1, 0, 2) for v in outputs)))


def against_mlx(mlx, module, layer, kind: str, seed: int = 0):
    """The MLX layer's outputs against the float64 reference of ``module`` (the file's layer as read), under the bound
    of a float32 run (and the float64 reference's own), as ``verify`` runs a framework."""
    xs = random_inputs(T, BATCH, module.input_size, seed, np.float64)
    state = {"h": random_state((1, BATCH, H), [seed, 3], np.float64)}
    if kind == "LSTM":
        state["c"] = random_state((1, BATCH, H), [seed, 4], np.float64)
    actual = mlx_outputs(mlx, layer, kind, xs, state)
    params = module.params.astype("float32")
    exact, bound = reference_and_bound(params, xs, state, "float32")
    bound = pair_bound(bound, reference_and_bound(params, xs, state, "float64")[1])
    return compare_outputs(actual, {k: exact[k] for k in actual}, {k: bound[k] for k in actual},
                           f"MLX's {kind} at {module.location} vs the reference on its weights as read")


@needs_mlx
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_inspect_lists_each_mlx_layer_at_its_module_path(mlx, tmp_path, kind, suffix):
    system, _, gates = KINDS[kind]
    path, _ = saved(mlx, tmp_path, kind, suffix)
    result = run("inspect", path, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    found = [(m["location"], m["system"], m["input_size"], m["hidden_size"], m["bias"]) for m in document["modules"]]
    assert found == [("encoder", system, I, H, True), ("layers.0", system, H, H, False)]
    assert sorted(document["skipped"]) == ["head.bias", "head.weight"]
    own = {name: shape for name, shape in document["modules"][0]["weights"].items()}
    assert own == {name: list(shape) for name, (shape, _) in mapping(system).native_spec(LayerConfig(), I, H).items()}
    bias_free = mapping(system).native_spec(LayerConfig(1, False, False), H, H)
    assert document["modules"][1]["weights"] == {name: list(shape) for name, (shape, _) in bias_free.items()}
    text = run("inspect", path).output
    assert f"encoder: {system}" in text and f"layers.0: {system}" in text
    assert "skipped (not recurrent): head.bias, head.weight" in text or \
        "skipped (not recurrent): head.weight, head.bias" in text


@needs_mlx
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_mlxs_own_outputs_are_the_reference_on_the_weights_as_read(mlx, tmp_path, kind, suffix):
    """Each layer of the model, run by MLX, is the reference on the file's weights as read, within the bound; the
    same weights read with the gate blocks rotated (an RNN's bias dropped) are far outside it."""
    path, model = saved(mlx, tmp_path, kind, suffix)
    modules = {m.location: m for m in find_recurrent(load_weights(path)).modules}
    layers = {"encoder": model.encoder, "layers.0": model.layers[0]}
    assert sorted(modules) == sorted(layers)
    for location, layer in layers.items():
        comparison = against_mlx(mlx, modules[location], layer, kind)
        assert comparison.equivalent, comparison.message()
        module = modules[location]
        wrong = {name: (np.roll(v, -H, axis=0) if KINDS[kind][2] > 1 and name != "bhn" else
                        np.zeros_like(v) if name == "bias" else v) for name, v in module.weights.items()}
        if wrong.keys() == {"Wxh", "Whh"}:  # a bias-free RNN: Wxh and Whh swapped (square here)
            wrong = {"Wxh": module.weights["Whh"], "Whh": module.weights["Wxh"]}
        misread = find_recurrent({f"{location}.{name}": value for name, value in wrong.items()}).modules[0]
        far = against_mlx(mlx, misread, layer, kind)
        assert far.ratio > 100, far.message()


@needs_mlx
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_convert_to_pytorchs_names_and_back_gives_mlx_the_same_arrays(mlx, tmp_path, kind):
    """``convert`` of the encoder to PyTorch's layer (its names, .safetensors), checked with both frameworks run; the
    PyTorch file converted back to MLX loads into MLX's own layer (strict) with the same arrays, bit for bit, and
    MLX's outputs from it are the original's."""
    mx, nn = mlx
    system, torch_system, _ = KINDS[kind]
    path, model = saved(mlx, tmp_path, kind, ".safetensors")
    ported = tmp_path / "ported.safetensors"
    result = run("convert", path, "--module", "encoder", "--to", torch_system, "-o", ported, "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["check"]
    assert check["equivalent"], check
    assert all(c["ratio"] <= 1 for c in check["frameworks"]["A"].values() if isinstance(c, dict)), check["frameworks"]
    assert sorted(load_weights(ported)) == sorted(mapping(torch_system).native_spec(LayerConfig(), I, H))
    back = tmp_path / "back.npz"
    result = run("convert", ported, "--to", system, "-o", back)
    assert result.exit_code == 0, result.output
    layer = getattr(nn, kind)(I, H)
    layer.load_weights(str(back), strict=True)
    original = dict(model.encoder.parameters())
    assert sorted(dict(layer.parameters())) == sorted(original)
    for name, value in dict(layer.parameters()).items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(original[name]), strict=True, err_msg=name)
    x = mx.array(random_inputs(T, BATCH, I, 5, np.float32).transpose(1, 0, 2))
    for a, b in zip(*(o if isinstance(o, tuple) else (o,) for o in (layer(x), model.encoder(x)))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def pytorch_file(tmp_path, mlx_path, name="pytorch.safetensors"):
    """The MLX file's weights in PyTorch's names (each layer converted by the mapping, at its module path; the head
    as it is): the state_dict of the same model in PyTorch, saved as safetensors.torch.save_file saves one."""
    from safetensors.numpy import save_file

    weights, state = load_weights(mlx_path), {}
    inspection = find_recurrent(weights)
    for module in inspection.modules:
        target = KINDS[{"mlx": "RNN", "mlx-lstm": "LSTM", "mlx-gru": "GRU"}[module.system]][1]
        native = convert(module.weights, module.system, target, config=module.config)
        state.update({f"{module.location}.{n}": np.ascontiguousarray(v) for n, v in native.items()})
    state.update({name: weights[name] for name in inspection.skipped})
    save_file(state, str(tmp_path / name))
    return tmp_path / name


@needs_mlx
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_verify_an_mlx_file_against_a_pytorch_file_of_the_same_weights(mlx, tmp_path, kind):
    path, _ = saved(mlx, tmp_path, kind, ".npz")
    torch_path = pytorch_file(tmp_path, path)
    result = run("verify", "--run", torch_path, path, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    system, torch_system, _ = KINDS[kind]
    assert [(p["a"], p["b"]) for p in document["pairs"]] == [
        (f"encoder ({torch_system})", f"encoder ({system})"), (f"layers.0 ({torch_system})", f"layers.0 ({system})")]
    for pair in document["pairs"]:
        mlx_runs = pair["frameworks"]["B"]
        assert mlx_runs["float32"]["ratio"] <= 1, mlx_runs  # MLX itself ran the file's weights
        if kind != "RNN":  # MLX's float64 sigmoid is float32-accurate: the suite's known issue, said, not counted
            assert "a known issue of" in mlx_runs["float64"] and "ml-explore/mlx/issues/3047" in mlx_runs["float64"]
        if importlib.util.find_spec("torch") is not None:
            assert all(c["ratio"] <= 1 for c in pair["frameworks"]["A"].values()), pair["frameworks"]["A"]
    text = run("verify", "--run", torch_path, path).output
    assert "verdict: equivalent" in text, text
    assert ("a known issue of" in text) == (kind != "RNN"), text


@needs_mlx
def test_an_mlx_port_with_two_lstm_gate_blocks_swapped_in_wx_is_caught_and_named(mlx, tmp_path):
    mx, _ = mlx
    path, model = saved(mlx, tmp_path, "LSTM", ".safetensors")
    torch_path = pytorch_file(tmp_path, path)
    Wx = np.asarray(model.encoder.Wx)
    i, f, g, o = np.split(Wx, 4)
    model.encoder.Wx = mx.array(np.concatenate([f, i, g, o]))  # the port's mistake: i and f exchanged in Wx
    wrong = tmp_path / "wrong.safetensors"
    model.save_weights(str(wrong))
    result = run("verify", "--run", torch_path, wrong)
    assert result.exit_code == 1, result.output
    assert "NOT EQUIVALENT: encoder (mlx-lstm) vs encoder (torch-lstm-rnn)" in result.output, result.output
    assert "EQUIVALENT: layers.0 (mlx-lstm) vs layers.0 (torch-lstm-rnn)" in result.output, result.output
    assert "explained: B is A with the LSTM gates i and f exchanged in W_x" in result.output, result.output


def malformed(weights: dict, case: str) -> dict:
    """An MLX LSTM model's weights made malformed as ``case`` says."""
    weights = dict(weights)
    if case == "missing":
        del weights["encoder.Wh"]
    elif case == "shape":
        weights["encoder.bias"] = weights["encoder.bias"][:-1]
    elif case == "names":
        weights["encoder.bhn"] = np.zeros(H, np.float32)  # an LSTM's names and a GRU's
    elif case == "gates":
        weights["layers.0.Wh"] = np.concatenate([weights["layers.0.Wh"], weights["layers.0.Wh"][:H]])  # 5H rows
    return weights


MALFORMED = {
    "missing": r"MLX layer 'encoder': weights \['Wx', 'bias'\] are no MLX recurrent layer's: expected exactly "
               r"nn\.RNN Wxh, Whh, bias; nn\.LSTM Wx, Wh, bias; nn\.GRU Wx, Wh, b, bhn",
    "shape": r"MLX layer 'encoder': mlx\.nn\.LSTM: .*bias.*\(15,\)",
    "names": r"MLX layer 'encoder': weights \['Wh', 'Wx', 'bhn', 'bias'\] are no MLX recurrent layer's",
    "gates": r"MLX layer 'layers\.0': Wx and Wh without bias \(nn\.LSTM or nn\.GRU, bias=False\): expected Wh of "
             r"shape \(4\*hidden_size, hidden_size\) or \(3\*hidden_size, hidden_size\), got \(20, 4\)",
}


@needs_mlx
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_mlx_file_is_refused_by_name(mlx, tmp_path, case):
    """Written by MLX's own writer (mx.save_safetensors) from the model's weights, made malformed: refused by the
    library and by ``inspect`` (exit 2, the message, no traceback)."""
    mx, _ = mlx
    path, _ = saved(mlx, tmp_path, "LSTM", ".safetensors")
    bad = tmp_path / f"{case}.safetensors"
    mx.save_safetensors(str(bad), {k: mx.array(v) for k, v in malformed(load_weights(path), case).items()})
    with pytest.raises(FileRefused, match=MALFORMED[case]):
        find_recurrent(load_weights(bad))
    result = run("inspect", bad)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.startswith("rnn-equivalence: MLX layer"), result.output


def test_no_file_of_one_framework_is_read_as_anothers():
    """MLX's names (Wx, Wh, Wxh, Whh, bhn) are no other system's, and MLX's are no other framework's pattern: every
    system's weights under a module path (each structure it declares) are found as MLX only where the system is
    MLX's, an MLX model's names are claimed by no other framework's reader, and PyTorch's and Paddle's files
    (Paddle's written by Paddle itself) hold no MLX layer."""
    rng = np.random.default_rng(0)
    for name in ADAPTERS:
        for config in adapter_class(name).configs:
            try:
                spec = mapping(name).native_spec(config, I, H)
            except (KeyError, ValueError, TypeError):
                continue
            weights = {f"model.rnn.{n}": rng.standard_normal(shape) for n, (shape, _) in spec.items()}
            groups = _mlx_groups(weights)
            assert bool(groups) == name.startswith("mlx"), (name, config, sorted(spec))
            if groups:
                (module,) = find_recurrent(weights).modules
                assert (module.location, module.system) == ("model.rnn", name)
    for system, kind in (("mlx", "RNN"), ("mlx-lstm", "LSTM"), ("mlx-gru", "GRU")):
        for bias in (True, False):
            spec = mapping(system).native_spec(LayerConfig(1, False, bias), I, H)
            weights = {f"layers.{k}.{n}": rng.standard_normal(shape).astype(np.float32)
                       for k in range(2) for n, (shape, _) in spec.items()}
            weights.update({"head.weight": np.ones((2, H), np.float32), "head.bias": np.ones(2, np.float32)})
            others = [_keras_groups(weights), _onnx_groups(weights), _tf1_groups(weights), _flax_groups(weights),
                      _paddle_copies(weights), [n for n in weights if PYTORCH_NAME.match(n)]]
            assert not any(others), (system, bias, others)
            inspection = find_recurrent(weights)
            assert [(m.location, m.system) for m in inspection.modules] == [("layers.0", system), ("layers.1", system)]
            assert sorted(inspection.skipped) == ["head.bias", "head.weight"]
    for fixture in PADDLE_FIXTURES:  # Paddle's own files, and so PyTorch's names
        weights = load_weights(DATA / f"{fixture}.pdparams")
        assert not _mlx_groups(weights), fixture
        assert all(m.system.startswith("torch-") for m in find_recurrent(weights).modules), fixture
