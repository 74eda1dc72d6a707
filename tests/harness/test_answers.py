"""docs/ANSWERS.md is generated from the committed report, never edited: regenerated here and held equal,
so an answer cannot cite a system, figure, date or version the report does not have. And each answer is
built by the rule ``compare`` uses, which these tests hold to its cases (Yes, No, Only if)."""

import json
from pathlib import Path

from frameworks import ADAPTERS
from harness.answers import PAGE, QUESTIONS, REPORT, anchored, page, with_environments
from harness.compare_systems import decide

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_answers_are_the_committed_reports():
    report = json.loads(REPORT.read_text())
    assert PAGE.read_text() == page(report), (
        "docs/ANSWERS.md differs from what the committed report gives; regenerate with: python -m harness.answers")


def test_every_question_is_about_systems_the_report_has():
    """The committed report's, or those of its environments' own reports (``with_environments``)."""
    report = with_environments(json.loads(REPORT.read_text()))
    listed = {row["system"] for row in report["systems"]}
    assert QUESTIONS
    for question in QUESTIONS:
        assert question.pairs, question.anchor
        for a, b in question.pairs:
            assert {a, b} <= listed, (question.anchor, a, b)
            assert ADAPTERS[a].family == ADAPTERS[b].family, (question.anchor, a, b)
    assert len({q.anchor for q in QUESTIONS}) == len(QUESTIONS)
    pairs = anchored(report)
    assert pairs and all(ADAPTERS[a].family == ADAPTERS[b].family for a, b in pairs)


def row(system, dtype="float32", verdict="equivalent", known=()):
    return {"system": system, "dtype": dtype, "verdict": verdict, "known_issue_cases": len(known),
            "known_issues": list(known), "cases": 4, "worst_ratio": 0.1}


def test_the_rule():
    torch_gru, keras_gru, keras_before = (ADAPTERS[n] for n in ("torch-gru", "keras-tf-gru", "keras-tf-gru-reset-before"))
    both = [row("torch-gru"), row("keras-tf-gru")]
    assert decide(torch_gru, keras_gru, both, None)[0] == "Yes"
    assert decide(torch_gru, keras_gru, both, "no slot for b_hn")[0] == "Only if"
    assert decide(torch_gru, keras_before, [row("torch-gru"), row("keras-tf-gru-reset-before")], None)[0] == "No"
    assert decide(torch_gru, keras_gru, [row("torch-gru")], None)[0] == "No"  # one side never ran
    assert decide(torch_gru, keras_gru, [row("torch-gru"), row("keras-tf-gru", verdict="NOT equivalent")],
                  None)[0] == "No"
    ort, openvino = ADAPTERS["onnx-ort"], ADAPTERS["onnx-openvino"]
    verdict, reason = decide(ort, openvino, [row("onnx-ort"), row("onnx-openvino")], None)
    assert verdict == "Only if" and "INFERENCE_PRECISION_HINT=f32" in reason  # OpenVINO's runs_with
    noted = row("keras-tf-gru", "float64", "NOT equivalent where noted below", ("float64 computed in float32",))
    verdict, reason = decide(torch_gru, keras_gru, both + [noted], None)
    assert verdict == "Only if" and "float64 computed in float32" in reason
