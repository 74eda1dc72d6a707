"""The error-vs-step plot's lines per precision (``docgen.trace_plot``): nn.LSTM in float32, float16 and bfloat16 (the
bound of the arithmetic torch runs in them) and torch.ao's int8 dynamically quantized LSTM (its grid's bound), each
error under its bound at every step of a short sequence; the int8 error beyond the float32 bound (the grid's bound is
needed) and a half error beyond it too."""

import numpy as np
import pytest

STEPS = 30


@pytest.fixture(scope="module")
def traces():
    pytest.importorskip("torch")
    from docgen.trace_plot import PRECISIONS, by_precision

    return by_precision(steps=STEPS, precisions=PRECISIONS)


def test_each_precision_stays_under_its_bound_at_every_step(traces):
    assert set(traces) == {"float32", "float16", "bfloat16", "int8"}
    for precision, (error, bound) in traces.items():
        assert error.shape == bound.shape == (STEPS,) and (bound > 0).all(), precision
        assert (error <= bound).all(), (precision, np.flatnonzero(error > bound))
        assert error.max() > 0, precision  # a run was measured, not a copy of the reference


def test_the_lower_precisions_are_beyond_the_float32_bound(traces):
    _, float32_bound = traces["float32"]
    for precision in ("float16", "bfloat16", "int8"):
        error, _ = traces[precision]
        assert (error > float32_bound).any(), precision


def test_the_plot_is_written(tmp_path, traces, monkeypatch):
    import docgen.trace_plot as trace_plot

    monkeypatch.setattr(trace_plot, "by_precision", lambda system, steps, precisions: traces)
    text = trace_plot.plot(tmp_path / "error-vs-step.svg", steps=STEPS).read_text()
    assert text.startswith("<?xml") and "<svg" in text
    for precision in ("float32", "float16", "bfloat16", "int8"):
        assert precision in text, precision
