"""The report's "int8 dynamic quantization" section (issue 37, lower precision), from small synthetic record sets as the
int8 tests make them (tests/equivalence/test_quantized_*.py, dtype "qint8"): each case's err/bound against its grid's
bound, the float32 bound's verdict on the same runs, the quantizer bugs caught, ONNX Runtime's batch dependence; and
a run without int8 records, or with int8 records but no case within its bound, never shown as passing."""

import json
from types import SimpleNamespace

from rnn_equivalence.harness import records as records_module
from rnn_equivalence.harness.report import build, markdown, write
from rnn_equivalence.harness.summary import PROPERTY, Summary, int8_line, int8_summary

ENV = {"python": "3.11", "os": "Linux", "cpu": "cpu", "cores": 2, "keras_backend": "tensorflow",
       "versions": {"numpy": "2.4"}}
TORCH = {"system": "torch-lstm-rnn", "cell": "torch.nn.LSTM", "versions": "torch 2.13.0", "family": "lstm",
         "dtype": "qint8"}
ORT = {"system": "onnx-ort-lstm", "cell": "ONNX LSTM operator", "versions": "onnxruntime 1.32.0", "family": "lstm",
       "dtype": "qint8"}


def int8_records():
    """What a run of the int8 tests records, with figures no real run has (so that each must come from here)."""
    return [
        {**TORCH, "kind": "quantized", "case": "lstm L1-uni-h0 T=5", "ratio": 0.1234, "max_error": 2.5e-3},
        {**TORCH, "kind": "quantized", "case": "lstm L2-bi-noh0 T=5", "ratio": 0.4321, "max_error": 4.75e-3},
        {**TORCH, "kind": "float32_bound", "case": "lstm L1-uni-h0 T=5", "ratio": 1234.0, "max_error": 2.5e-3},
        {**TORCH, "kind": "mutation", "mutation": "int8: gate 2 of weight_ih_l0 dequantized with twice its scale",
         "detected": True, "by": "values", "ratio": 7.77, "max_error": 0.17},
        {**TORCH, "kind": "mutation", "mutation": "int8: gates 0 and 1 of weight_hh_l0 exchanged", "detected": True,
         "by": "values", "ratio": 2.22, "max_error": 0.03},
        {**ORT, "kind": "quantized", "case": "lstm I=7 H=5 batch=3", "ratio": 0.2468, "max_error": 1.25e-3},
        {**ORT, "kind": "float32_bound", "case": "lstm I=7 H=5 batch=3", "ratio": 987.0, "max_error": 1.25e-3},
        {**ORT, "kind": "batch", "case": "batch=1, element 0 alone", "batch": 1, "wide": False, "apart": None,
         "ratio": 0.1731, "max_error": 1.5e-3},
        {**ORT, "kind": "batch", "case": "batch=8, element 0 among them", "batch": 8, "wide": True,
         "apart": 1.48e-2, "ratio": 0.2382, "max_error": 1.53e-2},
    ]


def float_records():
    return [{"kind": "reference", "system": "numpy-split", "cell": "numpy", "versions": "numpy 2.4", "family": "lstm",
             "dtype": "float32", "ratio": 0.1, "max_error": 1e-7}]


def report_of(records):
    summary = Summary()
    for record in records:
        summary.add(record)
    report = build(summary, (), command="pytest synthetic", env=ENV)
    return report, markdown(report)


def int8_part(page: str) -> str:
    """The Markdown from the int8 section's title to the next section (or the end)."""
    start = page.index("## int8 dynamic quantization")
    end = page.find("\n## ", start + 1)
    return page[start:] if end < 0 else page[start:end]


