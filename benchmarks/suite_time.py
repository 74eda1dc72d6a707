"""How long the suite takes, whole process, split into framework imports and the rest.

    python benchmarks/suite_time.py --runs 3 --before REV --full --output docs/SUITE_TIME.md

Times, ``--runs`` times each and reporting the median:

- the import of each framework in a fresh Python (what every pytest-xdist worker,
  and every Keras child process, pays once);
- the README's test command, ``pytest -n auto --equivalence-report=DIR``, at the default depth
  from a cold cache (a new, empty user cache directory: ``XDG_CACHE_HOME``, where the converted
  models and JAX's compilations are kept, ``rnn_equivalence.frameworks.conversion_cache``) and warm (the same directory
  again, right after: the second run on the same versions), at the quick depth (cold), and
  (``--full``) once at full depth (cold), and, with ``--before REV``, the
  suite of an earlier commit, interleaved with this tree's (whole
  process: start-up, collection, imports in the workers, tests, the report), in wall
  clock and in CPU seconds of the whole process tree (with 2 cores, wall can fall no
  lower than half the CPU seconds; both drift by up to a third between runs of the same
  tree on this machine, as its speed does);
- the same with only the NumPy reference selected;
- where the test time goes: the tests' own durations (pytest's junit XML), summed over
  the workers and grouped by the system they test, per system at each depth timed (cold and
  warm at default), and by framework stack;
- the peak resident memory of the largest process of a run (a worker: ``ru_maxrss`` of the
  children), per command.

A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rnn_equivalence.frameworks import ADAPTERS  # noqa: E402
from rnn_equivalence.harness.report import cpu_name  # noqa: E402

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
COMMANDS = {  # the README's test command at each depth; the report goes to a temporary directory
    "whole suite": ["pytest", "-n", "auto", "--equivalence-report=REPORT"],
    "whole suite, warm": ["pytest", "-n", "auto", "--equivalence-report=REPORT"],
    "whole suite, quick": ["pytest", "-n", "auto", "--equivalence-report=REPORT", "--depth=quick"],
    "NumPy only": ["pytest", "-n", "auto", "--equivalence-report=REPORT", "--frameworks=numpy-split,numpy-concat"],
}
SHORT = {"default": "whole suite", "warm": "whole suite, warm", "quick": "whole suite, quick", "numpy": "NumPy only"}
# What a tree from before --depth existed can run: its whole suite (cold, then warm: the same command again, on
# the cache the cold run filled) and NumPy alone.
BEFORE_COMMANDS = ("whole suite", "whole suite, warm", "NumPy only")


def timed(args, cwd=ROOT, env=None) -> tuple[float, float, str, float]:
    """Wall seconds, CPU seconds (user + system, the process and all it waited for), stdout, and the peak
    resident memory in GiB of the largest process it waited for (Linux: ``ru_maxrss`` of the children is
    the largest child's; a run's largest is a worker)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # Run through a Python of its own that reports its children's peak: this process's RUSAGE_CHILDREN
    # peak never goes down, so it would repeat the largest run's for every later command.
    result = subprocess.run([sys.executable, "-c", PEAK_WRAPPER, *args], cwd=cwd, capture_output=True, text=True,
                            env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({result.returncode}):\n"
                         f"{result.stdout[-3000:]}{result.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = re.findall(r"^PEAK_RSS_KIB (\d+)$", result.stderr, re.M)
    return elapsed, cpu, result.stdout, int(peak[-1]) / 2**20 if peak else float("nan")


PEAK_WRAPPER = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
                "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
                "sys.exit(code)")


# What a system runs on, by the start of its name (the longest that matches).
FAMILIES = ("numpy", "torch", "torch-onnx-dynamo", "torch-onnx-legacy", "onnx-ort", "onnx-reference", "onnx-openvino",
            "tf-concat", "tf1", "tf-keras", "keras-tf", "keras-jax", "keras-torch", "flax-nnx", "flax-linen", "equinox",
            "tf2onnx-keras2", "tflite-keras2", "tflite-keras-tf")


