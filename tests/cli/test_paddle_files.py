"""PaddlePaddle's ``.pdparams`` files, as ``paddle.save(layer.state_dict(), path)`` writes them (the fixtures in
tests/cli/data/, written by Paddle itself: make_paddle_fixtures.py says how, with which version), read in a venv
without Paddle: each layer found once, its per-layer cell copies (PaddlePaddle/Paddle#45412) recognised as
the same arrays and listed as copies; and Paddle's own outputs, saved beside each file, reproduced by the float64
reference on the weights as read, within the derived float32 bound: the evidence that Paddle's gate order and
bias layout are PyTorch's, which is the mapping that reads them. The same outputs with the gates rotated (a
SimpleRNN's hidden bias dropped) are far outside the bound, so the comparison can fail. A pickle with a payload,
a truncated file, an array that declares more than it holds: refused by name, nothing run."""

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from rnn_equivalence.frameworks import files
from rnn_equivalence.frameworks.files import FileRefused, find_recurrent, load_weights
from rnn_equivalence.reference.comparison import compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from tests.cli.test_inspect import run

DATA = Path(__file__).resolve().parent / "data"
I, H = 3, 4  # make_paddle_fixtures.py's sizes

# fixture: (location, system, family, layers, bidirectional, the copies' prefixes, the other weights)
FIXTURES = {
    "paddle_lstm_bidirect": ("", "torch-lstm-rnn", "lstm", 2, True,
                             ["0.cell_fw.", "0.cell_bw.", "1.cell_fw.", "1.cell_bw."], []),
    "paddle_gru": ("", "torch-gru-rnn", "gru", 1, False, ["0.cell."], []),
    "paddle_simple_rnn": ("", "torch-rnn", "rnn", 1, False, ["0.cell."], []),
    "paddle_encoder": ("encoder.rnn", "torch-lstm-rnn", "lstm", 1, False, ["encoder.rnn.0.cell."],
                       ["embedding.weight", "head.weight", "head.bias"]),
}
CELL_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def layer_name_of(copy: str) -> str:
    """Paddle's copy "<prefix><k>.cell[_fw|_bw].<name>" -> its layer's own "<prefix><name>_l<k>[_reverse]"."""
    head, cell, name = copy.rsplit(".", 2)
    prefix, _, k = head.rpartition(".") if "." in head else ("", "", head)
    return f"{prefix + '.' if prefix else ''}{name}_l{k}{'_reverse' if cell == 'cell_bw' else ''}"


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_each_paddle_layer_is_found_once_its_cell_copies_listed(fixture):
    location, system, family, layers, bidirectional, copy_prefixes, others = FIXTURES[fixture]
    weights = load_weights(DATA / f"{fixture}.pdparams")
    inspection = find_recurrent(weights)
    assert [(m.location, m.system, m.family) for m in inspection.modules] == [(location, system, family)]
    (module,) = inspection.modules
    assert (module.input_size, module.hidden_size, module.config.num_layers, module.config.bidirectional,
            module.config.bias) == (I, H, layers, bidirectional, True)
    expected_copies = {f"{p}{n}": layer_name_of(f"{p}{n}") for p in copy_prefixes for n in CELL_NAMES}
    assert inspection.copies == expected_copies
    assert len(expected_copies) == 4 * layers * (2 if bidirectional else 1)
    for copy, own in inspection.copies.items():  # the same arrays, bit for bit
        np.testing.assert_array_equal(weights[copy], weights[own], strict=True)
    assert sorted(inspection.skipped) == sorted(others)
    # every weight of the file is read once: the module's, a copy, or skipped
    prefix = f"{location}." if location else ""
    assert sorted([prefix + n for n in module.weights] + list(inspection.copies) + inspection.skipped) == \
        sorted(weights)


def test_the_copies_are_one_paddle_parameter_by_paddles_own_table():
    """paddle.save's StructuredToParameterName@@ (read here by the same restricted unpickler) names one
    parameter for each copy and its layer's weight: what the reader's equality check relies on."""
    data = (DATA / "paddle_lstm_bidirect.pdparams").read_bytes()
    loaded = files._DataUnpickler(data, "fixture", files.NUMPY_GLOBALS, "arrays").load()
    table = loaded[files.PADDLE_NAMES]
    copies = find_recurrent(load_weights(DATA / "paddle_lstm_bidirect.pdparams")).copies
    assert len(copies) == 16
    assert all(table[copy] == table[own] for copy, own in copies.items())
    assert len({table[own] for own in copies.values()}) == 16  # and the layer's weights are 16 parameters


def paddle_run(fixture):
    """Paddle's own outputs, time-major as the reference's: {"output", "h_n"[, "c_n"]}, and its inputs."""
    with np.load(DATA / f"{fixture}.npz") as saved:
        saved = dict(saved)
    xs = saved["x"].transpose(1, 0, 2).astype(np.float64)  # Paddle's (batch, T, I): the reference's (T, batch, I)
    state = {"h": saved["h0"].astype(np.float64)}
    actual = {"output": saved["y"].transpose(1, 0, 2), "h_n": saved["h_n"]}
    if "c0" in saved:
        state["c"], actual["c_n"] = saved["c0"].astype(np.float64), saved["c_n"]
    return xs, state, actual


