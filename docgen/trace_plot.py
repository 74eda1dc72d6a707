"""Error and bound against the step, for one long sequence in each precision: a reader sees the bound track the error.

    python -m docgen.trace_plot  # torch-lstm-rnn (nn.LSTM), 500 steps -> docs/plots/error-vs-step.svg

One line pair (error, bound) per precision, each run at plot time on its framework (the suite's mapping of a
random case, as every test does; torch imported lazily):

- float32: nn.LSTM against the float32 bound of ``rnn_equivalence.reference.tolerance``;
- float16 and bfloat16: nn.LSTM on the case's data rounded to the format, against the bound of the arithmetic torch
  runs on the CPU (``arithmetic_of``: float32 within each operation, each result stored in half), the reference on
  the same half data;
- int8: ``torch.ao.quantization.quantize_dynamic``'s LSTM (frameworks/torch_quantized.py) against the bound of its
  own grid (``rnn_equivalence.reference.quantized``), the reference on the *float* weights: another function, within
  its grid's bound, not equivalent.

At each step, the worst |computed - float64 reference| over the batch and the hidden units is drawn with the worst
bound at that step (the error model's running bound, the one the tests compare with). Unlike ``docgen.plots`` this
runs a framework: it is a measurement, not a figure of the report. Measured cost (2-core CPU, 500 steps, the four
precisions): some 10 s, most of it the half formats' bounds and torch's import.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import LayerConfig
from rnn_equivalence.frameworks.plan import arithmetic_of
from docgen.plots import OUT, _pyplot

SYSTEM, DTYPE, STEPS = "torch-lstm-rnn", "float32", 500
PRECISIONS = ("float32", "float16", "bfloat16", "int8")  # the plot's lines, each an error and its bound
COLOURS = {"float32": "black", "float16": "tab:blue", "bfloat16": "tab:green", "int8": "tab:red"}


def error_and_bound_by_step(system: str = SYSTEM, dtype: str = DTYPE, steps: int = STEPS, seed: int = 11,
                            mutate=None) -> tuple[np.ndarray, np.ndarray]:
    """Per step: the worst error of ``system``'s output (one layer, one direction, I=5, H=4, batch 3) against
    the float64 reference, and the worst bound.
    ``mutate`` (params -> params): a wrong mapping, to show the error leaving the bound."""
    import rnn_equivalence.frameworks as frameworks
    from rnn_equivalence.harness.cases import case_of

    adapter = frameworks.load(system)
    config = LayerConfig(1, False)  # one layer, one direction: step t of the output is the t-th step computed
    if not adapter.layer:
        raise ValueError(f"{system}: a cell; pick a layer system, whose output holds every step")
    case = case_of(adapter, 5, 4, 3, steps, seed, config)
    params = case.stack(dtype)
    actual = adapter.run(params if mutate is None else mutate(params), case.inputs(dtype), case.state(dtype),
                         case.config)["output"]
    # the reference on the run's own data (a half format's are rounded to it), the bound of the arithmetic the
    # system runs in that dtype (torch's half: float32 within each operation, frameworks/plan.py)
    expected = adapter.arrange(case.reference(dtype), case.config)["output"]
    bound = adapter.arrange(case.bound_vs_reference(arithmetic_of(adapter, dtype)), case.config)["output"]
    return _by_step(system, actual, expected, bound, steps)


def int8_error_and_bound_by_step(system: str = SYSTEM, steps: int = STEPS, seed: int = 11) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """Per step, for ``system``'s layer dynamically quantized by torch.ao (qint8 weights; the LSTM or GRU of
    frameworks/torch_quantized.py): the worst error of its output against the float64 reference on the *float*
    weights, and the worst bound of its grid (``quantized_reference_and_bound`` of the weights the quantized model
    holds, plus the reference's own float64 bound), the case and sizes as ``error_and_bound_by_step``'s."""
    import rnn_equivalence.frameworks as frameworks
    from rnn_equivalence.frameworks.torch_quantized import TorchQuantizedMapping, TorchQuantizedRunner
    from rnn_equivalence.harness.cases import case_of
    from rnn_equivalence.reference.quantized import quantized_reference_and_bound
    from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound

    adapter = frameworks.load(system)
    case = case_of(adapter, 5, 4, 3, steps, seed, LayerConfig(1, False, initial_state=True))
    runner, mapping = TorchQuantizedRunner(adapter), TorchQuantizedMapping(adapter)
    stack = case.stack("float32")
    module, args = runner.quantize(adapter.to_native(stack, case.config), case.inputs("float32"),
                                   case.state("float32"), case.config, stack.activation)
    actual = runner.run(module, args, case.config)["output"]
    _, grid = mapping.from_quantized(runner.unpack(module), case.config)
    exact_stack, xs, state = case.exact_data("float32")
    exact, bound = quantized_reference_and_bound(exact_stack, grid, xs, state)
    bound = pair_bound(bound, reference_and_bound(exact_stack, xs, state, "float64")[1])
    expected = adapter.arrange(exact, case.config)["output"]
    return _by_step(system, actual, expected, adapter.arrange(bound, case.config)["output"], steps)


def _by_step(system, actual, expected, bound, steps):
    actual = np.asarray(actual)
    if actual.shape[0] != steps or actual.shape != expected.shape:
        raise ValueError(f"{system}: output shaped {actual.shape}, expected ({steps}, batch, hidden)")
    error = np.abs(actual.astype(np.float64) - expected)
    return error.reshape(steps, -1).max(axis=1), bound.reshape(steps, -1).max(axis=1)


def by_precision(system: str = SYSTEM, steps: int = STEPS, precisions=PRECISIONS) -> dict:
    """{precision: (error, bound) per step}: ``error_and_bound_by_step`` in each float format (the bound of the
    arithmetic the system runs in it), ``int8_error_and_bound_by_step`` for int8."""
    return {precision: int8_error_and_bound_by_step(system, steps) if precision == "int8"
            else error_and_bound_by_step(system, precision, steps) for precision in precisions}


def _label(adapter, precision: str) -> str:
    if precision == "int8":
        return "int8 (torch.ao quantize_dynamic; its grid's bound)"
    arithmetic = arithmetic_of(adapter, precision)
    return precision + ("" if arithmetic == precision else " (float32 within each op)")


def plot(path: Path, system: str = SYSTEM, steps: int = STEPS, precisions=PRECISIONS) -> Path:
    """The error and the bound against the step, one pair of lines per precision; each line's worst err/bound in
    the legend."""
    import rnn_equivalence.frameworks as frameworks

    adapter = frameworks.load(system)
    traces = by_precision(system, steps, precisions)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    t = np.arange(1, steps + 1)
    for precision, (error, bound) in traces.items():
        colour, label = COLOURS.get(precision, None), _label(adapter, precision)
        ax.plot(t, bound, color=colour, linewidth=1.0, linestyle="--", label=f"{label}: bound")
        ax.plot(t, np.maximum(error, 1e-12), color=colour, linewidth=0.5,
                label=f"{label}: error (worst err/bound {(error / bound).max():.3g})")
    if adapter.family in ("lstm", "gru"):  # |h| < 1 on both sides: a bound beyond 2 says nothing more
        ax.axhline(2.0, color="grey", linewidth=0.6, linestyle=":",
                   label="2: any two outputs (|h| < 1) are within it; a bound above says nothing")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("worst over batch and units")
    versions = ", ".join(f"{k} {v}" for k, v in adapter.versions().items())
    ax.set_title(f"{system} ({versions}), one sequence of {steps} steps: |computed - float64 reference| (solid) "
                 "and its bound (dashed)", fontsize=7)
    ax.legend(fontsize=5.5, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.savefig(path, metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {plot(out / 'error-vs-step.svg')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
