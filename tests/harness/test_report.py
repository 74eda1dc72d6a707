"""The equivalence report: written by one option, valid against its schema, readable."""

import json
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
    text = (tmp_path / "EQUIVALENCE.md").read_text()
    assert '<a id="numpy-split-float32"></a>numpy-split' in text and report["environment"]["versions"]["numpy"] in text
