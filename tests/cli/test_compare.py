"""``rnn-equivalence compare A B``: the two systems' forward cases, run now by the engine
(``rnn_equivalence.engine``, no pytest), and the answer (exit 0 Yes, 1 No or Only if, 2 a question the suite
does not answer, or a framework not installed). The runs use systems that need NumPy or ONNX only; the answer's
logic is the same for every framework. The engine's rows are the suite's own (test_reference.py's, in a child
pytest), and a broken mapping turns the answer to No."""

import json
from pathlib import Path

import pytest

from click.testing import CliRunner

from rnn_equivalence.cli import main
from rnn_equivalence.compare import mapping_lines
from rnn_equivalence.engine import report
from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.reference.config import CELL
from tests.harness.test_pytest_run import run_pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    result = CliRunner().invoke(main, ["compare", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    return result


def test_the_two_formulas_are_the_same_function():
    """The lecture's question: the concatenated and the split formula, run now at quick depth."""
    result = run("numpy-concat", "numpy-split", "--json")
    answer = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert answer["verdict"] == "Yes"
    assert {e["system"] for e in answer["evidence"]} == {"numpy-concat", "numpy-split"}
    assert {e["dtype"] for e in answer["evidence"]} == {"float32", "float64"}
    assert all(e["cases"] > 0 and e["worst_ratio"] <= 1 for e in answer["evidence"])
    assert answer["run"]["depth"] == "quick" and "numpy" in answer["run"]["versions"]
    assert "convert(a_weights, 'numpy-concat',\n" in "\n".join(answer["mapping"]) + "\n"


def test_the_two_gru_variants_are_not(tmp_path):
    """ONNX's GRU with linear_before_reset 1 and 0: each is within its own bound, and the answer is No,
    naming the variants; the text fits 100 columns."""
    result = run("onnx-reference-gru", "onnx-reference-gru-reset-before")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("No: onnx-reference-gru and onnx-reference-gru-reset-before.")
    assert "reset_after" in result.output and "reset_before" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 100


def test_only_if_where_the_target_cannot_hold_the_weights():
    """PyTorch's GRU to Flax nnx's, which has no slot for b_hn: the mapping says why (the run is not
    needed to see that; ``mapping_lines`` is what the answer's "Only if" comes from)."""
    lines, refusal = mapping_lines("torch-gru", "flax-nnx-gru")
    assert "no slot for b_hn" in refusal
    assert any("dense_h.kernel" in line for line in lines) and any("bias_hh" in line for line in lines)
    assert mapping_lines("torch-gru", "keras-tf-gru")[1] is None
    assert mapping_lines("flax-nnx-gru", "torch-gru")[1] is None  # b_hn = 0 goes anywhere


@pytest.mark.parametrize(("args", "message"), [
    (("torch-lstm", "torch-gru"), "expected two systems of one family; torch-lstm is lstm"),
    (("torch-lstm", "torch-lstmm"), "unknown system 'torch-lstmm'"),
    (("torch-lstm", "torch-lstm"), "expected two different systems")])
def test_questions_the_suite_does_not_answer_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize(("mutation", "weight"), [("W_hh transposed", "W_hh"), ("b_h dropped", "b_h")])
def test_a_broken_mapping_answers_no(monkeypatch, mutation, weight):
    """numpy-split's mapping broken where a wrong mapping would live (``to_native``, as
    harness/break_mapping.py breaks it for the suite): the engine measures it beyond its bound and the answer
    is No, naming it; numpy-concat, untouched, stays within."""
    cls = adapter_class("numpy-split")
    correct, wrong = cls.to_native, cls.mutations[mutation]
    monkeypatch.setattr(cls, "to_native", lambda self, params, config=CELL: (
        wrong(native) if weight in (native := correct(self, params, config)) else native))  # no b_h: no bias
    result = run("numpy-concat", "numpy-split", "--json")
    answer = json.loads(result.output)
    assert result.exit_code == 1 and answer["verdict"] == "No", result.output
    worst = {e["system"]: max(x["worst_ratio"] for x in answer["evidence"] if x["system"] == e["system"])
             for e in answer["evidence"]}
    assert worst["numpy-split"] > 1 >= worst["numpy-concat"], worst
    assert answer["reason"].startswith("numpy-split float"), answer["reason"]
    assert "NOT equivalent" in answer["reason"] and "numpy-concat" not in answer["reason"]


@pytest.mark.parametrize("broken", ["requires", "start"])
def test_a_framework_that_is_missing_exits_2_naming_it(monkeypatch, broken):
    """A framework not installed, or installed and failing to import: one line, exit 2, before any case runs."""
    cls = adapter_class("numpy-split")
    if broken == "requires":
        monkeypatch.setattr(cls, "requires", ("rnn_equivalence_no_such_module",))
        message = "numpy-split needs the module 'rnn_equivalence_no_such_module'"
    else:
        def start(self):
            raise ImportError("numpy-split's framework failed to import (by the test)")

        monkeypatch.setattr(cls, "start", start)
        message = "numpy-split: numpy-split's framework failed to import (by the test)"
    result = run("numpy-concat", "numpy-split")
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_engine_report_is_the_suites(tmp_path):
    """The engine's report validates against the report's schema, and its rows are those pytest writes for
    test_reference.py's forward tests on the same systems, depth and seed: the same cases, errors, verdicts,
    known-issue cases (onnx.reference ignores gate clipping, in float64 at quick depth) and outcomes."""
    import jsonschema

    names, keys = ("numpy-split", "onnx-reference-gru"), ("cases", "max_error", "worst_ratio", "levels", "verdict",
                                                          "known_issue_cases", "known_issues", "cell", "versions")
    engine = report(names, "quick", 3)
    jsonschema.validate(engine, json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text()))
    code, out = run_pytest(f"--systems={','.join(names)}", "--depth=quick", "--seed=3",
                           f"--equivalence-report={tmp_path}", "tests/equivalence/test_reference.py",
                           "-k", "matches_float64_reference")  # not the activations' own accuracy, another check
    assert code == pytest.ExitCode.OK, out
    suite = json.loads((tmp_path / "equivalence.json").read_text())
    assert suite["outcomes"] == engine["outcomes"] and engine["outcomes"]["xfailed"] > 0, (suite, engine)
    rows = {(r["system"], r["dtype"]): {k: r[k] for k in keys} for r in engine["systems"]}
    assert rows == {(r["system"], r["dtype"]): {k: r[k] for k in keys} for r in suite["systems"]}
    assert {row["verdict"] for row in rows.values()} == {"equivalent", "NOT equivalent where noted below"}
    assert any("ignores clip" in issue for row in rows.values() for issue in row["known_issues"]), rows
