"""The cache of converted models kept across runs (frameworks/conversion_cache.py), with a fake converter: NumPy
only. A changed weight, version or code misses; a damaged entry is converted again, never trusted; two
processes writing one key leave one whole entry; the off switch and the chosen directory are obeyed."""

import multiprocessing
import warnings

import numpy as np
import pytest

from rnn_equivalence.frameworks import conversion_cache as converted
from rnn_equivalence.frameworks.conversion_cache import (CACHE_VAR, COUNTS, OFF_VAR, conversion_key, converted_once,
                                                         read_entry, weights_digests, write_entry)
from rnn_equivalence.harness import reference_cache as references
from rnn_equivalence.harness.summary import Summary, conversions_text
from tests.harness.cache_writer import write_many
from tests.harness.test_pytest_run import run_pytest


class FakeSystem:
    """What ``converted_once`` reads of an adapter: its name and the distributions its models depend on."""

    name = "fake-converter"
    distributions = ("numpy",)
    converter_distributions = ("pytest",)


class FakeConverter:
    """A conversion that counts its calls: its model is the weights' bytes, behind a marker."""

    def __init__(self):
        self.calls = 0

    def __call__(self, native):
        def convert():
            self.calls += 1
            return b"model:" + b"".join(np.ascontiguousarray(native[name]).tobytes() for name in sorted(native))
        return convert


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"kernel": rng.standard_normal((3, 4)).astype(np.float32), "bias": rng.standard_normal(4).astype(np.float32)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory of this test's own, the cache on, the process's memory and counts empty."""
    directory = tmp_path / "conversions"
    monkeypatch.setenv(CACHE_VAR, str(directory))
    monkeypatch.delenv(OFF_VAR, raising=False)
    forget_this_process()
    yield directory
    forget_this_process()


def forget_this_process():
    """What a new process starts with: no model in memory, no counts (the disk is what is shared)."""
    converted._MEMORY.clear()
    converted.take_counts()


def convert_in_a_new_process(native, fake, parts=("structure",)):
    forget_this_process()
    return converted_once(FakeSystem(), (*parts, weights_digests(native)), fake(native))


def entries(directory):
    return sorted(p for p in directory.iterdir() if not p.name.startswith("."))


def test_a_second_run_reads_the_model_from_the_cache(cache):
    fake, native = FakeConverter(), weights()
    first = convert_in_a_new_process(native, fake)
    second = convert_in_a_new_process(native, fake)
    assert first == second and fake.calls == 1 and COUNTS["from_cache"] == 1
    assert len(entries(cache)) == 1


def test_a_changed_weight_misses_the_cache(cache):
    fake, native = FakeConverter(), weights()
    convert_in_a_new_process(native, fake)
    changed = {**native, "bias": native["bias"].copy()}
    changed["bias"][2] = np.nextafter(changed["bias"][2], np.float32(np.inf))  # one ulp of one weight
    model = convert_in_a_new_process(changed, fake)
    assert fake.calls == 2 and COUNTS == {"from_cache": 0, "converted": 1, "rejected": 0}
    assert model == FakeConverter()(changed)() and len(entries(cache)) == 2


def test_changed_options_miss_the_cache(cache):
    fake, native = FakeConverter(), weights()
    convert_in_a_new_process(native, fake, parts=("structure", "batch 3"))
    convert_in_a_new_process(native, fake, parts=("structure", None))
    assert fake.calls == 2


def test_a_changed_version_misses_the_cache(cache, monkeypatch):
    fake, native = FakeConverter(), weights()
    convert_in_a_new_process(native, fake)
    converted.conversion_versions.cache_clear()
    monkeypatch.setattr(converted, "distribution_version", lambda name: "99.0" if name == "pytest" else "1.0")
    try:
        convert_in_a_new_process(native, fake)
    finally:
        converted.conversion_versions.cache_clear()
    assert fake.calls == 2, "an upgrade of a distribution the converter depends on must convert again"


def test_an_edit_of_the_adapters_code_changes_the_key(tmp_path):
    """The key holds a digest of the source files that build and convert the model (a TFLite system's:
    its module, the functional model's, the Keras mapping's and runner's): one byte edited there changes it."""
    from rnn_equivalence.frameworks import ADAPTERS

    names = {path.name for path in converted.source_files(ADAPTERS["tflite-keras2-lstm-rnn"])}
    assert {"tflite_export.py", "keras_model.py", "keras_adapters.py", "keras_mapping.py", "keras_runner.py",
            "base.py", "mapping.py"} <= names
    source = tmp_path / "adapter.py"
    source.write_text("kernel = weights.T\n")
    before = converted.files_digest([source])
    source.write_text("kernel = weights\n")
    assert converted.files_digest([source]) != before


def test_an_edit_of_comments_or_docstrings_keeps_the_key(tmp_path):
    """What is hashed is the code as Python parses it: a comment, a docstring, a blank line or a reflowed call
    changes no model, so it keys none afresh (a full-depth run converts some 4 400); a string that is a value, not
    a docstring, is code."""
    source = tmp_path / "adapter.py"
    source.write_text('def build(w):\n    """Old words."""\n    return w.T  # transposed\n\nGATES = "ifgo"\n')
    before = converted.files_digest([source])
    source.write_text('"""A module docstring."""\n\n\ndef build(w):\n    """New words, longer,\n    on two lines."""\n'
                      '    # why: the kernel is stored (in, out)\n    return (w\n            .T)\n\n\nGATES = "ifgo"\n')
    assert converted.files_digest([source]) == before
    source.write_text('def build(w):\n    """Old words."""\n    return w.T\n\nGATES = "igfo"\n')
    assert converted.files_digest([source]) != before
    source.write_text('def build(w):\n    return w\n\nGATES = "ifgo"\n')
    assert converted.files_digest([source]) != before


def _change_checksum(raw: bytes) -> bytes:
    first, _, data = raw.partition(b"\n")
    *rest, checksum = first.split(b" ")
    wrong = (b"0" if checksum[:1] != b"0" else b"1") + checksum[1:]
    return b" ".join([*rest, wrong]) + b"\n" + data


# The ways an entry is damaged: a full disk or a crash mid-write (without the rename), an edit, a bit rot.
DAMAGE = {
    "truncated": lambda raw: raw[:-1],
    "cut in its header": lambda raw: raw[:20],
    "empty": lambda raw: b"",
    "a payload byte flipped": lambda raw: raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:],
    "a checksum digit changed": _change_checksum,
    "a byte appended": lambda raw: raw + b"\0",
    "no header": lambda raw: raw.partition(b"\n")[2],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_converted_again_never_trusted(cache, damage):
    fake, native = FakeConverter(), weights()
    right = convert_in_a_new_process(native, fake)
    (entry,) = entries(cache)
    entry.write_bytes(DAMAGE[damage](entry.read_bytes()))
    with pytest.warns(RuntimeWarning, match="is damaged"):
        model = convert_in_a_new_process(native, fake)
    assert model == right and fake.calls == 2, "a damaged entry was trusted"
    assert COUNTS == {"from_cache": 0, "converted": 1, "rejected": 1}
    assert read_entry(entry, entry.stem) == right, "the entry converted again is stored whole"


def test_an_entry_under_another_key_is_not_trusted(cache):
    """A whole, checksummed entry copied to another key's name (its header names its own key)."""
    fake = FakeConverter()
    convert_in_a_new_process(weights(0), fake)
    (entry,) = entries(cache)
    other = conversion_key(FakeSystem(), ("structure", weights_digests(weights(1))))
    entry.with_name(f"{other}.onnx").write_bytes(entry.read_bytes())
    with pytest.warns(RuntimeWarning, match="is damaged"):
        model = convert_in_a_new_process(weights(1), fake)
    assert model == FakeConverter()(weights(1))() and fake.calls == 2


PAYLOAD = 1 << 20  # large enough that a write is many system calls, so that a torn write would show


def test_two_processes_writing_one_key_do_not_tear_it(tmp_path, depth):
    """Two processes write one key over and over, each its own payload, while this one reads it: every
    read is one writer's whole payload (none is rejected), and one whole entry is left, no temporary file.
    100 writes each at full depth, 25 short of it (harness/depth.py, "Tests of the reference and the
    machinery"): the reads still meet the writes (``seen``)."""
    key, path = "k" * 64, tmp_path / f"{'k' * 64}.onnx"
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold framework threads
    times = 100 if depth == "full" else 25
    writers = [context.Process(target=write_many, args=(str(tmp_path), key, fill, times, PAYLOAD))
               for fill in (0x61, 0x62)]
    for writer in writers:
        writer.start()
    forget_this_process()
    seen = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rejected (torn) entry warns: an error here
        while any(writer.is_alive() for writer in writers):
            data = read_entry(path, key)
            if data is not None:
                assert len(data) == PAYLOAD and len(set(data)) == 1, "a torn entry was read"
                seen.add(data[0])
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert seen, "no read met an entry: the test did not read while the writers wrote"
    assert COUNTS["rejected"] == 0 and seen <= {0x61, 0x62}
    final = read_entry(path, key)
    assert final is not None and len(set(final)) == 1 and final[0] in (0x61, 0x62)
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "a temporary file was left behind"


def test_the_off_switch_converts_every_time_and_stores_nothing(cache, monkeypatch):
    monkeypatch.setenv(OFF_VAR, "1")
    fake, native = FakeConverter(), weights()
    convert_in_a_new_process(native, fake)
    convert_in_a_new_process(native, fake)
    assert fake.calls == 2 and COUNTS["from_cache"] == 0
    assert not cache.exists() or not any(cache.iterdir())


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_an_off_switch_that_is_neither_0_nor_1_is_refused(cache, monkeypatch, value):
    monkeypatch.setenv(OFF_VAR, value)
    with pytest.raises(ValueError, match=f"{OFF_VAR}: expected 1 .* or 0, got '{value}'"):
        converted.cache_directory()


def test_the_cache_directory_is_the_users_unless_chosen(monkeypatch, tmp_path):
    monkeypatch.delenv(OFF_VAR, raising=False)
    monkeypatch.delenv(CACHE_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # platformdirs honours it on Linux
    assert converted.cache_directory() == tmp_path / "xdg" / "rnn-equivalence" / "conversions"
    monkeypatch.setenv(CACHE_VAR, str(tmp_path / "mine"))
    assert converted.cache_directory() == tmp_path / "mine"


def test_the_options_and_the_variables_reach_the_header(tmp_path):
    """``--no-conversion-cache`` and ``RNN_EQ_NO_CONVERSION_CACHE=1`` turn it off, ``RNN_EQ_CONVERSION_CACHE``
    moves it (the report header names it), and a path that is no directory is a usage error, before any
    test runs."""
    test = "tests/reference/test_params.py"
    chosen = {CACHE_VAR: str(tmp_path / "chosen"), references.CACHE_VAR: str(tmp_path / "references")}
    # the reference cache's option and directory (harness/reference_cache.py) ride along: the same child runs
    for args, env, expected in ((["--no-conversion-cache", "--no-reference-cache"], chosen,
                                 ("conversion cache off", "reference cache off")),
                                ([], {**chosen, OFF_VAR: "1"}, ("conversion cache off", "references and bounds "
                                                                 f"cached in {tmp_path / 'references'}")),
                                ([], chosen, (f"converted models cached in {tmp_path / 'chosen'}",))):
        code, out = run_pytest("--collect-only", *args, test, env=env)  # the header is printed before collection
        assert code == pytest.ExitCode.OK and all(line in out for line in expected), out
    (tmp_path / "a-file").write_text("")
    code, out = run_pytest(test, env={CACHE_VAR: str(tmp_path / "a-file")})
    assert code == pytest.ExitCode.USAGE_ERROR and "not a writable directory" in out, out


class Report:
    """What the summary reads of a test's report."""

    def __init__(self, counts, when="call"):
        self.when, self.passed, self.failed, self.skipped = when, True, False, False
        self.user_properties = [("rnn_equivalence_conversions", counts)]


def test_the_counts_of_every_process_reach_the_summary_header():
    summary = Summary()
    summary.conversion_cache = "/cache"
    for counts, when in (({"from_cache": 3, "converted": 1, "rejected": 0}, "call"),
                         ({"from_cache": 0, "converted": 2, "rejected": 1}, "setup"),
                         ({"from_cache": 4, "converted": 0, "rejected": 0}, "teardown")):
        summary.pytest_runtest_logreport(Report(counts, when))
    assert summary.conversions == {"from_cache": 7, "converted": 3, "rejected": 1}
    text = summary.conversions_text()
    assert text.startswith("Converted models: 7 of 10 conversions from the conversion cache (/cache), 1 damaged")
    assert conversions_text({"from_cache": 0, "converted": 0, "rejected": 0}) == ""


def test_each_system_is_given_the_models_it_needed():
    """The report's cost names each converted system's models (from the cache or converted): the count the
    cost issue's note reads per system and depth; counts without a system (the cache's own tests) add none."""
    summary = Summary()
    for counts in ({"from_cache": 3, "converted": 1, "rejected": 0, "system": "tflite-keras2-rnn"},
                   {"from_cache": 0, "converted": 2, "rejected": 1, "system": "tflite-keras2-rnn"},
                   {"from_cache": 1, "converted": 0, "rejected": 0, "system": "tf2onnx-keras2-rnn"},
                   {"from_cache": 0, "converted": 5, "rejected": 0}):
        summary.pytest_runtest_logreport(Report(counts))
    assert summary.conversions_by_system == {"tflite-keras2-rnn": 6, "tf2onnx-keras2-rnn": 1}
    assert summary.conversions["converted"] == 8
