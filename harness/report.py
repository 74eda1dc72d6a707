"""The equivalence report of a run, as JSON (schema: docs/equivalence-report.schema.json) and Markdown.

Written by ``pytest --equivalence-report=DIR`` from the same records as the
summary table, so the two cannot disagree.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.frameworks.base import distribution_version
from rnn_equivalence.harness.selection import elsewhere
from rnn_equivalence.harness.summary import INT8_NOT_MEASURED, RUN_KINDS, conversions_text, int8_summary, times_text
from rnn_equivalence.reference.formats import dtype_text


def cost_text(cost: dict) -> str:
    """The header's line on what the run cost, and each system's seconds, costliest first."""
    seconds = cost["seconds"]
    peaks = ", ".join(f"{name} {peak['process']:.2f} GiB"
                      for name, peak in cost.get("peak_rss", {}).items())
    ranked = ", ".join(f"{name} {spent:.1f}" for name, spent in sorted(seconds.items(), key=lambda item: -item[1]))
    wall = f"Wall time: {cost['wall_seconds']:.0f} s. " if cost.get("wall_seconds") else ""
    return (f"{wall}Test time: {sum(seconds.values()):.0f} s summed over the processes"
            + (f"; peak RSS: {peaks}" if peaks else "")
            + f". Seconds per system (or test module), costliest first: {ranked}.")

SCHEMA_VERSION = 6  # 2: outcomes, failed_tests; 3: depth, seed, family, known_issue_cases; 4: padded, chunked;
# 5: levels (by activation and options set); 6: gradients, optimizer (and, optional, elsewhere; optional, a system
# row's arithmetic; optional, int8: the int8 dynamically quantized runs, present where the run made int8 records)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(names) -> dict:
    versions = {"numpy": distribution_version("numpy")}
    for name in names:
        for dist in adapter_class(name).distributions:
            versions[dist] = distribution_version(dist)
    return {"python": platform.python_version(), "os": platform.platform(), "cpu": cpu_name(),
            "cores": os.cpu_count(), "keras_backend": os.environ.get("KERAS_BACKEND", ""), "versions": versions}


def anchor(*parts: str) -> str:
    return "-".join(p.replace(" ", "-").replace("/", "-").lower() for p in parts)


def run_command(argv=None) -> str:
    """The pytest command of this run, as it would run unsharded (a shard's ``--shard`` left out)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept = []
    for i, arg in enumerate(argv):
        if arg.startswith("--shard=") or arg == "--shard" or (i and argv[i - 1] == "--shard"):
            continue
        kept.append(arg)
    return "pytest " + " ".join(shlex.quote(a) for a in kept)


def build(summary, names, command: str | None = None, env: dict | None = None) -> dict:
    """The report as JSON; ``command`` and ``env``: the run's own where it ran elsewhere (merged shards)."""
    systems = [{
        "anchor": anchor(row.system, row.dtype), "system": row.system, "dtype": row.dtype, "family": row.family,
        **({"arithmetic": row.arithmetic} if row.arithmetic else {}),
        "cell": row.cell, "versions": row.versions, "cases": row.cases, "max_error": row.max_error,
        "worst_ratio": row.worst_ratio, "known_issue_cases": row.known_cases,
        "known_issue_worst_ratio": row.known_worst_ratio,
        "known_issue_max_error": row.known_max_error if row.known_worst_ratio is not None else None,
        "bitwise_integer_case": None if not row.exact else all(row.exact),
        "mutations_caught": row.mutations_caught, "mutations": row.mutations,
        **{kind: getattr(row, kind).as_dict() for kind in RUN_KINDS},
        "levels": {level: runs.as_dict() for level, runs in sorted(row.levels.items())},
        "known_issues": sorted(row.known_issues), "failed_tests": _failed(row), "verdict": row.verdict,
    } for _, row in sorted(summary.systems.items())]
    pairs = [{"anchor": anchor(row.system, row.dtype), "pair": row.system, "dtype": row.dtype, "cases": row.cases,
              "max_difference": row.max_error, "worst_ratio": row.worst_ratio, "failed_tests": _failed(row),
              "verdict": row.verdict}
             for _, row in sorted(summary.pairs.items())]
    non_equivalences = [{"anchor": anchor("not", r["system"], r["other"]), "system": r["system"],
                         "against": r["other"], "max_difference": r["max_error"], "ratio": r["ratio"],
                         "reason": r["reason"]}
                        for r in sorted(summary.non_equivalences, key=lambda r: (r["system"], r["other"]))]
    return {
        "schema_version": SCHEMA_VERSION,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command or run_command(),
        "depth": summary.depth, "seed": summary.seed,
        "environment": env or environment(names),
        "outcomes": dict(summary.outcomes),
        "conversions": dict(summary.conversions),
        "cost": {"seconds": {name: round(spent, 3) for name, spent in sorted(summary.seconds.items())},
                 "peak_rss": {name: {k: round(v, 3) for k, v in peak.items()}
                              for name, peak in sorted(summary.peak_rss.items())},
                 "conversions": dict(sorted(summary.conversions_by_system.items())),
                 **({"wall_seconds": round(summary.wall_seconds, 1)} if summary.wall_seconds else {})},
        "systems": systems, "pairs": pairs, "non_equivalences": non_equivalences,
        "elsewhere": elsewhere(names),
        # int8: another function, no row of the verdict (``summary.int8_summary``); absent where the run made no
        # int8 record, which the Markdown says ("not measured"), never a pass
        **({"int8": int8_summary(summary.quantized)} if getattr(summary, "quantized", None) else {}),
    }


def _runs(runs: dict) -> str:
    return f"{runs['worst_ratio']:.3f} ({runs['cases']})" if runs["cases"] else "-"


def _failed(row) -> list:
    return [{"test": test, "message": message} for test, message in row.failed_tests]


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        "# Equivalence report", "",
        f"Date: {report['date']}  ",
        f"Reproduce: `{report['command']}` (depth {report['depth']}, seed {report['seed']}: "
        f"`--depth={report['depth']} --seed={report['seed']}`)  ",
        f"Python {env['python']} on {env['os']}, {env['cpu']} ({env['cores']} cores), "
        f"KERAS_BACKEND={env['keras_backend']}", "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items()), "",
        "Tests: " + ", ".join(f"{n} {k}" for k, n in report["outcomes"].items() if n), "",
        *([conversions_text(report["conversions"]), ""] if conversions_text(report.get("conversions", {})) else []),
        *([cost_text(report["cost"]), ""] if report.get("cost", {}).get("seconds") else []),
        *[f"Run in an environment of their own (nox session `{session}`), not here: {', '.join(names)}; their "
          f"report: docs/environments/{session}/EQUIVALENCE.md."
          for session, names in report.get("elsewhere", {}).items()],
        *([""] if report.get("elsewhere") else []),
        "Each case compares hidden states with a float64 NumPy reference; `err/bound` is the largest "
        "error as a fraction of the rounding-error bound of reference/tolerance.py (equivalent when <= 1).", "",
        "Cases an upstream bug breaks are run and measured too (strict expected failures): their count is "
        "`known`, and their worst ratio is shown, marked `*`, where no other case of the row was measured.", "",
        "`padded` and `chunked`: the worst err/bound (and the number of cases) on padded batches of mixed "
        "lengths, and on sequences run in several calls with the state carried; `gradients`: the gradients of "
        "every weight, input and initial state by the framework's own autodiff against the float64 backward pass "
        "(reference/backward.py); `optimizer`: one SGD or Adam step of the framework's optimizer against the "
        "reference step; `-` where the system has none.", "",
        "| system | dtype | family | cell | versions | cases | known | max err | err/bound | padded | chunked "
        "| gradients | optimizer | bitwise (int case) | wrong mappings caught | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in report["systems"]:
        bitwise = "-" if s["bitwise_integer_case"] is None else ("yes" if s["bitwise_integer_case"] else "NO")
        caught = f"{s['mutations_caught']}/{s['mutations']}" if s["mutations"] else "-"
        ratio, error = f"{s['worst_ratio']:.3f}", f"{s['max_error']:.2e}"
        if s["cases"] == 0 and s["known_issue_cases"]:
            ratio = "raises*" if s["known_issue_worst_ratio"] is None else f"{s['known_issue_worst_ratio']:.3g}*"
            error = "-" if s["known_issue_max_error"] is None else f"{s['known_issue_max_error']:.2e}*"
        dtype = dtype_text(s["dtype"], s.get("arithmetic", ""))
        lines.append(f"| <a id=\"{s['anchor']}\"></a>{s['system']} | {dtype} | {s['family']} | {s['cell']} "
                     f"| {s['versions']} | {s['cases']} | {s['known_issue_cases']} | {error} | {ratio} "
                     f"| {' | '.join(_runs(s[kind]) for kind in RUN_KINDS)} | {bitwise} | {caught} | {s['verdict']} |")
    levels = [(s, level, runs) for s in report["systems"] if len(s["levels"]) > 1
              for level, runs in s["levels"].items()]
    if levels:
        lines += ["", "## By activation and options", "",
                  "The reference comparisons of the systems above with more than one activation or options set, "
                  "by activation (reference/params.py: a vanilla cell's g, a gated cell's \"f,g,h\") and options "
                  "set; err/bound (cases).", "", "| system | dtype | activation+options | err/bound (cases) |",
                  "|---|---|---|---|"]
        lines += [f"| {s['system']} | {s['dtype']} | {level} | {_runs(runs)} |" for s, level, runs in levels]
    if report["non_equivalences"]:
        lines += ["", "## Proved non-equivalences", "",
                  "| system | against | max difference | difference/bound | why |",
                  "|---|---|---|---|---|"]
        for n in report["non_equivalences"]:
            lines.append(f"| <a id=\"{n['anchor']}\"></a>{n['system']} | {n['against']} | {n['max_difference']:.2e} "
                         f"| {n['ratio']:.3g} | {n['reason']} |")
    lines += int8_markdown(report.get("int8"))
    failed = [(s.get("system") or s["pair"], f) for s in report["systems"] + report["pairs"] for f in s["failed_tests"]]
    if failed:
        lines += ["", "## Failed tests", ""]
        lines += [f"- {system}: `{f['test']}`: {f['message']}" for system, f in failed]
    known = [(s["system"], s["dtype"], k) for s in report["systems"] for k in s["known_issues"]]
    if known:
        lines += ["", "## Known upstream issues (strict expected failures)", ""]
        lines += [f"- {system} {dtype}: {reason}" for system, dtype, reason in known]
    return "\n".join(lines) + "\n"


def _times(pair) -> str:
    """The float32 bound's verdict on a system's int8 runs: how many times over it, least to most."""
    if not pair:
        return "-"
    low, high = pair
    text = times_text(low) if low == high else f"{times_text(low)} to {times_text(high)}"
    return text if low > 1 else f"{text} (NOT exceeded)"


def _apart(value) -> str:
    return "- (itself)" if value is None else f"{value:.2e}"


def int8_markdown(section: dict | None) -> list[str]:
    """The report's "int8 dynamic quantization" section (``summary.int8_summary``); where the run made no int8
    record, the section says it was not measured."""
    lines = ["", "## int8 dynamic quantization", ""]
    if not section or (not section["systems"] and not section["failed_tests"]):
        return lines + [f"Verdict: {INT8_NOT_MEASURED}. This run made no int8 record (tests/equivalence/"
                        "test_quantized_torch.py, test_quantized_onnx.py, test_quantized_tflite.py not selected, or "
                        "their systems not in it): nothing here is a pass."]
    lines += [
        "A dynamically quantized model computes another function than the float one: no equivalence claim. Each "
        "int8 run is compared with the float64 reference on the *float* weights within the bound its own grid "
        f"implies ({section['bound']}: each weight within half its scale, each operand quantized as the kernel "
        "does, float32 elsewhere): `within its grid's bound` when err/bound <= 1. `float32 bound exceeded`: the "
        "same runs judged by the float32 bound, how many times over it (the grid's bound is needed). A quantizer bug "
        "made on purpose is caught when it exceeds its grid's bound.", "",
        f"Verdict: {section['verdict']}.", "",
        *([f"Expected on this machine (a named test's strict expected failure, satisfied only by an exceeded bound): "
           f"{'; '.join(section['known_causes'])}.", ""] if section.get("known_causes") else []),
        "| system | quantized from | versions | cases | max err | err/bound | float32 bound exceeded (times) "
        "| quantizer bugs caught | batch runs | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in section["systems"]:
        error, ratio = (f"{s['max_error']:.2e}", f"{s['worst_ratio']:.3f}") if s["cases"] else ("-", "-")
        caught = f"{s['bugs_caught']}/{s['bugs']}" if s["bugs"] else "-"
        lines.append(f"| <a id=\"{anchor('int8', s['system'])}\"></a>{s['system']} | {s['cell']} | {s['versions']} "
                     f"| {s['cases']} | {error} | {ratio} | {_times(s['float32_bound_times'])} | {caught} "
                     f"| {s['batches'] or '-'} | {s['verdict']} |")
    if section["cases"]:
        lines += ["", "Each case (err/bound against its grid's bound):", "",
                  "| system | case | max err | err/bound | verdict |", "|---|---|---|---|---|"]
        lines += [f"| {c['system']} | {c['case']} | {c['max_error']:.2e} | {c['ratio']:.3f} | {c['verdict']} |"
                  for c in section["cases"]]
    if section["float32_bound"]:
        lines += ["", "The same int8 runs judged by the float32 bound (reference/tolerance.py) instead:", "",
                  "| system | case | max err | err/float32 bound |", "|---|---|---|---|"]
        lines += [f"| {c['system']} | {c['case']} | {c['max_error']:.2e} | {times_text(c['ratio'])} |"
                  for c in section["float32_bound"]]
    if section["bugs"]:
        lines += ["", "Quantizer bugs made on purpose in the quantized model's stored weights, judged by the bound of "
                  "the scales the model declares:", "",
                  "| system | bug | max err | err/bound | caught |", "|---|---|---|---|---|"]
        lines += [f"| {b['system']} | {b['bug']} | {b['max_error']:.2e} | {b['ratio']:.3g} "
                  f"| {'yes' if b['caught'] else 'NO'} |" for b in section["bugs"]]
    if section["batch_dependence"]:
        lines += ["", "Batch dependence (onnxruntime#10111): one sequence run alone and among others; the "
                  "activations' quantization range is the batch's, so its outputs change with the batch, each run "
                  "judged by its own bound:", "",
                  "| system | case | batch | apart from its run alone | max err | err/bound | verdict |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {b['system']} | {b['case']} | {b['batch']} | {_apart(b['apart'])} | {b['max_error']:.2e} "
                  f"| {b['ratio']:.3f} | {b['verdict']} |" for b in section["batch_dependence"]]
    if section["failed_tests"]:
        lines += ["", "Failed int8 tests:", ""]
        lines += [f"- {f['system'] or '(no system)'}: `{f['test']}`: {f['message']}" for f in section["failed_tests"]]
    return lines


def write(summary, names, directory, command: str | None = None, env: dict | None = None) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    report = build(summary, names, command, env)
    (directory / "equivalence.json").write_text(json.dumps(report, indent=2) + "\n")
    (directory / "EQUIVALENCE.md").write_text(markdown(report))
    return directory

