"""The cache of references and bounds kept across runs (harness/reference_cache.py): NumPy only. What a case's tests
read from it is what the reference computes; other data, another dtype or changed code misses; a damaged or hostile
entry is computed again, never trusted or unpickled; the off switch and the chosen directory are obeyed."""

import dataclasses
import io
import json

import numpy as np
import pytest

from rnn_equivalence.harness import cases, gradients
from rnn_equivalence.harness import reference_cache as kept_cache
from rnn_equivalence.harness.cases import LayerConfig, case_of
from rnn_equivalence.harness.reference_cache import CACHE_VAR, COUNTS, OFF_VAR, decode, encode, key, kept
from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.frameworks.conversion_cache import header, write_entry
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import run_stack
from rnn_equivalence.reference.tolerance import chunked_reference_and_bound, pair_bound, reference_and_bound

LRU = (cases._reference, cases._bound, cases._chunk_references, gradients._gradients_and_bound)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory of this test's own, the cache on, this process's memory and counts empty."""
    directory = tmp_path / "references"
    monkeypatch.setenv(CACHE_VAR, str(directory))
    monkeypatch.delenv(OFF_VAR, raising=False)
    run = dict(COUNTS)  # the run's own counts, for its summary: not this test's
    new_process()
    yield directory
    new_process()
    COUNTS.update(run)


def new_process():
    """What a new process starts with: nothing in memory, no counts (the disk is what is shared)."""
    for function in LRU:
        function.cache_clear()
    COUNTS.update(dict.fromkeys(COUNTS, 0))


def lstm_case(**changes):
    """Two bidirectional LSTM layers over a post-padded batch: every part of what the reference reads."""
    adapter = adapter_class("torch-lstm-rnn")()
    case = case_of(adapter, 3, 4, 2, 5, 11, LayerConfig(num_layers=2, bidirectional=True),
                   padding=Padding((5, 3), "post"))
    return dataclasses.replace(case, **changes)


def chunked_case(case):
    """Its chunked runs: one direction (a backward one needs the whole sequence), unpadded."""
    return dataclasses.replace(case, padding=None, chunks=(2, 3), config=LayerConfig(num_layers=2))


def everything(case):
    """What a case's tests read: its reference, its float32 bound and bound against the reference, its chunks',
    and its gradients' values and bounds."""
    chunked = chunked_case(case)
    cotangents, values, bound = gradients.reference_gradients(adapter_class("torch-lstm-rnn")(), case, "float32")
    return {"reference": case.reference(), "bound": case.bound("float32"),
            "vs reference": case.bound_vs_reference("float32"), "chunks": chunked.chunk_references("float32"),
            "gradients": (values, bound)}