def family_of(system: str) -> str:
    return max((f for f in FAMILIES if system == f or system.startswith(f + "-")), key=len,
               default="the harness's own tests")


def system_of(test_name: str, names: list[str]) -> str:
    """The adapter a test id is about (its first parameter names it), else ""."""
    params = test_name.partition("[")[2]
    return next((n for n in names if params == n + "]" or params.startswith(n + "-")), "")


def test_time_by_system(junit: Path) -> tuple[float, list[tuple[str, float, int]]]:
    """Total test time (setup, call, teardown; summed over workers), and per system, largest first."""
    names = sorted(ADAPTERS, key=len, reverse=True)  # the longest name that matches
    seconds, counts = collections.Counter(), collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        key = system_of(case.get("name"), names) or case.get("classname").rpartition(".")[2] + " (no system)"
        seconds[key] += float(case.get("time"))
        counts[key] += 1
    return sum(seconds.values()), [(key, t, counts[key]) for key, t in seconds.most_common()]


def models_by_system(report_dir: Path) -> dict[str, int]:
    """The converted models each system needed in a run (its report's ``cost.conversions``): empty for a
    report from before they were counted."""
    path = report_dir / "equivalence.json"
    if not path.exists():
        return {}
    return json.loads(path.read_text()).get("cost", {}).get("conversions", {})


def per_system_table(breakdowns: dict, models: dict) -> list[str]:
    """Each system's test seconds in the last run of every command timed: its cost at each depth, and the
    converted models a converted system needed there (read from the cache or converted: ``models``)."""
    columns = [name for name in ("whole suite, quick", "whole suite", "whole suite, warm", "whole suite, full (once)")
               if name in breakdowns]
    seconds = {name: {key: t for key, t, _ in breakdowns[name][1]} for name in columns}
    keys = sorted({key for name in columns for key in seconds[name]},
                  key=lambda key: -seconds["whole suite"].get(key, 0.0))
    titles = {"whole suite, quick": "quick, cold", "whole suite": "default, cold", "whole suite, warm": "default, warm",
              "whole suite, full (once)": "full, cold"}
    return ["", "## Each system's cost at each depth (test seconds, summed over the workers; the last run of each)", "",
            "A converted system's figure is followed by the converted models it needed (from the conversion cache "
            "or converted: all converted in a cold run, all read back in a warm one).", "",
            "| system (or test module) | " + " | ".join(titles[name] for name in columns) + " |",
            "|---|" + "---|" * len(columns),
            *(f"| {key} | " + " | ".join(f"{seconds[name].get(key, 0.0):.1f}" + (
                f" ({models[name][key]} models)" if models.get(name, {}).get(key) else "") for name in columns) + " |"
              for key in keys),
            "| **all** | " + " | ".join(f"{breakdowns[name][0]:.0f}" for name in columns) + " |"]


def suite_cost(by_system: list[tuple[str, float, int]], provenance: str) -> dict:
    """What the default run's schedule reads (rnn_equivalence.harness.schedule.seconds_at): each system's test
    seconds in the last default run from a cold cache, the run CI makes."""
    return {"cost": {"seconds": {key: round(seconds, 3) for key, seconds, _ in by_system if key in ADAPTERS}},
            "measured": "test seconds per system, summed over the workers, the README's command at default depth "
                        "from a cold cache; " + provenance}


