"""The plots show the report's figures: the verdict matrix's cells are the worst err/bound of each system's
rows per capability (None where the system has none), marked where a known issue was met or the bound
exceeded; both plots are written from the committed report (matplotlib: the extra ``plots``, in ``all``)."""

import json

from docgen.plots import CAPABILITIES, REPORT, main, matrix


def test_the_matrix_is_the_reports():
    report = json.loads(REPORT.read_text())
    systems, values, marks = matrix(report)
    assert systems == sorted({row["system"] for row in report["systems"]})
    assert len(values) == len(systems) and all(len(line) == len(CAPABILITIES) for line in values)
    rows = {(r["system"], r["dtype"]): r for r in report["systems"]}
    checked = 0
    for system, line, mark in zip(systems, values, marks):
        mine = [r for (s, _), r in rows.items() if s == system]
        measured = [r["worst_ratio"] for r in mine if r["cases"]]
        assert line[0] == (max(measured) if measured else None), system
        gradients = [r["gradients"]["worst_ratio"] for r in mine if r["gradients"]["cases"]]
        assert line[3] == (max(gradients) if gradients else None), system
        assert (mark[0] == "*") == (any(r["known_issue_cases"] for r in mine) and max(measured, default=0) <= 1)
        checked += 1
    assert checked > 0


def test_the_plots_are_written(tmp_path):
    assert main([str(REPORT), str(tmp_path)]) == 0
    for name in ("verdict-matrix.svg", "ratios.svg"):
        text = (tmp_path / name).read_text()
        assert text.startswith("<?xml") and "<svg" in text


def test_the_error_stays_under_the_bound_at_every_step_and_a_wrong_mapping_leaves_it():
    """The error-vs-step plot's figures (``docgen.trace_plot``, nn.LSTM in float32): under the bound at
    every step of a 60-step sequence; with the input bias doubled (a wrong mapping), above it."""
    import numpy as np

    from docgen.trace_plot import error_and_bound_by_step

    error, bound = error_and_bound_by_step(steps=60)
    assert error.shape == bound.shape == (60,) and (bound > 0).all()
    assert (error <= bound).all(), np.flatnonzero(error > bound)
    wrong, _ = error_and_bound_by_step(steps=60, mutate=lambda stack: stack.map(lambda p: p.replace(b_x=2 * p.b_x)))
    assert (wrong > bound).any()
