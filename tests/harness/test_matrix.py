"""The version matrix: nox sessions, the merge into one table, and the GitHub workflow that runs it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rnn_equivalence.frameworks import ADAPTERS
from docgen import matrix

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _report(system: str, verdict: str = "equivalent", ratio: float = 0.1, failed=()) -> dict:
    row = {"system": system, "dtype": "float32", "cases": 4, "verdict": verdict, "worst_ratio": ratio,
           "known_issues": [], "failed_tests": [{"test": t, "message": "boom"} for t in failed]}
    environment = {"python": "3.11.7", "os": "Linux", "cpu": "a CPU", "cores": 2}
    return {"environment": environment, "outcomes": {"passed": 4, "failed": len(failed)}, "systems": [row]}


def _entry(root: Path, name: str, status: str, report: dict | None = None) -> None:
    matrix.write_session(root / name, session=name, requested={"tensorflow": name}, status=status,
                         message="" if report else "pip: no matching distribution", installed={"numpy": "2"})
    if report:
        (root / name / matrix.REPORT_FILE).write_text(json.dumps(report))


def test_merge_gives_each_system_a_row_and_each_entry_a_column(tmp_path):
    _entry(tmp_path, "tf-a", "tests ran", _report("tf1", ratio=0.164))
    _entry(tmp_path, "tf-b", "tests ran", _report("tf1", verdict="NOT equivalent", ratio=3.5))
    _entry(tmp_path, "tf-c", "install failed")
    _entry(tmp_path, "tf-d", "tests ran", _report("tf1", verdict="FAILED: 1 test(s)", failed=["tests/x.py::t"]))
    text = matrix.markdown(matrix.load_entries(tmp_path))
    assert "| tf1 | float32 | ✓ 0.164 | ✗ 3.500 | not run | ✗ FAILED: 1 test(s) |" in text
    assert "| tf-c | tensorflow tf-c | numpy 2 | install failed: pip: no matching distribution |  |  |  |" in text
    assert "- tf-d, tf1: `tests/x.py::t`: boom" in text
    assert "- tf1 float32: ✓ in tf-a, ✗ in tf-b, ✗ in tf-d" in text


def test_merge_names_each_entrys_depth_and_the_time_its_run_took(tmp_path):
    _entry(tmp_path, "tf-a", "tests ran", {**_report("tf1"), "depth": "default"})
    session = json.loads((tmp_path / "tf-a" / matrix.SESSION_FILE).read_text())
    (tmp_path / "tf-a" / matrix.SESSION_FILE).write_text(json.dumps({**session, "seconds": 330}))
    text = matrix.markdown(matrix.load_entries(tmp_path))
    assert "| tf-a | tensorflow tf-a | numpy 2 | tests ran | default | 5.5 min | 4 passed |" in text


def test_the_committed_report_is_the_first_column(tmp_path):
    _entry(tmp_path / "entries", "tf-a", "tests ran", _report("tf1", ratio=0.164))
    committed = {**_report("tf1", ratio=0.25), "date": "2026-11-26T05:00:00+00:00", "depth": "full"}
    committed["environment"]["versions"] = {"tensorflow": "2.21.0"}
    (tmp_path / "equivalence.json").write_text(json.dumps(committed))
    entries = matrix.load_entries(tmp_path / "entries", tmp_path / "equivalence.json")
    assert [e["session"] for e in entries] == ["committed", "tf-a"]
    text = matrix.markdown(entries)
    assert "| tf1 | float32 | ✓ 0.250 | ✓ 0.164 |" in text
    assert "| committed | the project's extras pyproject.toml | tensorflow 2.21.0 | tests ran: equivalence.json, " \
           "2026-11-26 | full |  | 4 passed |" in text
    with pytest.raises(SystemExit, match="run the matrix sessions first"):
        matrix.load_entries(tmp_path / "nothing", tmp_path / "equivalence.json")


def _merge(root: Path, entries: Path) -> str:
    output = root.parent / "MATRIX.md"
    matrix.main(["merge", str(root), "--entries", str(entries), "--output", str(output)])
    return output.read_text()


def test_a_fresh_entry_replaces_its_committed_one_and_keeps_the_others(tmp_path):
    entries = tmp_path / "docs-matrix"
    _entry(tmp_path / "first", "tf-a", "tests ran", _report("tf1", ratio=0.164))
    _entry(tmp_path / "first", "tf-b", "tests ran", _report("tf1", ratio=0.5))
    _merge(tmp_path / "first", entries)
    assert sorted(p.name for p in entries.iterdir()) == ["tf-a.json", "tf-b.json"]
    _entry(tmp_path / "rerun", "tf-a", "tests ran", _report("tf1", verdict="NOT equivalent", ratio=3.5))
    text = _merge(tmp_path / "rerun", entries)
    assert "| tf1 | float32 | ✗ 3.500 | ✓ 0.500 |" in text
    committed = json.loads((entries / "tf-a.json").read_text())
    assert committed["schema_version"] == matrix.ENTRY_SCHEMA
    assert committed["report"]["systems"][0]["worst_ratio"] == 3.5
    # A merge with no fresh entry makes the same table of what is committed.
    assert _merge(tmp_path / "no-entries-run", entries).split("\n", 3)[3] == text.split("\n", 3)[3]


def test_an_entry_as_committed_makes_the_table_its_whole_report_makes(tmp_path):
    """What docs/matrix/ keeps of a report is enough: the committed report, as an entry, renders the same."""
    _entry(tmp_path / "run", "full", "tests ran", json.loads((ROOT / "docs" / "equivalence.json").read_text()))
    whole = matrix.markdown(matrix.load_entries(tmp_path / "run"), title_date="then")
    kept = matrix.markdown(matrix.load_entries(tmp_path / "run", entries=tmp_path / "entries"), title_date="then")
    assert kept == whole
    committed, report = tmp_path / "entries" / "full.json", tmp_path / "run" / "full" / matrix.REPORT_FILE
    assert committed.stat().st_size < report.stat().st_size / 5, "an entry as committed is a small part of its report"


def _valid_entry() -> dict:
    return matrix.entry_record({"session": "tf-a", "requested": {}, "status": "tests ran", "message": "",
                                "installed": {}, "pytest_exit": 0, "seconds": 1.0, "report": _report("tf1")})


@pytest.mark.parametrize("text, why", [
    ("{not json", "not a matrix entry"),
    (json.dumps({**_valid_entry(), "schema_version": 0}), "schema_version 0"),
    (json.dumps([1, 2]), "schema_version None"),
    (json.dumps({k: v for k, v in _valid_entry().items() if k != "installed"}), "'installed' is a required property"),
    (json.dumps({**_valid_entry(), "status": "ran"}), r"\$\.status: 'ran' is not one of"),
    (json.dumps({**_valid_entry(), "session": "tf-b"}), "session 'tf-b' is not the file's name"),
    (json.dumps({**_valid_entry(), "colour": "red"}), r"\('colour' was unexpected\)"),
    (json.dumps({**_valid_entry(), "report": {**_valid_entry()["report"], "systems": [{"system": "tf1"}]}}),
     r"\$\.report\.systems\[0\]: 'dtype' is a required property"),
    (json.dumps(_valid_entry()).replace('"worst_ratio": 0.1', '"worst_ratio": "0.1"'),
     r"\$\.report\.systems\[0\]\.worst_ratio: '0\.1' is not of type"),
    (json.dumps(_valid_entry()).replace('"worst_ratio": 0.1', '"worst_ratio": null'), "makes no cell"),
], ids=["not-json", "other-schema", "not-an-object", "missing-key", "bad-status", "renamed", "unknown-key",
        "bad-row", "bad-type", "null-ratio"])
def test_a_malformed_committed_entry_is_refused_by_name(tmp_path, text, why):
    (tmp_path / "entries").mkdir()
    (tmp_path / "entries" / "tf-b.json").write_text(json.dumps(_valid_entry()).replace("tf-a", "tf-b"))
    broken = tmp_path / "entries" / "tf-a.json"
    broken.write_text(text)
    with pytest.raises(SystemExit, match=re.escape(str(broken)) + ".*" + why):
        matrix.load_entries(None, entries=tmp_path / "entries")


def test_the_committed_matrix_is_what_its_entries_make():
    """docs/MATRIX.md is what `nox -s matrix` makes of docs/matrix/*.json and docs/equivalence.json, its
    "Merged" date apart: neither can change without the other."""
    text = (ROOT / "docs" / "MATRIX.md").read_text()
    date = re.search(r"^Merged (\S+) from", text, re.M).group(1)
    entries = matrix.load_entries(None, ROOT / "docs" / "equivalence.json", ROOT / "docs" / "matrix")
    assert matrix.markdown(entries, title_date=date) == text, (
        "docs/MATRIX.md is not what docs/matrix/ and docs/equivalence.json make: run nox -s matrix")


def test_every_kind_of_entry_selects_systems_of_its_own():
    names = list(ADAPTERS)
    for kind in matrix.SELECTIONS:
        own = [n for n in matrix.selected(kind, names) if not n.startswith("numpy")]
        assert own, f"matrix entries of kind {kind!r} select no system of their own"


def _table(text: str, heading: str) -> list[list[str]]:
    """The rows of the Markdown table under ``heading`` (the header row first), each a list of its cells."""
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]


def test_the_committed_matrix_ran_every_system_its_entries_select():
    """docs/MATRIX.md is as current as this commit's systems: for every kind of entry, some entry of that
    kind ran, and every system of the main environment it selects (docgen.matrix.SELECTIONS) has a
    verdict in one of that kind's columns; the README cites it without a caveat."""
    text = (ROOT / "docs" / "MATRIX.md").read_text()
    entries = [row[0] for row in _table(text, "Entries")[1:]]
    header, *rows = _table(text, "System x entry")
    assert rows, "docs/MATRIX.md has no system rows"
    main = [name for name, cls in ADAPTERS.items() if not cls.environment]
    for kind in matrix.SELECTIONS:
        columns = [i for i, name in enumerate(header) if name.startswith(f"{kind}-")]
        assert columns and all(header[i] in entries for i in columns), (
            f"docs/MATRIX.md has no {kind!r} entry; run nox -s {kind}, then nox -s matrix")
        ran = {row[0] for row in rows if any(row[i] != "not run" for i in columns)}
        missing = sorted(set(matrix.selected(kind, main)) - ran)
        assert not missing, f"docs/MATRIX.md predates systems its {kind!r} entries select: {missing}; run nox"
    readme = (ROOT / "README.md").read_text()
    assert "[docs/MATRIX.md](docs/MATRIX.md) (older" not in readme


def test_merge_of_nothing_is_an_error_that_says_what_to_run(tmp_path):
    with pytest.raises(SystemExit, match="run the matrix sessions first"):
        matrix.load_entries(tmp_path)


def test_record_command_writes_what_merge_reads(tmp_path):
    subprocess.run([sys.executable, "-m", "docgen.matrix", "record", str(tmp_path / "e"), "--session", "e",
                    "--requested", '{"jax": "0.9.2"}', "--status", "import failed", "--message", "no jaxlib",
                    "--installed", "numpy,no-such-distribution"], cwd=ROOT, check=True)
    (entry,) = matrix.load_entries(tmp_path)
    assert entry["status"] == "import failed" and entry["report"] is None
    assert set(entry["installed"]) == {"numpy"}


def test_nox_lists_a_session_per_pinned_version():
    listing = subprocess.run([sys.executable, "-m", "nox", "--list", "--json"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
    sessions = {s["session"] for s in json.loads(listing)}
    assert {"tensorflow(tf='2.19')", "tensorflow(tf='2.20')", "tensorflow(tf='2.21')"} <= sessions
    assert sum(s.startswith("keras(") for s in sessions) >= 2 and sum(s.startswith("jax(") for s in sessions) >= 2
    assert "matrix" in sessions


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[w.name for w in WORKFLOWS])
def test_workflow_passes_the_github_workflow_schema(workflow):
    """check-jsonschema's vendored GitHub workflow schema: no network needed."""
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                             str(workflow)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_equivalence_workflow_is_callable_and_merges_its_reports():
    from ruamel import yaml  # check-jsonschema's own YAML parser

    workflow = yaml.YAML(typ="safe").load((ROOT / ".github" / "workflows" / "equivalence.yml").read_text())
    assert "workflow_call" in workflow["on"]
    pins = json.loads(workflow["env"]["DEFAULT_PINS"])
    # Every default entry names itself, and asks only for pins the install step reads.
    assert all("name" in p and set(p) <= {"name", "torch", "tensorflow", "tf_keras", "keras", "jax"} for p in pins)
    assert any(p.get("torch") not in (None, "2.13.0") for p in pins), "torch versions are part of the CI matrix"
    steps = " ".join(str(s.get("run", "")) for job in workflow["jobs"].values() for s in job.get("steps", []))
    assert "--equivalence-report=" in steps and "docgen.matrix merge" in steps and "docgen.matrix record" in steps
    assert workflow["jobs"]["merge"]["if"] == "always()"
    # Each entry's run in parts, one job each, merged per entry before the table.
    assert "shard" in workflow["jobs"]["suite"]["strategy"]["matrix"] and '--shard="$SHARD"' in steps
    assert "rnn_equivalence.harness.shards merge" in steps


@pytest.mark.parametrize("name, text", [("session.json", "{not json"), ("session.json", "[1]"),
                                        ("equivalence.json", "{truncated")])
def test_a_malformed_fresh_entry_is_refused_by_name(tmp_path, name, text):
    """What a matrix session left is read as data: a broken file is an error naming it, not a traceback."""
    folder = tmp_path / "run" / "tf-a"
    matrix.write_session(folder, session="tf-a", requested={}, status="tests ran")
    (folder / matrix.REPORT_FILE).write_text(json.dumps(_report("tf1")))
    (folder / name).write_text(text)
    with pytest.raises(SystemExit, match=re.escape(str(folder / name)) + ": not a matrix session's"):
        matrix.load_entries(tmp_path / "run")