def against_paddle(fixture, weights):
    """The file's module, read by the PyTorch mapping, on Paddle's inputs: the reference's outputs against
    Paddle's, under the bound of a float32 run (plus the float64 reference's own), as ``verify`` runs a
    framework (rnn_equivalence.verify.framework_run)."""
    (module,) = find_recurrent(weights).modules
    xs, state, actual = paddle_run(fixture)
    params = module.params.astype("float32")
    exact, bound = reference_and_bound(params, xs, state, "float32")
    bound = pair_bound(bound, reference_and_bound(params, xs, state, "float64")[1])
    return compare_outputs(actual, {k: exact[k] for k in actual}, {k: bound[k] for k in actual},
                           f"Paddle's {fixture} vs the reference on its weights as read")


def wrongly_read(weights):
    """The same weights read wrongly: gated layers' gate blocks rotated by one (LSTM i f g o -> f g o i, GRU
    r z n -> z n r); a SimpleRNN's bias_hh dropped (it has one gate)."""
    out = {}
    for name, value in weights.items():
        gates = value.shape[0] // H
        if name.rsplit(".", 1)[-1].startswith(("weight_", "bias_")) and "cell" not in name and gates > 1:
            value = np.roll(value, -H, axis=0)
        elif gates == 1 and name.rsplit(".", 1)[-1].startswith("bias_hh"):
            value = np.zeros_like(value)
        out[name] = value
    return out


@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_paddles_own_outputs_are_the_reference_on_the_weights_as_read(fixture):
    weights = load_weights(DATA / f"{fixture}.pdparams")
    with np.load(DATA / f"{fixture}.npz") as saved:
        assert str(saved["paddle_version"]).startswith(("2.", "3."))
    comparison = against_paddle(fixture, weights)
    assert comparison.equivalent, comparison.message()
    # the comparison can fail: the same file read with another gate order is far outside the bound
    copies = set(find_recurrent(weights).copies)
    wrong = against_paddle(fixture, {k: v for k, v in wrongly_read(weights).items() if k not in copies})
    assert wrong.ratio > 100, wrong.message()


def test_a_protocol_2_file_reads_as_the_default_protocol_4_one():
    """paddle.save(protocol=2) holds each array's bytes as _codecs.encode(text, "latin1"): admitted as that
    alone, the same arrays as the default protocol's file of the same GRU."""
    two, four = (load_weights(DATA / name) for name in ("paddle_gru_protocol2.pdparams", "paddle_gru.pdparams"))
    assert sorted(two) == sorted(four)
    for name in four:
        np.testing.assert_array_equal(two[name], four[name], strict=True)


def test_a_copy_that_differs_from_its_layers_weight_is_refused(tmp_path):
    weights = load_weights(DATA / "paddle_lstm_bidirect.pdparams")
    weights["1.cell_bw.bias_hh"] = weights["1.cell_bw.bias_hh"] + np.float32(0.5)
    path = tmp_path / "edited.npz"
    np.savez(path, **weights)
    with pytest.raises(FileRefused, match=r"1\.cell_bw\.bias_hh differs from bias_hh_l1_reverse \(max \|diff\| 0\.5"):
        find_recurrent(load_weights(path))
    result = run("inspect", path)
    assert result.exit_code == 2 and "differs from bias_hh_l1_reverse" in result.output, result.output


def test_an_lstm_with_a_projection_is_refused_by_name():
    """Paddle keeps an LSTM's projection (proj_size) in its cells only (0.cell.weight_ho): not read."""
    with pytest.raises(FileRefused, match=r"0\.cell\.weight_ho: a Paddle LSTM with proj_size"):
        find_recurrent(load_weights(DATA / "paddle_lstm_proj.pdparams"))


def test_inspect_prints_each_layer_once_and_the_copies():
    path = DATA / "paddle_encoder.pdparams"
    result = run("inspect", path)
    assert result.exit_code == 0, result.output
    assert "1 recurrent module(s), 3 other weight(s) skipped" in result.output
    assert "encoder.rnn: torch-lstm-rnn (lstm)" in result.output
    assert "copies (equal to the layer's weights, read once): encoder.rnn.0.cell.* = encoder.rnn.*_l0\n" \
        in result.output
    document = json.loads(run("inspect", path, "--json").output)
    assert [m["location"] for m in document["modules"]] == ["encoder.rnn"]
    assert document["copies"]["encoder.rnn.0.cell.bias_hh"] == "encoder.rnn.bias_hh_l0"


class Payload:
    """Unpickled by pickle.load, it would run ``call(argument)``: os.system, builtins.eval."""

    def __init__(self, call, argument):
        self.call, self.argument = call, argument

    def __reduce__(self):
        return (self.call, (self.argument,))


