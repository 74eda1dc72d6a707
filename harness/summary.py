"""The end-of-run equivalence summary: the table users quote.

Tests attach one record per comparison to their report (``user_properties``),
which pytest-xdist carries from the workers to the controller, so the table
is the same with and without ``-n``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROPERTY = "rnn_equivalence"

# Record kinds:
#   reference  a framework vs the float64 NumPy reference, within the error bound?
#   pair       two frameworks vs each other, within the sum of their bounds?
#   exact      small-integer case: bitwise equal to the reference?
#   mutation   a deliberately wrong mapping: did the comparison catch it?
#   known      a case the adapter knows an upstream bug breaks (a strict xfail)
#   failure    a test of this system failed (an error in the adapter, a bound exceeded, ...)


@dataclass
class Row:
    system: str
    dtype: str
    cell: str = ""
    versions: str = ""
    cases: int = 0
    worst_ratio: float = 0.0
    max_error: float = 0.0
    exact: list = field(default_factory=list)
    mutations_caught: int = 0
    mutations: int = 0
    known_issues: set = field(default_factory=set)  # reasons of strict expected failures seen
    failed_tests: list = field(default_factory=list)  # (test id, last line of its error)

    def add(self, record: dict) -> None:
        self.cell = record.get("cell") or self.cell
        self.versions = record.get("versions") or self.versions
        kind = record["kind"]
        if kind == "failure":
            self.failed_tests.append((record["test"], record["message"]))
        elif kind == "known":  # a strict expected failure: an upstream bug, listed below the table
            self.known_issues.add(record["known_issue"])
        elif kind in ("reference", "pair"):
            self.cases += 1
            self.worst_ratio = max(self.worst_ratio, record["ratio"])
            self.max_error = max(self.max_error, record["max_error"])
        elif kind == "exact":
            self.exact.append(record["equal"])
        elif kind == "mutation":
            self.mutations += 1
            self.mutations_caught += bool(record["detected"])

    @property
    def verdict(self) -> str:
        if self.worst_ratio > 1 or not all(self.exact):
            return "NOT equivalent"
        if self.failed_tests:  # failed without a measured difference: an error, not a finding
            return f"FAILED: {len(self.failed_tests)} test(s)"
        if self.known_issues:
            return "NOT equivalent where noted below"
        if self.mutations_caught < self.mutations:
            return "UNPROVEN: a wrong mapping passed"
        if self.cases == 0:
            return "not compared"
        return "equivalent"


class Summary:
    """A pytest plugin, registered on the controller only: gathers records, prints the table."""

    def __init__(self, report_dir=None, names=()):
        self.report_dir, self.names = report_dir, tuple(names)
        self.systems: dict[tuple[str, str], Row] = {}
        self.pairs: dict[tuple[str, str], Row] = {}
        self.non_equivalences: list[dict] = []
        self.outcomes = dict.fromkeys(OUTCOMES, 0)

    def add(self, record: dict) -> None:
        # One row per system and dtype: float32 and float64 errors differ by 2**29.
        if record["kind"] == "nonequivalence":
            self.non_equivalences.append(record)
        elif record["kind"] == "pair" or record.get("pair"):
            # A failed pair test's record names both systems too (conftest's makereport hook).
            key = (f"{record['system']} vs {record.get('other', '?')}", record["dtype"])
            self.pairs.setdefault(key, Row(*key)).add(record)
        elif record["kind"] == "mutation":  # mutations run in float32 only
            key = (record["system"], "float32")
            self.systems.setdefault(key, Row(*key)).add(record)
        else:
            key = (record["system"], record["dtype"])
            self.systems.setdefault(key, Row(*key)).add(record)

    def add_report(self, report) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                self.add(value)

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or report.failed:
            self.add_report(report)
        self.outcomes[_outcome(report)] += _counts(report)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.systems or self.pairs or self.non_equivalences:
            terminalreporter.section("equivalence summary")
            self.render(terminalreporter.write_line)
        if self.report_dir:
            from harness.report import write

            where = write(self, self.names, self.report_dir)
            terminalreporter.write_line(f"equivalence report: {where / 'EQUIVALENCE.md'}, {where / 'equivalence.json'}")

    def render(self, write_line) -> None:
        if not self.systems and not self.pairs and not self.non_equivalences:
            return
        write_line("Each case compares hidden states h_1..h_T with the float64 NumPy reference;")
        write_line("'worst err/bound' is the largest measured error as a fraction of the bound")
        write_line("derived in harness/tolerance.py (equivalent when <= 1).")
        for row in self.systems.values():  # rows holding only known issues lack these
            twin = next((r for r in self.systems.values() if r.system == row.system and r.cell), row)
            row.cell, row.versions = row.cell or twin.cell, row.versions or twin.versions
        rows = [("system", "version", "cell", "dtype", "cases", "max |err|", "worst err/bound",
                 "bitwise (int case)", "wrong mappings caught", "verdict")]
        for _, row in sorted(self.systems.items()):
            rows.append((
                row.system, row.versions, row.cell, row.dtype, str(row.cases),
                f"{row.max_error:.2e}", f"{row.worst_ratio:.3f}",
                ("yes" if all(row.exact) else "NO") if row.exact else "-",
                f"{row.mutations_caught}/{row.mutations}" if row.mutations else "-",
                row.verdict,
            ))
        _table(rows, write_line)
        if self.pairs:
            write_line("")
            write_line("Framework against framework (bound: the sum of both frameworks' bounds):")
            rows = [("pair", "dtype", "cases", "max |diff|", "worst diff/bound", "verdict")]
            for _, row in sorted(self.pairs.items()):
                rows.append((row.system, row.dtype, str(row.cases),
                             f"{row.max_error:.2e}", f"{row.worst_ratio:.3f}", row.verdict))
            _table(rows, write_line)
        if self.non_equivalences:
            write_line("")
            write_line("Proved non-equivalences (same weights, different functions; the difference is far above the bound):")
            rows = [("system", "against", "max |diff|", "diff/bound", "why")]
            for r in sorted(self.non_equivalences, key=lambda r: (r["system"], r["other"])):
                rows.append((r["system"], r["other"], f"{r['max_error']:.2e}", f"{r['ratio']:.3g}", r["reason"]))
            _table(rows, write_line)
        known = sorted({(row.system, row.dtype, reason) for row in self.systems.values()
                        for reason in row.known_issues})
        if known:
            write_line("")
            write_line("Known upstream issues (strict expected failures, excluded from the worst ratio):")
            for system, dtype, reason in known:
                write_line(f"  {system} {dtype}: {reason}")


OUTCOMES = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")


def _outcome(report) -> str:
    """The same tally as pytest's last line: a failure outside the call phase is an error."""
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.failed:
        return "failed" if report.when == "call" else "errors"
    return "skipped" if report.skipped else "passed"


def _counts(report) -> int:
    # One count per test: its call phase, or the phase that ended it early.
    return int(report.when == "call" or (report.when == "setup" and not report.passed)
               or (report.when == "teardown" and report.failed))


def _table(rows, write_line) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        write_line("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            write_line("  ".join("-" * w for w in widths))
