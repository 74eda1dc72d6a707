"""``rnn-equivalence verify A B --inputs X.npy --mask M.npy``: a (T, batch) 0/1 mask of the user's inputs
(time-major, as the inputs). Each element's real steps one run at the start: the same check as ``--lengths``;
masked steps anywhere else, holes included (Keras's ``Masking`` on an all-zero step in the middle): the
reference runs each element over its real steps only, a masked step leaving the state as it was
(``rnn_equivalence.reference.padding.Mask``). A mask that does not fit or does not read exits 2 with one line,
and a file is never unpickled. NumPy files and the mapping only (``--no-run``): no framework is imported."""

import json
from pathlib import Path

import numpy as np
import pytest

from rnn_equivalence.frameworks.convert import write
from rnn_equivalence.frameworks.files import read_as
from rnn_equivalence.reference.padding import Mask, Padding
from rnn_equivalence.reference.stack import StackParams, run_stack
from rnn_equivalence.reference.comparison import compare_references
from rnn_equivalence.verify import name_of, user_inputs, user_mask
from tests.cli.test_verify import run

I, H, T = 5, 3, 6
LENGTHS = (6, 2, 4)
TRAILING = np.arange(T)[:, None] < np.array(LENGTHS)  # (T, batch): the real steps of post-padded rows
HOLES = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1], [1, 0, 0], [1, 1, 1], [0, 0, 1]], bool)  # holes in every row


def files(tmp_path):
    """A (a torch GRU), B (A without its recurrent bias: a port's mistake, so the runs differ by an amount each
    mask changes) and the inputs X (T, batch, I)."""
    gru = write(StackParams.random("gru", I, H, seed=1), "torch-gru")
    np.savez(tmp_path / "a.npz", **gru)
    np.savez(tmp_path / "b.npz", **{**gru, "bias_hh": np.zeros_like(gru["bias_hh"])})
    np.save(tmp_path / "x.npy", np.random.default_rng(0).uniform(-1, 1, (T, len(LENGTHS), I)))
    return tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "x.npy"


def pairs(*args):
    result = run("verify", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)["pairs"]


def test_a_trailing_mask_is_the_lengths_check(tmp_path):
    a, b, x = files(tmp_path)
    by_lengths = pairs(a, b, "--inputs", x, "--lengths", ",".join(map(str, LENGTHS)))
    assert not by_lengths[0]["equivalent"] and by_lengths[0]["diagnosis"], by_lengths
    # booleans, 0/1 integers or floats, a .npy or a .npz: the same mask
    np.save(tmp_path / "bool.npy", TRAILING)
    np.save(tmp_path / "int.npy", TRAILING.astype(np.int8))
    np.save(tmp_path / "float.npy", TRAILING.astype(np.float32))
    np.savez(tmp_path / "named.npz", x=np.zeros(3), mask=TRAILING)
    for mask in ("bool.npy", "int.npy", "float.npy", "named.npz"):
        assert pairs(a, b, "--inputs", x, "--mask", tmp_path / mask) == by_lengths, mask
    assert pairs(a, b, "--inputs", x) != by_lengths  # the padding is used: all steps real is another check
    assert user_mask(TRAILING, T, 3) == Padding(LENGTHS)  # from Python: the lengths
    assert user_mask(TRAILING[::-1], T, 3) == Padding(LENGTHS, "pre")  # the real steps at the end: pre-padding
    result = run("verify", a, a, "--inputs", x, "--mask", tmp_path / "bool.npy")
    assert result.exit_code == 0 and "verdict: equivalent" in result.output, result.output