def assert_refused_and_nothing_ran(path, refused: str, marker: Path) -> None:
    """The file at ``path`` is refused for naming the global ``refused``, by the library and by ``inspect`` (exit
    2, no traceback), and the file its payload would have made (``marker``) is not there."""
    with pytest.raises(FileRefused, match=rf"names {refused}, which is refused.*Nothing in the file was run"):
        load_weights(path)
    result = run("inspect", path)
    assert result.exit_code == 2 and refused in result.output and "Traceback" not in result.output
    assert not marker.exists(), refused


def test_a_pdparams_with_a_payload_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    payloads = {"posix.system" if os.name == "posix" else "nt.system": Payload(os.system, f"touch '{marker}'"),
                "builtins.eval": Payload(eval, f"open({str(marker)!r}, 'w')"),
                "tests.cli.test_paddle_files.Payload": Payload}  # a class of its own: refused too
    real = load_weights(DATA / "paddle_gru.pdparams")
    for refused, payload in payloads.items():
        path = tmp_path / "hostile.pdparams"
        path.write_bytes(pickle.dumps({**real, "payload": payload}, protocol=4))  # as paddle.save pickles
        assert_refused_and_nothing_ran(path, refused, marker)


class ForgedArray:
    """Pickles as NumPy pickles an array (the same globals and state), declaring ``shape`` with ``data``."""

    def __init__(self, shape, data):
        self.shape, self.data = shape, data

    def __reduce__(self):
        reconstruct = np.zeros(1).__reduce__()[0]  # numpy._core.multiarray._reconstruct (numpy.core before 2)
        return (reconstruct, (np.ndarray, (0,), b"b"), (1, self.shape, np.dtype("f4"), False, self.data))


@pytest.mark.parametrize("shape, data, message", [
    ((2**20, 2**20), b"", r"declares shape \(1048576, 1048576\), 1\.1e\+12 elements: expected at most 2\.15e\+09"),
    ((3, 4), b"\x00" * 10, r"expected 48 bytes, got 10"),
])
def test_an_array_that_declares_more_than_it_holds_is_refused(tmp_path, shape, data, message):
    path = tmp_path / "forged.pdparams"
    path.write_bytes(pickle.dumps({"weight_ih_l0": ForgedArray(shape, data)}, protocol=4))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ForgedArray((1, 2), b"\x00" * 8))), np.zeros((1, 2)))
    with pytest.raises(FileRefused, match=message):
        load_weights(path)


def test_truncated_and_garbage_pdparams_are_refused(tmp_path):
    data = (DATA / "paddle_lstm_bidirect.pdparams").read_bytes()
    cuts = [1, 2, 40, len(data) // 2, len(data) - 1]
    failures = []
    for cut in cuts:
        path = tmp_path / f"cut-{cut}.pdparams"
        path.write_bytes(data[:cut])
        result = run("inspect", path)
        if result.exit_code != 2 or path.name not in result.output or "Traceback" in result.output:
            failures.append(f"cut at {cut}: exit {result.exit_code}: {result.output}")
    garbage = tmp_path / "garbage.pdparams"
    garbage.write_bytes(b"\x80\x04not a pickle at all")
    with pytest.raises(FileRefused, match="not a readable paddle.save pickle"):
        load_weights(garbage)
    listed = tmp_path / "list.pdparams"
    listed.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(FileRefused, match="expected paddle.save of a state_dict"):
        load_weights(listed)
    assert not failures, "\n".join(failures)


def test_a_pickle_cannot_set_attributes_of_the_readers_own_classes(tmp_path):
    """BUILD with a slot state sets any attribute of its target: on numpy.ndarray as this reader hands it out
    (its own class), it would change the reader for every later file. Admitted on arrays' states only."""
    path = tmp_path / "build.pdparams"
    # GLOBAL numpy.ndarray; BUILD (None, {"marker": 1}); as a dict's value
    path.write_bytes(b"\x80\x02}X\x01\x00\x00\x00wcnumpy\nndarray\nN}X\x06\x00\x00\x00markerK\x01s\x86bs.")
    with pytest.raises(FileRefused, match=r"not a readable paddle.save pickle \(ValueError: BUILD on a type"):
        load_weights(path)
    assert not hasattr(files._NumpyNdarray, "marker")


def test_an_extension_code_is_refused_even_when_copyreg_has_its_object_cached(tmp_path):
    """EXT1 names a global by a number in copyreg's registry; one loaded before is cached there and handed
    out without find_class. Registered here for os.system and cached (unpickled, not called), a .pdparams
    calling it by its code is refused, and nothing runs."""
    import copyreg

    marker = tmp_path / "payload-ran"
    command = f"touch '{marker}'".encode()
    copyreg.add_extension("os", "system", 240)
    try:
        assert pickle.loads(b"\x80\x02\x82\xf0.") is os.system  # the cache now holds it
        path = tmp_path / "extension.pdparams"
        path.write_bytes(b"\x80\x02}X\x01\x00\x00\x00w\x82\xf0C" + bytes([len(command)]) + command + b"\x85Rs.")
        with pytest.raises(FileRefused, match=r"an extension code \(EXT1, EXT2, EXT4\): expected globals by name"):
            load_weights(path)
    finally:
        copyreg.remove_extension("os", "system", 240)
    assert not marker.exists()