def assert_same(a, b, where="result"):
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), where
        for name in a:
            assert_same(a[name], b[name], f"{where}[{name!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{where} differs"


def test_what_the_tests_read_from_the_cache_is_what_the_reference_computes(cache, monkeypatch):
    """Each kind of result, computed once (stored), then read back by a new process: bitwise what the reference
    computes with the cache off, none served for another (a bound for the reference, one dtype's for another's)."""
    case = lstm_case()
    computed = everything(case)
    stored = COUNTS["computed"]
    assert stored >= 6 and COUNTS["from_cache"] == 0 and len(list(cache.iterdir())) == stored
    new_process()
    read = everything(case)
    assert COUNTS == {"from_cache": stored, "computed": 0, "rejected": 0}
    assert_same(read, computed)
    monkeypatch.setenv(OFF_VAR, "1")
    new_process()
    assert_same(everything(case), read)
    # and against the reference's own functions, called here
    stack, xs, state = case.exact_data()
    padding = case._read_padding()
    assert_same(read["reference"], run_stack(stack, xs, state, padding, case.padded_output))
    assert_same(read["bound"], reference_and_bound(stack, xs, state, "float32", 0.0, padding)[1])
    float64 = reference_and_bound(stack, xs, state, "float64", 0.0, padding)[1]
    assert_same(read["vs reference"], pair_bound(read["bound"], float64))
    chunks = chunked_reference_and_bound(*chunked_case(case).exact_data(), "float32", sizes=(2, 3))
    assert_same(read["chunks"][1][0], chunks[1][0])
    assert not np.array_equal(read["bound"]["output"], float64["output"]), "the float32 and float64 bounds are told apart"


def one_ulp_more(array, index):
    changed = array.copy()
    changed[index] = np.nextafter(changed[index], np.inf)
    return changed


def changed_weight(stack):
    """``stack`` with one recurrent weight of layer 1's forward direction one ulp larger."""
    cell = stack.layers[1][0]
    layer = (dataclasses.replace(cell, W_h=one_ulp_more(cell.W_h, (0, 0))), *stack.layers[1][1:])
    return dataclasses.replace(stack, layers=(stack.layers[0], layer, *stack.layers[2:]))


# What a bound reads, each changed in turn: every change is another entry.
CHANGES = {
    "one weight by one ulp": lambda a: (changed_weight(a[0]), *a[1:]),
    "one input by one ulp": lambda a: (a[0], one_ulp_more(a[1], (4, 1, 2)), *a[2:]),
    "no initial state": lambda a: (*a[:2], None, *a[3:]),
    "the dtype": lambda a: (*a[:3], "bfloat16", *a[4:]),
    "the forget bias": lambda a: (*a[:4], 1.0, *a[5:]),
    "the padding's side": lambda a: (*a[:5], Padding((5, 3), "pre"), *a[6:]),
    "the padded output": lambda a: (*a[:6], "repeat"),
}


def bound_arguments(case):
    stack, xs, state = case.exact_data()
    return (stack, xs, state, "float32", 0.0, case.padding, case.padded_output)


def test_other_data_another_dtype_or_other_code_is_another_entry():
    base = bound_arguments(lstm_case())
    name = key("bound", base, "rnn_equivalence.harness.cases")
    assert key("bound", bound_arguments(lstm_case()), "rnn_equivalence.harness.cases") == name, \
        "the same content, made again, is the same entry"
    names = {change: key("bound", CHANGES[change](base), "rnn_equivalence.harness.cases") for change in CHANGES}
    same = [change for change, other in names.items() if other == name]
    assert not same, f"these changes keep the entry: {same}"
    assert len(set(names.values())) == len(CHANGES)
    assert key("reference", base, "rnn_equivalence.harness.cases") != name, "the kind is in the key"
    assert key("bound", base, "rnn_equivalence.harness.gradients") != name, "the calling code is in the key"


def test_an_edit_of_the_references_code_is_a_miss(tmp_path, monkeypatch):
    """The code's digest covers every module of reference/: a module that computes differently is another key."""
    base = bound_arguments(lstm_case())
    before = key("bound", base, "rnn_equivalence.harness.cases")
    import rnn_equivalence.reference as reference

    copy = tmp_path / "reference"
    copy.mkdir()
    for path in sorted(__import__("pathlib").Path(reference.__file__).parent.glob("*.py")):
        (copy / path.name).write_text(path.read_text())
    (copy / "equations.py").write_text((copy / "equations.py").read_text() + "\nEDITED = True\n")  # what runs
    monkeypatch.setattr(reference, "__file__", str(copy / "__init__.py"))
    kept_cache.code_digest.cache_clear()
    try:
        assert key("bound", base, "rnn_equivalence.harness.cases") != before
    finally:
        monkeypatch.undo()
        kept_cache.code_digest.cache_clear()
    assert key("bound", base, "rnn_equivalence.harness.cases") == before


def object_array_entry(raw: bytes) -> bytes:
    """A whole, checksummed entry whose payload holds a pickled object array (what a hostile file would hold)."""
    buffer = io.BytesIO()
    np.savez(buffer, a0=np.array([print], dtype=object),
             __layout__=np.frombuffer(json.dumps({"array": "a0"}).encode(), np.uint8))
    data = buffer.getvalue()
    name = raw.partition(b"\n")[0].split(b" ")[-3].decode()
    return header(name, data) + data


def rewritten(raw: bytes, layout) -> bytes:
    """A whole, checksummed entry with the same arrays and another layout."""
    first, _, data = raw.partition(b"\n")
    with np.load(io.BytesIO(data)) as members:
        arrays = {n: members[n] for n in members.files if n != "__layout__"}
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, __layout__=np.frombuffer(json.dumps(layout).encode(), np.uint8))
    return header(first.split(b" ")[-3].decode(), buffer.getvalue()) + buffer.getvalue()


