"""Plots of a report, for the README and docs/ANSWERS.md (matplotlib, written as SVG, from the report's
JSON only: a plot shows nothing the report does not have):

    python -m docgen.plots                     # docs/equivalence.json -> docs/plots/*.svg

- ``verdict-matrix.svg``: systems x capabilities (whole sequences, padded, chunked, gradients, optimizer
  step), each cell coloured by the worst err/bound of that system's rows (the dtypes' worst), on a log
  scale where 1 is the bound; a cell the system does not have is blank, one with known upstream issues
  is marked with a star, one beyond its bound with a cross.
- ``ratios.svg``: per framework, the worst err/bound of each of its systems and dtypes, on a log scale,
  with the bound drawn at 1: how far below the bound typical rounding is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "equivalence.json"
OUT = ROOT / "docs" / "plots"
CAPABILITIES = (("whole", None), ("padded", "padded"), ("chunked", "chunked"), ("gradients", "gradients"),
                ("step", "optimizer"))
FLOOR = 1e-4  # err/bound below this (bitwise and near-bitwise rows) drawn at the floor of the scale


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no screen
    matplotlib.rcParams["svg.hashsalt"] = "rnn-equivalence"  # the same SVG for the same report
    import matplotlib.pyplot as plt

    return plt


def matrix(report: dict) -> tuple[list[str], list[list[float | None]], list[list[str]]]:
    """(systems, worst err/bound per system and capability (None: none), marks ("*" known, "x" beyond))."""
    by_system: dict[str, list[dict]] = {}
    for row in report["systems"]:
        by_system.setdefault(row["system"], []).append(row)
    systems = sorted(by_system)
    values, marks = [], []
    for system in systems:
        rows = by_system[system]
        line, mark = [], []
        for _, key in CAPABILITIES:
            runs = [(r["cases"], r["worst_ratio"]) if key is None else (r[key]["cases"], r[key]["worst_ratio"])
                    for r in rows]
            measured = [ratio for cases, ratio in runs if cases]
            line.append(max(measured) if measured else None)
            known = key is None and any(r["known_issue_cases"] for r in rows)
            mark.append("x" if measured and max(measured) > 1 else "*" if known else "")
        values.append(line)
        marks.append(mark)
    return systems, values, marks


def verdict_matrix(report: dict, path: Path) -> Path:
    import numpy as np

    plt = _pyplot()
    from matplotlib.colors import LogNorm

    systems, values, marks = matrix(report)
    data = np.array([[np.nan if v is None else max(v, FLOOR) for v in line] for line in values], float)
    fig, ax = plt.subplots(figsize=(6.5, 0.2 * len(systems) + 1.6))
    image = ax.imshow(data, aspect="auto", cmap="viridis", norm=LogNorm(vmin=FLOOR, vmax=10))
    ax.set_xticks(range(len(CAPABILITIES)), [name for name, _ in CAPABILITIES])
    ax.set_yticks(range(len(systems)), systems, fontsize=6)
    ax.xaxis.tick_top()
    for i, line in enumerate(marks):
        for j, mark in enumerate(line):
            if mark:
                ax.text(j, i, mark, ha="center", va="center", color="red" if mark == "x" else "white", fontsize=7)
    bar = fig.colorbar(image, ax=ax, fraction=0.04)
    bar.set_label("worst err/bound (1: the bound)")
    ax.set_title(f"{report['depth']} depth, seed {report['seed']}, {report['date'][:10]}; * known upstream issue",
                 fontsize=7, pad=18)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return path


def ratios(report: dict, path: Path) -> Path:
    plt = _pyplot()
    frameworks: dict[str, list[float]] = {}
    for row in report["systems"]:
        if row["cases"]:
            frameworks.setdefault(_framework(row["system"]), []).append(max(row["worst_ratio"], FLOOR))
    names = sorted(frameworks)
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    for k, name in enumerate(names):
        ax.scatter([k] * len(frameworks[name]), frameworks[name], s=8)
    ax.axhline(1.0, color="red", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 2, 2)
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("worst err/bound per system and dtype")
    ax.set_title("whole sequences against the float64 reference; the red line is the bound", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)
    return path


def _framework(system: str) -> str:
    from rnn_equivalence.harness.summary import framework_of

    return framework_of(system)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    report = json.loads(Path(argv[0] if argv else REPORT).read_text())
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.mkdir(parents=True, exist_ok=True)
    for written in (verdict_matrix(report, out / "verdict-matrix.svg"), ratios(report, out / "ratios.svg")):
        print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
