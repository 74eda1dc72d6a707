"""The equivalence report: written by one option, valid against its schema, readable."""

import json
import re
from pathlib import Path

import pytest

from tests.harness.test_pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[2]


def test_report_is_written_and_valid(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    code, out = run_pytest("-n", "2", "--frameworks=numpy-split,numpy-concat",
                           f"--equivalence-report={tmp_path}", "tests/equivalence/test_cells.py",
                           "tests/equivalence/test_mutations.py", "tests/equivalence/test_exact.py")
    assert code == pytest.ExitCode.OK, out
    report = json.loads((tmp_path / "equivalence.json").read_text())
    schema = json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text())
    jsonschema.validate(report, schema, format_checker=jsonschema.FormatChecker())
    assert {(s["system"], s["dtype"]) for s in report["systems"]} == {
        (n, d) for n in ("numpy-split", "numpy-concat") for d in ("float32", "float64")}
    assert all(s["verdict"] == "equivalent" for s in report["systems"])
    assert "--frameworks=numpy-split,numpy-concat" in report["command"]
    assert report["outcomes"]["failed"] == 0 and report["outcomes"]["passed"] == _passed(out) > 0
    text = (tmp_path / "EQUIVALENCE.md").read_text()
    assert '<a id="numpy-split-float32"></a>numpy-split' in text and report["environment"]["versions"]["numpy"] in text


def _passed(out: str) -> int:
    return int(re.search(r"(\d+) passed", out).group(1))


def test_report_of_a_broken_mapping_names_the_failed_tests(tmp_path):
    """A system whose tests fail is never reported equivalent, and the report says which tests failed."""
    jsonschema = pytest.importorskip("jsonschema")
    code, out = run_pytest("-p", "harness.break_mapping", "--frameworks=numpy-split",
                           f"--equivalence-report={tmp_path}", "tests/equivalence/test_cells.py",
                           env={"RNN_EQ_BREAK": "numpy-split=b_x doubled"})
    assert code == pytest.ExitCode.TESTS_FAILED, out
    report = json.loads((tmp_path / "equivalence.json").read_text())
    jsonschema.validate(report, json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text()))
    failed = int(re.search(r"(\d+) failed", out).group(1))
    assert report["outcomes"]["failed"] == failed
    rows = {s["dtype"]: s for s in report["systems"]}
    for row in rows.values():
        assert row["verdict"] == "NOT equivalent", row
        assert row["failed_tests"] and all(f["test"].startswith("tests/equivalence/test_cells.py::")
                                           for f in row["failed_tests"])
    assert sum(len(r["failed_tests"]) for r in rows.values()) == failed
    assert "## Failed tests" in (tmp_path / "EQUIVALENCE.md").read_text()