DAMAGE = {
    "truncated": lambda raw: raw[:-1],
    "empty": lambda raw: b"",
    "a payload byte flipped": lambda raw: raw[:-40] + bytes([raw[-40] ^ 1]) + raw[-39:],
    "no header": lambda raw: raw.partition(b"\n")[2],
    "whole, an object array (pickled) in it": object_array_entry,
    "whole, its layout naming an array not there": lambda raw: rewritten(raw, {"dict": [["h", {"array": "a99"}]]}),
    "whole, an array in no layout": lambda raw: rewritten(raw, {"dict": []}),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_or_hostile_entry_is_computed_again_never_trusted(cache, damage):
    case = lstm_case()
    right = case.bound("float32")
    (entry,) = cache.iterdir()
    entry.write_bytes(DAMAGE[damage](entry.read_bytes()))
    new_process()
    with pytest.warns(RuntimeWarning, match="reference cache: .* is damaged"):
        again = case.bound("float32")
    assert_same(again, right)
    assert COUNTS == {"from_cache": 0, "computed": 1, "rejected": 1}
    new_process()
    assert_same(case.bound("float32"), right)
    assert COUNTS["from_cache"] == 1, "the entry computed again is stored whole"


def test_what_cannot_be_kept_or_keyed_is_refused():
    with pytest.raises(TypeError, match="arrays of numbers"):
        encode({"h": np.array(["a"])})
    with pytest.raises(TypeError, match="by its content"):
        key("bound", (object(),), "rnn_equivalence.harness.cases")
    result = ({"h": np.arange(3.0)}, [np.ones((2, 2), np.float32)])
    assert_same(decode(encode(result)), result)
    with pytest.raises(ValueError, match="not a reference cache entry"):
        decode(b"PK not a zip")


def test_the_off_switch_computes_every_time_and_stores_nothing(cache, monkeypatch):
    monkeypatch.setenv(OFF_VAR, "1")
    calls = []
    for _ in range(2):
        kept("bound", (np.ones(2),), lambda: calls.append(1) or {"h": np.ones(2)}, "rnn_equivalence.harness.cases")
    assert len(calls) == 2 and not cache.exists()


@pytest.mark.parametrize("value", ["yes", "2"])
def test_an_off_switch_that_is_neither_0_nor_1_is_refused(monkeypatch, value):
    monkeypatch.setenv(OFF_VAR, value)
    with pytest.raises(ValueError, match=f"{OFF_VAR}: expected 1 .* or 0, got '{value}'"):
        kept_cache.cache_directory()


def test_the_cache_directory_is_beside_the_converted_models_unless_chosen(monkeypatch, tmp_path):
    for name in (OFF_VAR, CACHE_VAR, "RNN_EQ_CONVERSION_CACHE", "RNN_EQ_NO_CONVERSION_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kept_cache.cache_directory() == tmp_path / "xdg" / "rnn-equivalence" / "references"
    monkeypatch.setenv("RNN_EQ_NO_CONVERSION_CACHE", "1")  # the other cache off: this one stays
    assert kept_cache.cache_directory() == tmp_path / "xdg" / "rnn-equivalence" / "references"
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "mine"))
    assert kept_cache.cache_directory() == tmp_path / "mine"


def test_a_path_that_is_no_directory_is_refused_before_any_test(tmp_path, monkeypatch):
    """conftest.py turns this into a usage error; its header lines and --no-reference-cache are checked in the
    conversion cache's child runs (tests/harness/test_conversion_cache.py), which print both caches'."""
    (tmp_path / "a-file").write_text("")
    monkeypatch.delenv(OFF_VAR, raising=False)
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "a-file"))
    with pytest.raises(ValueError, match="reference cache .*: not a writable directory"):
        kept_cache.check_cache_directory()


def test_a_second_run_reads_what_the_first_computed_and_the_summary_says_so(tmp_path):
    """Two whole runs of one system's reference tests on one cache directory (child processes): the first computes
    every reference and bound, the second reads them all; the summary's header counts both."""
    from tests.harness.test_pytest_run import run_pytest

    env = {CACHE_VAR: str(tmp_path / "references")}
    args = ("-o", "addopts=", "--systems=numpy-split", "tests/equivalence/test_reference.py")
    code, first = run_pytest(*args, env=env)
    assert code == pytest.ExitCode.OK, first
    line = next(line for line in first.splitlines() if line.startswith("References and bounds:"))
    total = int(line.split(" of ")[1].split()[0])
    assert total > 0 and line.startswith("References and bounds: 0 of "), line
    code, second = run_pytest(*args, env=env)
    assert code == pytest.ExitCode.OK, second
    assert f"References and bounds: {total} of {total} from the reference cache." in second, second