def test_the_report_renders_int8_records():
    report, page = report_of(float_records() + int8_records())
    # no row of the verdict: the float rows alone
    assert [(s["system"], s["dtype"]) for s in report["systems"]] == [("numpy-split", "float32")]
    section = report["int8"]
    assert section["verdict"] == "within its grid's bound"
    by_system = {s["system"]: s for s in section["systems"]}
    assert set(by_system) == {"torch-lstm-rnn", "onnx-ort-lstm"}
    torch = by_system["torch-lstm-rnn"]
    assert (torch["cases"], torch["worst_ratio"], torch["max_error"]) == (2, 0.4321, 4.75e-3)
    assert torch["float32_bound_times"] == [1234.0, 1234.0] and (torch["bugs_caught"], torch["bugs"]) == (2, 2)
    assert by_system["onnx-ort-lstm"]["batches"] == 2
    assert json.loads(json.dumps(report)) == report  # JSON as it is written

    text = int8_part(page)
    rows = {line.split(" | ")[0].split("</a>")[-1]: line for line in text.splitlines()
            if line.startswith("| <a id=\"int8-")}
    assert set(rows) == {"torch-lstm-rnn", "onnx-ort-lstm"}
    assert "| 2 | 4.75e-03 | 0.432 | 1234 | 2/2 | - | within its grid's bound |" in rows["torch-lstm-rnn"]
    assert "| 1 | 1.25e-03 | 0.247 | 987 | - | 2 | within its grid's bound |" in rows["onnx-ort-lstm"]
    assert "Verdict: within its grid's bound." in text
    for line in ("| torch-lstm-rnn | lstm L2-bi-noh0 T=5 | 4.75e-03 | 0.432 | within its grid's bound |",
                 "| torch-lstm-rnn | lstm L1-uni-h0 T=5 | 2.50e-03 | 1234 |",
                 "| torch-lstm-rnn | gates 0 and 1 of weight_hh_l0 exchanged | 3.00e-02 | 2.22 | yes |",
                 "| onnx-ort-lstm | batch=1, element 0 alone | 1 | - (itself) | 1.50e-03 | 0.173 |",
                 "| onnx-ort-lstm | batch=8, element 0 among them | 8 | 1.48e-02 | 1.53e-02 | 0.238 |"):
        assert line in text, line
    assert " equivalent |" not in text  # another function: within its grid's bound, never "equivalent"
    assert "0.432" in int8_line(section) and "1234" in int8_line(section) and "2/2" in int8_line(section)


def test_a_run_without_int8_records_says_not_measured():
    report, page = report_of(float_records())
    assert "int8" not in report  # the JSON has no int8 key; the Markdown says why
    text = int8_part(page)
    assert "Verdict: not measured." in text and "nothing here is a pass" in text
    assert "within its grid's bound" not in text
    assert "int8 dynamic quantization" in markdown({**report, "int8": None})  # a key present but empty: the same
    assert "Verdict: not measured." in int8_part(markdown({**report, "int8": int8_summary([])}))


def test_int8_records_without_a_case_within_its_bound_are_not_a_pass():
    """Only quantizer bugs (the cases' tests deselected, or failed before recording): not measured."""
    bugs = [r for r in int8_records() if r["kind"] == "mutation"]
    report, page = report_of(bugs)
    assert report["int8"]["verdict"] == "not measured"
    assert report["int8"]["systems"][0]["verdict"] == "not measured"
    text = int8_part(page)
    assert "Verdict: not measured." in text and "within its grid's bound |" not in text


def test_int8_verdicts_that_are_not_a_pass():
    beyond = [*int8_records(), {**TORCH, "kind": "quantized", "case": "wide", "ratio": 1.5, "max_error": 0.1}]
    assert report_of(beyond)[0]["int8"]["verdict"] == "BEYOND its grid's bound"
    passed = [{**r, "detected": False} if r["kind"] == "mutation" else r for r in int8_records()]
    report, page = report_of(passed)
    assert report["int8"]["verdict"].startswith("UNPROVEN") and "| NO |" in int8_part(page)
    failure = {"kind": "failure", "system": "", "pair": False, "family": "", "dtype": "qint8",
               "test": "tests/equivalence/test_quantized_tflite.py::test_small_weights_stay_float",
               "message": "AssertionError: boom"}
    report, page = report_of([*int8_records(), failure])
    assert report["int8"]["verdict"] == "FAILED: 1 test(s)" and not report["systems"]
    text = int8_part(page)
    assert "Verdict: FAILED: 1 test(s)." in text and "test_small_weights_stay_float`: AssertionError: boom" in text
    # a failure alone still makes the section (not "not measured" with the failure out of sight)
    assert "Verdict: FAILED: 1 test(s)." in int8_part(report_of([failure])[1])


