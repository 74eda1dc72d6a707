"""How long the suite takes, whole process, split into framework imports and the rest.

    python benchmarks/suite_time.py --runs 3 --output docs/SUITE_TIME.md

Times, ``--runs`` times each and reporting the median:

- the import of each framework in a fresh Python (what every pytest-xdist worker,
  and every Keras child process, pays once);
- the README's test command, ``pytest -n auto`` (whole process: start-up,
  collection, imports in the workers, tests, the report);
- the same with only the NumPy reference selected.

A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.report import cpu_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = {
    "numpy": "import numpy",
    "torch": "import torch",
    "tensorflow + tf_keras": "import tensorflow, tf_keras",
    "keras, tensorflow backend (imports tensorflow)": "import keras",
    "jax + flax": "import jax, flax.linen, flax.nnx",
    "onnx + onnxruntime + onnxscript": "import onnx, onnxruntime, onnxscript",
    "all of them, in one process (what each worker pays)":
        "import numpy, torch, tensorflow, tf_keras, keras, jax, flax.linen, flax.nnx, onnx, onnxruntime, onnxscript",
}
COMMANDS = {
    "whole suite": ["pytest", "-n", "auto"],
    "NumPy only": ["pytest", "-n", "auto", "--frameworks=numpy-split,numpy-concat"],
}


def timed(args, env=None) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return elapsed, result.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output")
    args = parser.parse_args(argv)

    imports = {}
    for name, statement in IMPORTS.items():
        samples = [timed([sys.executable, "-c", statement])[0] for _ in range(args.runs)]
        baseline = [timed([sys.executable, "-c", "pass"])[0] for _ in range(args.runs)]
        imports[name] = statistics.median(samples) - statistics.median(baseline)
        print(f"import {name}: {imports[name]:.2f} s", flush=True)
    suites = {}
    for name, command in COMMANDS.items():
        runs = []
        for _ in range(args.runs):
            elapsed, out = timed([sys.executable, "-m", *command, "-p", "no:cacheprovider"])
            tail = [line for line in out.splitlines() if re.search(r"\d+ passed", line)][-1].strip("= ")
            runs.append((elapsed, tail))
            print(f"{name}: {elapsed:.1f} s ({tail})", flush=True)
        suites[name] = runs
    if args.output:
        lines = [
            "# How long the suite takes", "",
            f"Machine: {cpu_name()}, {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}. "
            f"Command: `python benchmarks/suite_time.py --runs {args.runs} --output {args.output}`.", "",
            "## Framework imports (median of fresh processes, minus Python's own start-up)", "",
            "Paid once per process that needs the framework: each of the `-n auto` workers, "
            "and each worker's Keras child process per other backend.", "",
            "| import | seconds |", "|---|---|",
            *(f"| {name} | {seconds:.2f} |" for name, seconds in imports.items()), "",
            "## The suite, whole process (wall clock)", "",
            "| command | runs (s) | median (s) | tests |", "|---|---|---|---|",
        ]
        for name, runs in suites.items():
            command = " ".join(COMMANDS[name])
            lines.append(f"| {name}: `{command}` | {', '.join(f'{e:.1f}' for e, _ in runs)} "
                         f"| {statistics.median(e for e, _ in runs):.1f} | {runs[-1][1]} |")
        Path(args.output).write_text("\n".join(lines) + "\n")
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
