"""The summary table and the report of child pytest runs: one under xdist, one with a broken mapping and an
adapter that raises.

Each child run is shared by the checks on its terminal summary and on its report:
a child pytest costs seconds, most of it start-up.
"""

import json
import re
from pathlib import Path

import pytest

from tests.harness.test_pytest_run import run_pytest, verdict

ROOT = Path(__file__).resolve().parents[2]


def test_summary_and_report_of_an_xdist_run(tmp_path):
    """The table survives xdist, the header names versions, and the report is valid and agrees."""
    import jsonschema

    code, out = run_pytest("-n", "2", "--frameworks=numpy-split,numpy-concat", "--equivalence-summary=full",
                           f"--equivalence-report={tmp_path}", "tests/equivalence/test_reference.py",
                           "tests/equivalence/test_mutations.py", "tests/equivalence/test_exact.py",
                           "tests/equivalence/test_pairs.py")
    assert code == pytest.ExitCode.OK, out
    assert "rnn-equivalence: python" in out and "numpy" in out
    table = out[out.index("equivalence summary"):]
    for system in ("numpy-split", "numpy-concat"):
        row = next(line for line in table.splitlines() if line.startswith(system + " "))
        assert verdict(row) == "equivalent" and re.search(r" (\d+)/\1 ", row) and " yes " in row, row
    assert "numpy-split vs numpy-concat" in table

    report = json.loads((tmp_path / "equivalence.json").read_text())
    schema = json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text())
    jsonschema.validate(report, schema, format_checker=jsonschema.FormatChecker())
    assert {(s["system"], s["dtype"]) for s in report["systems"]} == {
        (n, d) for n in ("numpy-split", "numpy-concat") for d in ("float32", "float64")}
    assert all(s["verdict"] == "equivalent" for s in report["systems"])
    assert [p["pair"] for p in report["pairs"]] == ["numpy-split vs numpy-concat"]
    assert "--frameworks=numpy-split,numpy-concat" in report["command"]
    assert report["outcomes"]["failed"] == 0 and report["outcomes"]["passed"] == _passed(out) > 0
    text = (tmp_path / "EQUIVALENCE.md").read_text()
    assert '<a id="numpy-split-float32"></a>numpy-split' in text and report["environment"]["versions"]["numpy"] in text


def _passed(out: str) -> int:
    return int(re.search(r"(\d+) passed", out).group(1))


@pytest.fixture(scope="session")  # not the module's: the schedule (conftest.py) need not keep a module's tests together
def broken_run(tmp_path_factory):
    """One child run for two tests (under -n, on one worker: their ``xdist_group``): numpy-split's mapping
    broken (its recurrent kernel transposed), numpy-concat's adapter raising. (code, output, report, page)."""
    directory = tmp_path_factory.mktemp("broken")
    code, out = run_pytest("-p", "rnn_equivalence.harness.break_mapping", "-p", "tests.harness.perturb",
                           "--frameworks=numpy-split,numpy-concat", "--equivalence-summary=full",
                           f"--equivalence-report={directory}", "tests/equivalence/test_reference.py",
                           "tests/equivalence/test_pairs.py",
                           env={"RNN_EQ_BREAK": "numpy-split=W_hh transposed", "RNN_EQ_PERTURB": "numpy-concat=raise"})
    return code, out, json.loads((directory / "equivalence.json").read_text()), (directory / "EQUIVALENCE.md").read_text()


@pytest.mark.xdist_group("broken-run")
def test_a_broken_mapping_turns_the_suite_and_the_report_red(broken_run):
    """A system whose tests fail is never reported equivalent; the report says which tests failed."""
    import jsonschema

    code, out, report, page = broken_run
    assert code == pytest.ExitCode.TESTS_FAILED, out
    assert "EXCEEDS the bound" in out
    row = next(line for line in out.splitlines() if line.startswith("numpy-split "))
    assert verdict(row) == "NOT equivalent", row

    jsonschema.validate(report, json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text()))
    failed = int(re.search(r"(\d+) failed", out).group(1))
    assert report["outcomes"]["failed"] == failed
    rows = {s["dtype"]: s for s in report["systems"] if s["system"] == "numpy-split"}
    assert set(rows) == {"float32", "float64"}
    for row in rows.values():
        assert row["verdict"] == "NOT equivalent", row
        assert row["failed_tests"] and all(f["test"].startswith("tests/equivalence/test_reference.py::")
                                           for f in row["failed_tests"])
    # every failed test in one row: the broken system's, the raising one's, or their pair's
    assert sum(len(r["failed_tests"]) for r in report["systems"] + report["pairs"]) == failed
    assert "## Failed tests" in page


def _rows(out: str) -> dict:
    """Summary rows by their first column (system and dtype, or pair)."""
    rows = {}
    for line in out[out.index("equivalence summary"):].splitlines():
        columns = re.split(r"\s{2,}", line.strip())
        dtype = next((c for c in columns if c in ("float32", "float64")), None)
        if dtype:
            rows[f"{columns[0]} {dtype}"] = line
    return rows


def test_a_disagreement_is_reported_not_a_crash(tmp_path, require_system):
    """One system's outputs scaled by 1 + 1e-3: its cell rows, its layer rows and its pair rows go
    NOT equivalent, the run ends in exit code 1 (not an INTERNALERROR), and the report is written."""
    require_system("torch")  # the child run is about torch's cell and layer
    code, out = run_pytest("-p", "tests.harness.perturb", "--frameworks=torch,torch-rnn,numpy-split",
                           "--equivalence-summary=full",
                           f"--equivalence-report={tmp_path}", "tests/equivalence/test_reference.py",
                           "tests/equivalence/test_pairs.py", env={"RNN_EQ_PERTURB": "torch,torch-rnn=0.001"})
    assert code == pytest.ExitCode.TESTS_FAILED, out
    assert "INTERNALERROR" not in out
    rows = _rows(out)
    for system in ("torch float32", "torch float64", "torch-rnn float32", "torch-rnn float64",
                   "torch vs numpy-split float32"):
        assert verdict(rows[system]) == "NOT equivalent", rows[system]
    assert verdict(rows["numpy-split float32"]) == "equivalent", rows["numpy-split float32"]
    report = json.loads((tmp_path / "equivalence.json").read_text())
    assert {p["pair"]: p["verdict"] for p in report["pairs"]} == {"torch vs numpy-split": "NOT equivalent"}


@pytest.mark.xdist_group("broken-run")
def test_an_adapter_that_raises_is_reported_failed(broken_run):
    code, out, report, _ = broken_run
    assert code == pytest.ExitCode.TESTS_FAILED, out
    rows = _rows(out)
    for row in ("numpy-concat float32", "numpy-concat float64", "numpy-split vs numpy-concat float32"):
        assert verdict(rows[row]).startswith("FAILED: "), rows[row]
    failures = [f for s in report["systems"] if s["system"] == "numpy-concat" for f in s["failed_tests"]]
    assert failures and all("numpy-concat broke on purpose" in f["message"] for f in failures)