def test_a_failing_int8_test_is_an_int8_failure_not_a_float32_one():
    """harness/records.py: a failed test of a module whose ``RECORD_DTYPE`` is "qint8" records its failure as
    qint8 (the report's int8 section), with its system or, where the test loads its systems itself, none."""
    def failed_report(params, module):
        item = SimpleNamespace(callspec=SimpleNamespace(params=params), module=module, nodeid="tests/x.py::test_y",
                               get_closest_marker=lambda name: None)
        report = SimpleNamespace(failed=True, longrepr=SimpleNamespace(reprcrash=SimpleNamespace(message="boom")),
                                 longreprtext="boom", user_properties=[], duration=0.5)
        hook = records_module.pytest_runtest_makereport(item, None)
        next(hook)
        try:
            hook.send(report)
        except StopIteration:
            pass
        return [value for name, value in report.user_properties if name == PROPERTY]

    int8 = SimpleNamespace(__name__="tests.x", RECORD_DTYPE="qint8")
    plain = SimpleNamespace(__name__="tests.x")
    [failure] = failed_report({"system": "torch-lstm-rnn"}, int8)
    assert (failure["kind"], failure["system"], failure["dtype"]) == ("failure", "torch-lstm-rnn", "qint8")
    [failure] = failed_report({"case": ("tflite-keras2-lstm-rnn", 0, False)}, int8)
    assert (failure["system"], failure["dtype"]) == ("", "qint8")
    [failure] = failed_report({"system": "torch-lstm-rnn"}, plain)
    assert failure["dtype"] == "float32"
    assert failed_report({}, plain) == []  # a harness test without a system: no record, as before


def test_the_written_report_has_the_int8_section(tmp_path):
    summary = Summary()
    for record in float_records() + int8_records():
        summary.add(record)
    write(summary, (), tmp_path, command="pytest synthetic", env=ENV)
    assert json.loads((tmp_path / "equivalence.json").read_text())["int8"]["verdict"] == "within its grid's bound"
    assert "## int8 dynamic quantization" in (tmp_path / "EQUIVALENCE.md").read_text()


def test_a_cause_expected_on_this_machine_is_said_beside_a_verdict_it_does_not_turn():
    """A named test's strict expected failure (ONNX Runtime's saturating kernel on a CPU without VNNI) marks its
    records with the reason: the section says it once, and the verdict stays what the figures give."""
    reason = "this CPU's kernel does something made up for this test"
    records = [{**r, "known_issue": reason, "ratio": 4.31} if r["system"] == ORT["system"] and r["kind"] == "quantized"
               else r for r in int8_records()]
    section = int8_summary(records)
    assert section["known_causes"] == [reason]
    assert section["verdict"] == "BEYOND its grid's bound"  # not turned by the expectation
    report, page = report_of(records + float_records())
    assert report["int8"]["known_causes"] == [reason]
    assert f"Expected on this machine (a named test's strict expected failure, satisfied only by an exceeded bound): " \
           f"{reason}." in int8_part(page)
    assert reason in int8_line(section)
    assert "known_causes" in int8_summary(int8_records()) and int8_summary(int8_records())["known_causes"] == []
    assert "Expected on this machine" not in int8_part(report_of(int8_records() + float_records())[1])


def test_a_conditional_expected_failure_whose_condition_is_false_expects_nothing():
    """On a CPU with VNNI, test_quantized_onnx's ``xfail(SATURATES, ...)`` has a false condition: its records must
    not say that a saturating kernel is expected there (red: with the marker taken whatever its condition)."""
    import pytest

    def node(marker):
        return SimpleNamespace(get_closest_marker=lambda name: marker.mark if marker is not None else None)

    assert records_module.expected_failure(node(pytest.mark.xfail(False, reason="saturates"))) is None
    assert records_module.expected_failure(node(pytest.mark.xfail(condition=False, reason="saturates"))) is None
    assert records_module.expected_failure(node(pytest.mark.xfail(True, reason="saturates"))).kwargs["reason"] == \
        "saturates"
    assert records_module.expected_failure(node(pytest.mark.xfail(strict=True, reason="a bug"))) is not None
    assert records_module.expected_failure(node(None)) is None


def test_a_table_rows_expected_failure_is_told_from_a_named_tests_own():
    """A known-issues row marks its tests ``known_issue`` too: their records are the table's ("known"); a named test's
    own xfail (test_quantized_onnx's saturating CPU) gives its reason to its records (red: with the two confused)."""
    import pytest

    def node(*marks):
        found = {m.mark.name: m.mark for m in marks}
        return SimpleNamespace(get_closest_marker=lambda name: found.get(name))

    row = pytest.mark.xfail(True, strict=True, reason="an upstream bug")
    assert records_module.expectation(node(row, pytest.mark.known_issue("row"))) == (True, None)
    assert records_module.expectation(node(pytest.mark.xfail(True, reason="saturates"))) == (False, "saturates")
    assert records_module.expectation(node(pytest.mark.xfail(False, reason="saturates"))) == (False, None)
    assert records_module.expectation(node()) == (False, None)