def cases_per_depth() -> list[tuple[str, list[tuple[int, int]]]]:
    """Each main-environment system's whole-sequence cases and (case, dtype) runs at quick, default, full."""
    from rnn_equivalence.harness.cases import cases_for
    from rnn_equivalence.harness.depth import DEPTHS

    rows = []
    for name, cls in ADAPTERS.items():
        if cls.environment:  # run in its own nox session
            continue
        counts = []
        for depth in DEPTHS:
            cases = cases_for(cls, depth)
            counts.append((len(cases), sum(len(case.runs_in(cls.dtypes)) for case in cases)))
        rows.append((name, counts))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output")
    parser.add_argument("--before", metavar="REV", help="also time the suite of this commit (a git worktree), "
                        "its runs interleaved with this tree's, so that both meet the same machine")
    parser.add_argument("--full", action="store_true", help="also time --depth=full, once")
    parser.add_argument("--before-runs", type=int, help="runs of the earlier commit's commands (default: --runs), "
                        "in the first rounds: an old suite may take many times this one's time")
    parser.add_argument("--commands", help="only these of this tree's commands, comma-separated, of "
                        + ", ".join(SHORT) + " (default: all); warm needs default, whose cache it reuses")
    args = parser.parse_args(argv)
    keys = list(SHORT) if not args.commands else [key.strip() for key in args.commands.split(",")]
    if any(key not in SHORT for key in keys) or ("warm" in keys and "default" not in keys):
        parser.error(f"--commands: expected some of {', '.join(SHORT)} (warm with default), got {args.commands!r}")
    trees = [("this tree", ROOT, [name for key, name in SHORT.items() if key in keys])]
    scratch_tree = None
    if args.before:
        scratch_tree = Path(tempfile.mkdtemp(prefix="suite-time-before-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(scratch_tree), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        trees.insert(0, (f"before ({args.before})", scratch_tree, list(BEFORE_COMMANDS)))
    try:
        return measure(args, trees)
    finally:
        if scratch_tree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(scratch_tree)], cwd=ROOT, capture_output=True)


