"""Error and bound against the step, for one long sequence: a reader sees the bound track the error.

    python -m docgen.trace_plot  # torch-lstm-rnn (nn.LSTM), float32, 500 steps -> docs/plots/error-vs-step.svg

One system runs one long sequence on its framework (the suite's mapping of a random case, as every test
does); at each step, the worst |computed - float64 reference| over the batch and the hidden units is drawn
with the worst bound of ``rnn_equivalence.reference.tolerance`` at that step (the error model's running
bound, the one the tests compare with). Unlike ``docgen.plots`` this runs a framework: it is a
measurement, not a figure of the report.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import LayerConfig
from docgen.plots import OUT, _pyplot

SYSTEM, DTYPE, STEPS = "torch-lstm-rnn", "float32", 500


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
    expected = adapter.arrange(case.reference(), case.config)["output"]
    bound = adapter.arrange(case.bound_vs_reference(dtype), case.config)["output"]
    if actual.shape[0] != steps or actual.shape != expected.shape:
        raise ValueError(f"{system}: output shaped {actual.shape}, expected ({steps}, batch, hidden)")
    error = np.abs(actual.astype(np.float64) - expected)
    return error.reshape(steps, -1).max(axis=1), bound.reshape(steps, -1).max(axis=1)


def plot(path: Path, system: str = SYSTEM, dtype: str = DTYPE, steps: int = STEPS) -> Path:
    import rnn_equivalence.frameworks as frameworks

    error, bound = error_and_bound_by_step(system, dtype, steps)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    t = np.arange(1, steps + 1)
    ax.plot(t, bound, color="red", linewidth=1.0, label="bound (reference/tolerance.py)")
    ax.plot(t, np.maximum(error, 1e-12), color="black", linewidth=0.6, label="|computed - float64 reference|")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("worst over batch and units")
    versions = ", ".join(f"{k} {v}" for k, v in frameworks.load(system).versions().items())
    ax.set_title(f"{system} ({versions}), {dtype}, one sequence of {steps} steps; worst err/bound "
                 f"{(error / bound).max():.3g}", fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
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
