"""A run split into parts (``--shard=K/N``) and merged (``python -m rnn_equivalence.harness.shards merge``)
reports what the unsharded run reports: the same systems, pairs, findings, outcomes and command; the parts are
disjoint and together the whole run; a merge of parts that do not make one run is refused."""

import json
import subprocess
import sys

import pytest

from rnn_equivalence.harness import shards
from tests.harness.test_pytest_run import ROOT, run_pytest

SELECTION = ("--systems=numpy-split,numpy-concat", "--depth=quick", "tests/equivalence/test_reference.py",
             "tests/equivalence/test_mutations.py", "tests/equivalence/test_pairs.py",
             "tests/equivalence/test_non_equivalence.py")


def comparable(report: dict) -> dict:
    """A report without what differs between any two runs: the date, and what the run cost (its seconds, its
    processes' memory), whose systems must be the same."""
    assert not report["cost"]["seconds"] or all(spent >= 0 for spent in report["cost"]["seconds"].values())
    return {key: (sorted(value["seconds"]) if key == "cost" else value)
            for key, value in report.items() if key != "date"}


def merge(paths, output):
    return subprocess.run([sys.executable, "-m", "rnn_equivalence.harness.shards", "merge", *map(str, paths),
                           "--output", str(output)], cwd=ROOT, capture_output=True, text=True)


def test_merged_parts_are_the_unsharded_report(tmp_path):
    # The same --equivalence-report for the whole run and the parts: the command is part of the report.
    code, out = run_pytest(*SELECTION, f"--equivalence-report={tmp_path / 'run'}")
    assert code == 0, out[-3000:]
    whole = json.loads((tmp_path / "run" / "equivalence.json").read_text())
    passed = []
    for k in (1, 2, 3):
        code, out = run_pytest(*SELECTION, f"--shard={k}/3", f"--equivalence-report={tmp_path / 'run'}")
        assert code == 0, out[-3000:]
        assert f"part-{k}-of-3.json" in out
        passed.append(json.loads((tmp_path / "run" / f"part-{k}-of-3.json").read_text())["outcomes"]["passed"])
    assert all(passed) and sum(passed) == whole["outcomes"]["passed"], passed  # disjoint, and the whole run
    result = merge(sorted((tmp_path / "run").glob("part-*.json")), tmp_path / "merged")
    assert result.returncode == 0, result.stderr
    merged = json.loads((tmp_path / "merged" / "equivalence.json").read_text())
    assert comparable(merged) == comparable(whole)
    def page(run):  # past the date line, without the cost line (its seconds and memory differ between runs)
        text = (tmp_path / run / "EQUIVALENCE.md").read_text().split("\n", 3)[3]
        return "\n".join(line for line in text.splitlines() if not line.startswith(("Test time: ", "Wall time: ")))

    assert page("merged") == page("run")


def test_a_merge_of_parts_that_do_not_make_one_run_is_refused(tmp_path):
    part = {"part_schema": shards.PART_SCHEMA, "shard": [1, 2], "depth": "quick", "seed": 0, "names": ["numpy-split"],
            "command": "pytest", "environment": {}, "outcomes": {"passed": 1}, "records": []}
    (tmp_path / "a.json").write_text(json.dumps(part))
    (tmp_path / "b.json").write_text(json.dumps({**part, "shard": [2, 2], "depth": "full"}))
    (tmp_path / "c.json").write_text(json.dumps({**part, "shard": [1, 2]}))
    cases = {("a.json",): "expected parts 1..2 of 2", ("a.json", "b.json"): "depth 'full' differs",
             ("a.json", "c.json"): "expected parts 1..2 of 2, each once"}
    for names, message in cases.items():
        result = merge([tmp_path / name for name in names], tmp_path / "out")
        assert result.returncode == 2 and message in result.stderr, (names, result.stderr)
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["3", "0/2", "3/2", "a/b", "1/0"])
def test_a_bad_shard_is_refused_by_name(value):
    with pytest.raises(ValueError, match="--shard: expected"):
        shards.parse(value)


def test_parts_do_not_depend_on_the_collection_order():
    ids = [f"tests/equivalence/test_reference.py::test_x[case{i}]" for i in range(300)]
    parts = [shards.part_of(nodeid, 4) for nodeid in ids]
    assert parts == [shards.part_of(nodeid, 4) for nodeid in reversed(ids)][::-1]
    assert set(parts) == {1, 2, 3, 4} and min(parts.count(k) for k in range(1, 5)) > 40