def measure(args, trees) -> int:
    imports = {}
    for name, statement in IMPORTS.items():
        samples = [timed([sys.executable, "-c", statement])[0] for _ in range(args.runs)]
        baseline = [timed([sys.executable, "-c", "pass"])[0] for _ in range(args.runs)]
        imports[name] = statistics.median(samples) - statistics.median(baseline)
        print(f"import {name}: {imports[name]:.2f} s", flush=True)
    suites, breakdowns, models = collections.defaultdict(list), {}, {}
    plan = [(tree, path, name) for tree, path, names in trees for name in names]
    if args.full:
        COMMANDS["whole suite, full (once)"] = COMMANDS["whole suite"] + ["--depth=full"]
    for run in range(args.runs):  # round-robin: every command meets the machine as it is now
        caches = {}  # per tree, this round's cache directory: new for a cold run, kept for the warm one after it
        before_runs = args.runs if args.before_runs is None else args.before_runs
        for tree, path, name in [step for step in plan if step[0] == "this tree" or run < before_runs] + (
                [("this tree", ROOT, "whole suite, full (once)")] if args.full and run == 0 else []):
            if name != "whole suite, warm":
                caches[tree] = tempfile.mkdtemp(prefix="suite-time-cache-")
            env = {**os.environ, "XDG_CACHE_HOME": caches[tree]}
            with tempfile.TemporaryDirectory() as scratch:
                junit = Path(scratch) / "junit.xml"
                argv = [a.replace("REPORT", str(Path(scratch) / "report")) for a in COMMANDS[name]]
                elapsed, cpu, out, peak = timed([sys.executable, "-m", *argv, "-p", "no:cacheprovider",
                                                 f"--junitxml={junit}"], cwd=path, env=env)
                if tree == "this tree" and name != "NumPy only":
                    breakdowns[name] = test_time_by_system(junit)  # the last run's
                    models[name] = models_by_system(Path(scratch) / "report")
            tail = [line for line in out.splitlines() if re.search(r"\d+ passed", line)][-1].strip("= ")
            suites[(tree, name)].append((elapsed, cpu, tail, peak))
            print(f"{tree}, {name}: {elapsed:.1f} s wall, {cpu:.1f} s CPU, peak {peak:.2f} GiB ({tail})", flush=True)
    if args.output:
        lines = [
            "# How long the suite takes", "",
            f"{datetime.date.today()}. Machine: {cpu_name()}, {os.cpu_count()} cores, {platform.platform()}, "
            f"Python {platform.python_version()}. "
            f"Command: `python benchmarks/suite_time.py --runs {args.runs}"
            f"{f' --before {args.before}' if args.before else ''}"
            f"{f' --before-runs {args.before_runs}' if args.before_runs is not None else ''}"
            f"{' --full' if args.full else ''}"
            f"{f' --commands {args.commands}' if args.commands else ''} "
            f"--output {args.output}`.", "",
            "## Framework imports (median of fresh processes, minus Python's own start-up)", "",
            "Paid once per process that needs the framework: each of the `-n auto` workers, "
            "and each worker's Keras child process per other backend.", "",
            "| import | seconds |", "|---|---|",
            *(f"| {name} | {seconds:.2f} |" for name, seconds in imports.items()), "",
            "## The suite, whole process", "",
            f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r} here: when set, as on "
            "this machine, pytest re-does its assertion rewriting of the plugins' modules (Hypothesis, "
            "xdist) and of the tests in every process, about 1.5 s per worker.", "",
            "Runs interleaved: each round runs every command of every tree once, in turn.", "",
            "Cold: a new, empty cache directory (`XDG_CACHE_HOME`: the converted models, JAX's compilations); "
            "warm: the same directory again, right after the cold run of its round.", "",
            "| tree | command | wall, runs (s) | wall, median (s) | CPU, median (s) | peak RSS of a process, max (GiB) "
            "| tests |",
            "|---|---|---|---|---|---|---|",
        ]
        for (tree, name), runs in suites.items():
            command = " ".join(COMMANDS[name]).replace("REPORT", "DIR")
            lines.append(f"| {tree} | {name}: `{command}` | {', '.join(f'{e:.1f}' for e, _, _, _ in runs)} "
                         f"| {statistics.median(e for e, _, _, _ in runs):.1f} "
                         f"| {statistics.median(c for _, c, _, _ in runs):.1f} | {max(p for *_, p in runs):.2f} "
                         f"| {runs[-1][2]} |")
        lines += per_system_table(breakdowns, models)
        total, by_system = breakdowns["whole suite"]
        lines += [
            "", "## Where the test time goes (this tree's last whole-suite run, default depth)", "",
            f"Each test's setup, call and teardown, summed over the workers: {total:.0f} s in all. "
            "A system's first test also pays its framework's import, or its Keras child's start.", "",
            "| system (or test module) | tests | seconds | share |", "|---|---|---|---|",
            *(f"| {key} | {count} | {seconds:.1f} | {seconds / total:.0%} |" for key, seconds, count in by_system),
        ]
        lines += ["", "## Cases per system at each depth", "",
                  "The whole-sequence design of each system in this run's environment "
                  "(`rnn_equivalence.harness.cases.cases_for`): its "
                  "cases, and the runs they make (a case runs in every dtype at full depth, in its own at quick and "
                  "default). Padded, chunked, gradient, option and mutation cases follow the same depth "
                  "(`rnn_equivalence.harness.cases`), and the tests above count every one of them.", "",
                  "| system | quick: cases (runs) | default: cases (runs) | full: cases (runs) |", "|---|---|---|---|",
                  *(f"| {name} | " + " | ".join(f"{cases} ({runs})" for cases, runs in row) + " |"
                    for name, row in cases_per_depth())]
        families = collections.Counter()
        for key, seconds, _ in by_system:
            families[family_of(key)] += seconds
        lines += ["", "The same by framework stack (all cells and layers of it):", "",
                  "| systems named | seconds | share |", "|---|---|---|",
                  *(f"| {family}{'*' if family in FAMILIES else ''} | {seconds:.1f} | {seconds / total:.0%} |"
                    for family, seconds in families.most_common())]
        Path(args.output).write_text("\n".join(lines) + "\n")
        print(f"wrote {args.output}")
        costs = Path(args.output).parent / "suite_cost.json"
        costs.write_text(json.dumps(suite_cost(by_system, lines[2]), indent=1, sort_keys=True) + "\n")
        print(f"wrote {costs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
