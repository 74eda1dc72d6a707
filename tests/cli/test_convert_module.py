"""``rnn-equivalence convert FILE --module NAME``: a file of several recurrent modules (an encoder LSTM and a
decoder GRU saved together) converts the one at NAME, its location as ``inspect`` prints it; an unknown
NAME exits 2 naming the file's modules, and a file of several without it says to name one. NumPy files and
the mapping only (``--no-run``): no framework is imported."""

import json

import numpy as np
import pytest

from rnn_equivalence.frameworks.convert import convert, write
from rnn_equivalence.frameworks.files import FileRefused, find_recurrent, load_weights, select
from rnn_equivalence.reference.stack import StackParams
from tests.cli.test_verify import run

I = 5
MODULES = {"encoder": ("lstm", "torch-lstm", 4, "keras-tf-lstm"),  # location: family, system, hidden, target
           "decoder": ("gru", "torch-gru", 3, "keras-tf-gru")}


def two_modules(tmp_path):
    """An .npz of PyTorch names holding an encoder LSTM and a decoder GRU, and each one's own weights."""
    own = {where: write(StackParams.random(family, I, hidden, seed=seed), system)
           for seed, (where, (family, system, hidden, _)) in enumerate(MODULES.items())}
    path = tmp_path / "two.npz"
    np.savez(path, **{f"{where}.{name}": value for where, weights in own.items() for name, value in weights.items()})
    return path, own


@pytest.mark.parametrize("where", list(MODULES))
def test_module_converts_the_one_it_names(tmp_path, where):
    path, own = two_modules(tmp_path)
    family, system, hidden, target = MODULES[where]
    out = tmp_path / f"{where}.npz"
    result = run("convert", path, "--module", where, "--to", target, "-o", out, "--no-run", "--json")
    assert result.exit_code == 0, result.output
    check = json.loads(result.output)["check"]
    assert check["equivalent"] and check["a"] == f"{where} ({system})", check
    # the file written holds that module's weights, as the mapping converts them, and no other's
    with np.load(out, allow_pickle=False) as written:
        expected = convert(own[where], system, target)
        assert sorted(written.files) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(written[name], value)


def test_an_unknown_module_exits_2_naming_the_files_modules(tmp_path):
    path, _ = two_modules(tmp_path)
    for name in ("nope", "(top level)", "Encoder"):
        result = run("convert", path, "--module", name, "--to", "keras-tf-lstm", "-o", tmp_path / "x.npz",
                     "--no-run")
        assert result.exit_code == 2, (name, result.output)
        assert result.output.strip() == (f"rnn-equivalence: --module: no module {name!r} in two.npz; its modules "
                                         f"are ['encoder', 'decoder']"), result.output
        assert not (tmp_path / "x.npz").exists()


def test_several_modules_without_module_name_it(tmp_path):
    path, _ = two_modules(tmp_path)
    result = run("convert", path, "--to", "keras-tf-lstm", "-o", tmp_path / "x.npz", "--no-run")
    assert result.exit_code == 2, result.output
    assert "expected one recurrent module to convert, got 2 (encoder, decoder); choose one with --module NAME" \
        in result.output, result.output
    assert not (tmp_path / "x.npz").exists()


def test_a_top_level_module_is_named_as_inspect_names_it(tmp_path):
    path = tmp_path / "one.npz"
    np.savez(path, **write(StackParams.random("gru", I, 3, seed=1), "torch-gru"))
    (location,) = [m["location"] for m in json.loads(run("inspect", path, "--json").output)["modules"]]
    assert location == "(top level)"
    result = run("convert", path, "--module", location, "--to", "keras-tf-gru", "-o", tmp_path / "x.npz", "--no-run")
    assert result.exit_code == 0 and "EQUIVALENT" in result.output, result.output


def test_select_from_python(tmp_path):
    path, _ = two_modules(tmp_path)
    modules = find_recurrent(load_weights(path)).modules
    assert [select(modules, where).system for where in MODULES] == [s for _, s, _, _ in MODULES.values()]
    with pytest.raises(FileRefused, match=r"no module 'x' in the file; its modules are \['encoder', 'decoder'\]"):
        select(modules, "x")
    with pytest.raises(FileRefused, match="2 modules at 'encoder'"):
        select(modules + modules[:1], "encoder")