def test_a_mask_with_holes_runs_the_real_steps_only(tmp_path):
    a, b, x = files(tmp_path)
    np.save(tmp_path / "holes.npy", HOLES)
    result = run("verify", a, a, "--inputs", x, "--mask", tmp_path / "holes.npy")
    assert result.exit_code == 0 and "verdict: equivalent" in result.output, result.output
    (pair,) = pairs(a, b, "--inputs", x, "--mask", tmp_path / "holes.npy")
    # what verify compared is the reference's run of A and B under this mask, holes and all
    A, B = (read_as(dict(np.load(path)), system="torch-gru") for path in (a, b))
    xs = np.load(x)
    state = {"h": np.zeros((1, xs.shape[1], H))}
    for dtype in ("float32", "float64"):
        expected = compare_references(A.params, B.params, xs, state, dtype, f"{name_of(B)} vs {name_of(A)}, {dtype}",
                             Mask.of(HOLES)).as_record()
        assert pair["runs"][dtype] == expected, (dtype, pair["runs"][dtype], expected)
    # not the check of the same lengths, nor of no mask
    lengths = ",".join(str(n) for n in HOLES.sum(axis=0))
    assert pairs(a, b, "--inputs", x, "--lengths", lengths)[0]["runs"] != pair["runs"]
    assert pairs(a, b, "--inputs", x)[0]["runs"] != pair["runs"]
    # and that reference is the function on each element's real steps alone: a masked step carries the state
    # through and reports zeros (the mask read time-major, as the inputs)
    xs, padding = user_inputs(A, xs, mask=HOLES)
    assert padding == Mask.of(HOLES)
    masked = run_stack(A.params, xs, None, padding)
    for element in range(xs.shape[1]):
        real = np.flatnonzero(HOLES[:, element])
        alone = run_stack(A.params, xs[real, element:element + 1])
        np.testing.assert_allclose(masked["output"][real, element], alone["output"][:, 0], rtol=1e-12)
        np.testing.assert_array_equal(masked["output"][~HOLES[:, element], element], 0.0)
        np.testing.assert_allclose(masked["h_n"][:, element], alone["h_n"][:, 0], rtol=1e-12)


class _Touch:
    """A pickle that, were it ever unpickled, would create ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


def test_a_mask_that_does_not_fit_or_read_exits_2(tmp_path):
    a, _, x = files(tmp_path)
    sentinel = tmp_path / "unpickled"
    arrays = {"transposed.npy": (TRAILING.T, "got shape (3, 6): a (batch, T) mask, as Keras takes it? Save its "
                                             "transpose (mask.T)"),
              "3d.npy": (TRAILING[:, :, None], "got shape (6, 3, 1)"),
              "short.npy": (TRAILING[:4], "got shape (4, 3)"),
              "text.npy": (np.where(TRAILING, "1", "0"), "got dtype <U1"),
              "complex.npy": (TRAILING.astype(complex), "got dtype complex128"),
              "twos.npy": (TRAILING * 2, "got values 2 (int64)"),
              "halves.npy": (np.where(TRAILING, 1.0, 0.5), "got values 0.5 (float64)"),
              "nan.npy": (np.where(TRAILING, 1.0, np.nan), "got values nan (float64)"),
              "empty-row.npy": (TRAILING & np.array([True, False, True]),
                                "expected at least one real step per batch element, got none in element(s) [1]")}
    for name, (array, _) in arrays.items():
        np.save(tmp_path / name, array)
    expected = "expected booleans or 0/1 of shape (T, batch) = (6, 3) (time-major, as --inputs), "
    cases = {name: "--mask: " + (message if message.startswith("expected at least") else expected + message)
             for name, (_, message) in arrays.items()}
    reading = "expected a .npy (or .npz) of booleans or 0/1 of shape (T, batch), got "
    np.save(tmp_path / "pickle.npy", np.array([_Touch(sentinel)], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "pickle.npz", mask=np.array([_Touch(sentinel)], dtype=object))
    np.savez(tmp_path / "two.npz", a=TRAILING, b=TRAILING)
    (tmp_path / "text.npz").write_text("not numpy")
    (tmp_path / "zero.npy").write_bytes(b"")
    np.save(tmp_path / "whole.npy", TRAILING)
    (tmp_path / "truncated.npy").write_bytes((tmp_path / "whole.npy").read_bytes()[:100])
    cases.update({
        "pickle.npy": reading + "an object array, which is never unpickled",
        "pickle.npz": reading + "an object array, which is never unpickled",
        "two.npz": "expected a .npz holding one array, or one named 'mask', got 2: ['a', 'b']",
        "text.npz": reading + "neither a .npy nor a .npz (no NumPy header; a pickle is never unpickled)",
        "zero.npy": reading + "a file that does not read as one (EOFError",
        "truncated.npy": reading + "a file that does not read as one (ValueError",
        "missing.npy": "no such file: expected a .npy (or .npz)",
    })
    for name, message in cases.items():
        result = run("verify", a, a, "--inputs", x, "--mask", tmp_path / name)
        assert result.exit_code == 2 and message in result.output, (name, result.output)
        assert result.output.count("\n") == 1, (name, result.output)  # one line
    assert not sentinel.exists()
    # with --lengths, or without --inputs
    for args, message in {("--inputs", x, "--lengths", "6,2,4"): "--lengths and --mask: expected one of them",
                          (): "--mask: needs --inputs"}.items():
        result = run("verify", a, a, *args, "--mask", tmp_path / "whole.npy")
        assert result.exit_code == 2 and message in result.output, (args, result.output)
