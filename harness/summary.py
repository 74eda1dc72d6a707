"""The end-of-run equivalence summary: the table users quote.

Tests attach one record per comparison to their report (``user_properties``),
which pytest-xdist carries from the workers to the controller, so the table
is the same with and without ``-n``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rnn_equivalence.reference.formats import dtype_text

PROPERTY = "rnn_equivalence"
# A report's count of converted models read from the conversion cache or converted in its phase
# (rnn_equivalence.frameworks.conversion_cache, attached by rnn_equivalence.harness.records):
# {"from_cache": n, "converted": n, "rejected": n}.
CONVERSIONS = "rnn_equivalence_conversions"
# A report's count of references and bounds read from the reference cache or computed in its phase
# (rnn_equivalence.harness.reference_cache, attached by rnn_equivalence.harness.records): the same keys, "computed".
REFERENCES = "rnn_equivalence_references"
# What a test phase cost: {"system": name or the test module, "seconds": its duration}
# (rnn_equivalence.harness.records).
COST = "rnn_equivalence_cost"

# Record kinds:
#   reference  a framework vs the float64 NumPy reference, within the error bound?
#   padded     the same on a padded batch of mixed lengths (rnn_equivalence.reference.padding)
#   chunked    a sequence run in several calls, state carried, vs the whole run's reference
#   gradients  the framework's autodiff vs the float64 backward pass (rnn_equivalence.reference.backward)
#   optimizer  one step of the framework's optimizer vs the reference step (rnn_equivalence.reference.optimizers)
#   pair       two frameworks vs each other, within the sum of their bounds?
#   exact      small-integer case: bitwise equal to the reference?
#   mutation   a deliberately wrong mapping: did the comparison catch it?
#   known      a case the adapter knows an upstream bug breaks (a strict xfail)
#   failure    a test of this system failed (an error in the adapter, a bound exceeded, ...)
# and, with dtype "qint8" (an int8 dynamically quantized model: another function, judged by the bound of its own
# grid, rnn_equivalence.reference.quantized; no row of the verdict, the report's int8 section: ``int8_summary``):
#   quantized      the int8 run vs the float64 reference on the float weights, within its grid's bound?
#   float32_bound  the same run judged by the float32 bound instead: how many times over it (the grid's bound is needed)
#   mutation       a quantizer bug made on purpose (a doubled scale, exchanged gates): beyond the grid's bound?
#   batch          onnxruntime#10111: one sequence run alone and among others, each within its own bound; ``apart``:
#                  its outputs' largest difference from its run alone
#   failure        a test of a module whose records are int8 (its ``RECORD_DTYPE``) failed


@dataclass
class Runs:
    """The comparisons of one kind of run (padded batches, chunked runs) of a system."""

    cases: int = 0
    worst_ratio: float = 0.0
    max_error: float = 0.0

    def add(self, record: dict) -> None:
        self.cases += 1
        self.worst_ratio = max(self.worst_ratio, record["ratio"])
        self.max_error = max(self.max_error, record["max_error"])

    @property
    def text(self) -> str:
        return f"{self.worst_ratio:.3f}" if self.cases else "-"

    def as_dict(self) -> dict:
        return {"cases": self.cases, "max_error": self.max_error, "worst_ratio": self.worst_ratio}


RUN_KINDS = ("padded", "chunked", "gradients", "optimizer")


@dataclass
class Row:
    system: str
    dtype: str
    arithmetic: str = ""  # where the bound models another arithmetic than the dtype's (frameworks/plan.py)
    cell: str = ""
    versions: str = ""
    family: str = ""  # "rnn", "lstm", "gru (reset_after)": the table's groups
    cases: int = 0
    worst_ratio: float = 0.0
    max_error: float = 0.0
    exact: list = field(default_factory=list)
    mutations_caught: int = 0
    mutations: int = 0
    known_issues: set = field(default_factory=set)  # reasons of strict expected failures seen
    known_cases: int = 0  # cases an upstream bug breaks: run, measured, kept out of worst_ratio
    known_worst_ratio: float | None = None  # their worst measured ratio (None: they raise instead)
    known_max_error: float = 0.0
    failed_tests: list = field(default_factory=list)  # (test id, last line of its error)
    padded: Runs = field(default_factory=Runs)
    chunked: Runs = field(default_factory=Runs)
    gradients: Runs = field(default_factory=Runs)
    optimizer: Runs = field(default_factory=Runs)
    # The reference comparisons by activation and options set ("default+peepholes"): the figures one
    # cites for an option.
    levels: dict = field(default_factory=dict)

    def add(self, record: dict) -> None:
        self.cell = record.get("cell") or self.cell
        self.versions = record.get("versions") or self.versions
        self.family = record.get("family") or self.family
        self.arithmetic = record.get("arithmetic") or self.arithmetic
        kind = record["kind"]
        if kind == "failure":
            self.failed_tests.append((record["test"], record["message"]))
        elif kind == "known":  # a strict expected failure: an upstream bug, listed below the table
            self.known_issues.add(record["known_issue"])
            self.known_cases += 1
        elif kind in ("reference", "pair", *RUN_KINDS) and record.get("known"):
            self.known_worst_ratio = max(self.known_worst_ratio or 0.0, record["ratio"])
            self.known_max_error = max(self.known_max_error, record["max_error"])
        elif kind in ("reference", "pair"):
            if "level" in record:
                self.levels.setdefault(record["level"], Runs()).add(record)
            self.cases += 1
            self.worst_ratio = max(self.worst_ratio, record["ratio"])
            self.max_error = max(self.max_error, record["max_error"])
        elif kind in RUN_KINDS:
            getattr(self, kind).add(record)
        elif kind == "exact":
            self.exact.append(record["equal"])
        elif kind == "mutation":
            self.mutations += 1
            self.mutations_caught += bool(record["detected"])

    @property
    def verdict(self) -> str:
        if max(self.worst_ratio, *(getattr(self, kind).worst_ratio for kind in RUN_KINDS)) > 1 or not all(self.exact):
            return "NOT equivalent"
        if self.failed_tests:  # failed without a measured difference: an error, not a finding
            return f"FAILED: {len(self.failed_tests)} test(s)"
        if self.known_issues:
            return "NOT equivalent where noted below"
        if self.mutations_caught < self.mutations:
            return "UNPROVEN: a wrong mapping passed"
        if self.cases + sum(getattr(self, kind).cases for kind in RUN_KINDS) == 0:
            return "not compared"
        return "equivalent"

    @property
    def error_text(self) -> str:
        """The largest error; where only an upstream bug's cases were measured, theirs, marked '*'."""
        if self.cases == 0 and self.known_cases:
            return "-" if self.known_worst_ratio is None else f"{self.known_max_error:.2e}*"
        return f"{self.max_error:.2e}"

    @property
    def ratio_text(self) -> str:
        """The worst ratio; where only an upstream bug's cases were measured, theirs, marked '*'."""
        if self.cases == 0 and self.known_worst_ratio is not None:
            return f"{self.known_worst_ratio:.3g}*"
        if self.cases == 0 and self.known_cases:
            return "raises*"
        return f"{self.worst_ratio:.3f}"


INT8_WITHIN = "within its grid's bound"  # not "equivalent": a quantized model computes another function
INT8_BEYOND = "BEYOND its grid's bound"
INT8_NOT_MEASURED = "not measured"


def _int8_verdict(cases: list, batches: list, bugs: list, failed: list) -> str:
    """The int8 verdict of some records: beyond the bound, failed, a bug that passed, nothing measured, or within."""
    if any(r["ratio"] > 1 for r in cases + batches):
        return INT8_BEYOND
    if failed:
        return f"FAILED: {len(failed)} test(s)"
    if any(not r["caught"] for r in bugs):
        return "UNPROVEN: a quantizer bug passed"
    if not cases:  # no int8 run measured within its bound: nothing is shown passing
        return INT8_NOT_MEASURED
    return INT8_WITHIN


def int8_summary(records) -> dict:
    """The int8 records of a run (dtype "qint8", ``Summary.quantized``) as the report's int8 section: each case
    within its grid's bound, the float32 bound's verdict on the same runs, the quantizer bugs, ONNX Runtime's batch
    dependence, failed tests; per system and in all, a verdict (``INT8_WITHIN`` where every case is within its
    bound, every bug beyond it and no test failed; ``INT8_NOT_MEASURED`` where no case was measured)."""
    records = list(records)
    cases = [{"system": r["system"], "case": r.get("case", ""), "max_error": r["max_error"], "ratio": r["ratio"],
              "verdict": INT8_WITHIN if r["ratio"] <= 1 else INT8_BEYOND}
             for r in records if r["kind"] == "quantized"]
    # The causes a named test expects on this machine (a strict expected failure: this CPU's int8 kernel), each
    # with the tests' records it marks: said beside the verdict, never turning it.
    known = sorted({r["known_issue"] for r in records if r.get("known_issue")})
    float32 = [{"system": r["system"], "case": r.get("case", ""), "max_error": r["max_error"], "ratio": r["ratio"]}
               for r in records if r["kind"] == "float32_bound"]
    bugs = [{"system": r["system"], "bug": r["mutation"].removeprefix("int8: "), "max_error": r["max_error"],
             "ratio": r["ratio"], "caught": bool(r["detected"])}
            for r in records if r["kind"] == "mutation"]
    batches = [{"system": r["system"], "case": r.get("case", ""), "batch": r["batch"], "wide": bool(r.get("wide")),
                "apart": r.get("apart"), "max_error": r["max_error"], "ratio": r["ratio"],
                "verdict": INT8_WITHIN if r["ratio"] <= 1 else INT8_BEYOND}
               for r in records if r["kind"] == "batch"]
    failed = [{"system": r.get("system") or "", "test": r["test"], "message": r["message"]}
              for r in records if r["kind"] == "failure"]
    described = {}
    for r in records:
        if r.get("cell"):
            described.setdefault(r["system"], r)
    systems = []
    for name in sorted({r.get("system") or "" for r in records} - {""}):
        mine = [r for r in cases if r["system"] == name]
        over = [r["ratio"] for r in float32 if r["system"] == name]
        caught = [r for r in bugs if r["system"] == name]
        batched = [r for r in batches if r["system"] == name]
        failures = [r for r in failed if r["system"] == name]
        first = described.get(name, {})
        systems.append({
            "system": name, "family": first.get("family", ""), "cell": first.get("cell", ""),
            "versions": first.get("versions", ""), "cases": len(mine),
            "max_error": max((r["max_error"] for r in mine), default=0.0),
            "worst_ratio": max((r["ratio"] for r in mine), default=0.0),
            "float32_bound_times": [min(over), max(over)] if over else None,
            "bugs_caught": sum(r["caught"] for r in caught), "bugs": len(caught), "batches": len(batched),
            "failed_tests": len(failures), "verdict": _int8_verdict(mine, batched, caught, failures)})
    return {"bound": "reference/quantized.py", "systems": systems, "cases": cases, "float32_bound": float32,
            "bugs": bugs, "batch_dependence": batches, "failed_tests": failed, "known_causes": known,
            "verdict": _int8_verdict(cases, batches, bugs, failed)}


def times_text(ratio: float) -> str:
    """A ratio far above 1 in whole numbers ("1133"), others in three digits."""
    return f"{ratio:.0f}" if ratio >= 100 else f"{ratio:.3g}"


def int8_line(section: dict) -> str:
    """The summary's one paragraph on the int8 runs (``int8_summary``), "" where the run made none."""
    if not section["systems"] and not section["failed_tests"]:
        return ""
    cases, bugs = section["cases"], section["bugs"]
    worst = max(cases, key=lambda r: r["ratio"]) if cases else None
    over = [r["ratio"] for r in section["float32_bound"]]
    return ("int8 dynamic quantization (another function: each run against its grid's bound, reference/quantized.py): "
            + (f"{len(cases)} cases, worst err/bound {worst['ratio']:.3f} ({worst['system']})" if worst else "no case")
            + (f"; the float32 bound exceeded {times_text(min(over))}"
               + ("" if min(over) == max(over) else f" to {times_text(max(over))}") + " times" if over else "")
            + (f"; quantizer bugs caught {sum(r['caught'] for r in bugs)}/{len(bugs)}" if bugs else "")
            + f": {section['verdict']}"
            + (f" (expected on this machine: {'; '.join(section['known_causes'])})" if section.get("known_causes")
               else "") + ".")


def peak_rss_gib() -> dict[str, float]:
    """This process's peak resident memory in GiB (Linux: ``ru_maxrss`` in KiB). Its children's is not
    said: a forked child starts with its parent's figure, so theirs would repeat the parent's."""
    import resource

    return {"process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


class Summary:
    """A pytest plugin, registered on the controller only: gathers records, prints the table."""

    def __init__(self, report_dir=None, names=(), depth="default", seed=0, mode="compact"):
        self.report_dir, self.names, self.depth, self.seed = report_dir, tuple(names), depth, seed
        self.mode = mode  # "compact": one screen (render_compact); "full": the table per system and dtype
        self.systems: dict[tuple[str, str], Row] = {}
        self.pairs: dict[tuple[str, str], Row] = {}
        self.non_equivalences: list[dict] = []
        self.quantized: list[dict] = []  # int8 runs within their quantization bound, bugs beyond it
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.records: list[dict] = []  # every record, as received: what a shard's report part holds
        self.shard: tuple[int, int] | None = None  # (K, N): this run is part K of N (rnn_equivalence.harness.shards)
        self.conversions = {"from_cache": 0, "converted": 0, "rejected": 0}  # summed over every process
        self.conversions_by_system: dict[str, int] = {}  # models each system needed: from the cache or converted
        self.conversion_cache: str | None = None  # its directory, "" where off (conftest sets it); None: unknown
        self.references = {"from_cache": 0, "computed": 0, "rejected": 0}  # summed over every process
        self.seconds: dict[str, float] = {}  # test seconds by system (or test module), every phase, every worker
        # by process ("gw0", or "main" without xdist): GiB (rnn_equivalence.harness.records)
        self.wall_seconds: float | None = None  # the run's wall time, start to end (a merge: its parts', summed)
        self._started: float | None = None
        self.peak_rss: dict[str, dict] = {}

    def add(self, record: dict) -> None:
        self.records.append(record)
        # One row per system and dtype: float32 and float64 errors differ by 2**29.
        if record.get("dtype") == "qint8":  # an int8 quantized model: another function, no row of the verdict
            self.quantized.append(record)  # (tests/equivalence/test_quantized_torch.py); kept in ``records``
        elif record["kind"] == "nonequivalence":
            self.non_equivalences.append(record)
        elif record["kind"] == "pair" or record.get("pair"):
            # A failed pair test's record names both systems too (rnn_equivalence.harness.records' makereport hook).
            key = (f"{record['system']} vs {record.get('other', '?')}", record["dtype"])
            self.pairs.setdefault(key, Row(*key)).add(record)
        elif record["kind"] == "mutation":  # in float32 and the half formats (frameworks/plan.py); float32 unnamed
            key = (record["system"], record.get("dtype") or "float32")
            self.systems.setdefault(key, Row(*key)).add(record)
        else:
            key = (record["system"], record["dtype"])
            self.systems.setdefault(key, Row(*key)).add(record)

    def add_report(self, report) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                self.add(value)

    def add_conversions(self, counts: dict) -> None:
        """Add one phase's conversion counts; those naming their system (rnn_equivalence.harness.records)
        count for it too."""
        for key in self.conversions:
            self.conversions[key] += int(counts.get(key, 0))
        if counts.get("system"):
            needed = int(counts.get("from_cache", 0)) + int(counts.get("converted", 0))
            self.conversions_by_system[counts["system"]] = self.conversions_by_system.get(counts["system"], 0) + needed

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or report.failed:
            self.add_report(report)
        for name, value in getattr(report, "user_properties", ()):
            if name == CONVERSIONS:  # on the report of the phase that made them, whatever the phase
                self.add_conversions(value)
            elif name == REFERENCES:
                for key in self.references:
                    self.references[key] += int(value.get(key, 0))
            elif name == COST:
                self.seconds[value["system"]] = self.seconds.get(value["system"], 0.0) + value["seconds"]
        self.outcomes[_outcome(report)] += _counts(report)

    # xdist: a worker's peak memory (rnn_equivalence.harness.records)
    def pytest_testnodedown(self, node, error) -> None:
        peak = getattr(node, "workeroutput", {}).get("rnn_equivalence_peak_rss")
        if peak:
            self.peak_rss[node.gateway.id] = peak

    def pytest_sessionstart(self, session) -> None:
        import time

        self._started = time.monotonic()

    def pytest_sessionfinish(self, session) -> None:
        if self._started is not None:
            import time

            self.wall_seconds = time.monotonic() - self._started
        if not self.peak_rss and not hasattr(session.config, "workerinput"):  # no workers: this process ran them
            self.peak_rss["main"] = peak_rss_gib()

    def cost_text(self) -> str:
        """The header's line on what the run cost: test seconds in all, each process's peak memory."""
        if not self.seconds:
            return ""
        peaks = ", ".join(f"{name} {peak['process']:.2f} GiB"
                          for name, peak in sorted(self.peak_rss.items()))
        wall = f"Wall time: {self.wall_seconds:.0f} s. " if self.wall_seconds else ""
        return (f"{wall}Test time: {sum(self.seconds.values()):.0f} s, summed over the processes"
                + (f"; peak RSS: {peaks}" if peaks else "") + ".")

    def conversions_text(self) -> str:
        """The header's line on converted models ("" where the run converted none): how many of them
        came from the conversion cache."""
        return conversions_text(self.conversions, self.conversion_cache)

    def references_text(self) -> str:
        """The header's line on the cases' references and bounds ("" where none was needed)."""
        total = self.references["from_cache"] + self.references["computed"]
        if not total:
            return ""
        rejected = self.references["rejected"]
        return (f"References and bounds: {self.references['from_cache']} of {total} from the reference cache"
                + (f", {rejected} damaged entries removed and computed again" if rejected else "") + ".")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.systems or self.pairs or self.non_equivalences or self.quantized:
            terminalreporter.section("equivalence summary")
            (self.render if self.mode == "full" else self.render_compact)(terminalreporter.write_line)

    def _complete_rows(self) -> None:
        for row in self.systems.values():  # rows holding only known issues lack these
            twin = next((r for r in self.systems.values() if r.system == row.system and r.cell), row)
            row.cell, row.versions = row.cell or twin.cell, row.versions or twin.versions
            row.family = row.family or twin.family

    def render_compact(self, write_line) -> None:
        """One screen (WIDTH columns, about 50 lines with every system): one line per framework, its worst
        err/bound per family member across every capability and dtype; each finding once with the systems
        it concerns; each known upstream issue on one line. The table per system and dtype is the report
        file's (``--equivalence-report``), or ``--equivalence-summary=full``."""
        if not self.systems and not self.pairs and not self.non_equivalences:
            if self.quantized:
                _wrap(write_line, int8_line(int8_summary(self.quantized)))
            return
        self._complete_rows()
        written = []  # the lines so far: what is left of the screen goes to the findings

        def write_line(line, _write=write_line):
            written.append(line)
            _write(line)

        write_line(f"Depth {self.depth}, seed {self.seed}. Worst err/bound (error as a fraction of the bound of "
                   "reference/tolerance.py,")
        write_line("<= 1 equivalent) over every case, capability (whole, padded, chunked, gradients, step) and "
                   "dtype; * known issues.")
        if self.conversions_text():
            _wrap(write_line, self.conversions_text())
        if self.references_text():
            _wrap(write_line, self.references_text())
        if self.cost_text():
            _wrap(write_line, self.cost_text())
        versions = sorted({v for row in self.systems.values() for v in row.versions.split(", ") if v})
        _wrap(write_line, "Versions: " + ", ".join(versions))
        from rnn_equivalence.harness.selection import elsewhere

        left = elsewhere(self.names)
        if left:  # one line for them all: the report files name each session's systems
            sessions = ", ".join(f"{session} ({len(names)})" for session, names in left.items())
            _wrap(write_line, "Not in this run, in environments of their own (nox -s <session>; the report names "
                              f"their systems): {sessions}")
        groups: dict[str, dict[str, list]] = {}
        for row in self.systems.values():
            groups.setdefault(framework_of(row.system), {}).setdefault(row.family or "?", []).append(row)
        families = sorted({family for by_family in groups.values() for family in by_family}, key=_family_order)
        seconds: dict[str, float] = {}
        for system, spent in self.seconds.items():
            seconds[framework_of(system)] = seconds.get(framework_of(system), 0.0) + spent
        rows = [("framework", "systems", "cases", "seconds", *(_short_family(f) for f in families), "caught",
                 "verdict")]
        for framework, by_family in sorted(groups.items(), key=lambda item: -seconds.get(item[0], 0.0)):
            members = [row for family_rows in by_family.values() for row in family_rows]
            cells = [_worst_text(by_family.get(family, [])) for family in families]
            caught, total = sum(r.mutations_caught for r in members), sum(r.mutations for r in members)
            rows.append((framework, str(len({r.system for r in members})),
                         str(sum(r.cases + r.known_cases + sum(getattr(r, k).cases for k in RUN_KINDS)
                                 for r in members)),
                         f"{seconds[framework]:.0f}" if framework in seconds else "-",
                         *cells, f"{caught}/{total}" if total else "-", _worst_verdict(members)))
        write_line("")
        _table(rows, write_line)
        if self.pairs:
            worst = max(self.pairs.values(), key=lambda r: r.worst_ratio)
            bad = sorted(row.system for row in self.pairs.values() if row.verdict != "equivalent")
            write_line("")
            _wrap(write_line, f"Pairs (each cell against its family member's anchor, bound: the sum of both): "
                              f"{len(self.pairs)}, worst diff/bound {worst.worst_ratio:.3f} ({worst.system}); "
                              + (f"NOT equivalent: {', '.join(bad)}" if bad else "all equivalent."))
        if self.quantized:  # before the findings: what is left of the screen goes to them
            write_line("")
            _wrap(write_line, int8_line(int8_summary(self.quantized)))
        findings: dict[str, list] = {}
        for r in self.non_equivalences:
            findings.setdefault(_generic(r["reason"], r["system"]), []).append(r["system"])
        known: dict[str, set] = {}
        for row in self.systems.values():
            for reason in row.known_issues:
                known.setdefault(reason, set()).add((row.system, row.dtype))
        # What is left of the screen after the table and the known issues goes to the findings, most
        # systems first; the rest are counted (the report lists every one).
        room = SCREEN_LINES - len(written) - 2 - (len(known) + 2 if known else 0) - 2
        if findings:
            write_line("")
            write_line(f"Proved non-equivalences (same weights, different functions), each once, with its systems "
                       f"({len(findings)}):")
            ordered = sorted(findings.items(), key=lambda item: (-len(set(item[1])), item[0]))
            shown = ordered if len(ordered) <= room else ordered[:max(room - 1, 1)]
            for reason, systems in shown:
                _one_line(write_line, reason, sorted(set(systems)))
            if len(shown) < len(ordered):
                write_line(f"  ... and {len(ordered) - len(shown)} more findings: the report lists every one.")
        if known:
            write_line("")
            write_line("Known upstream issues (strict expected failures; full text and links in the report):")
            ordered_known = sorted(known.items(), key=lambda item: (-len(item[1]), item[0]))
            for reason, where in ordered_known[:KNOWN_SHOWN]:
                systems = sorted({system for system, _ in where})
                dtypes = "/".join(sorted({dtype for _, dtype in where}))
                _one_line(write_line, f"[{dtypes}] {reason.split(';')[0]}", systems)
            if len(ordered_known) > KNOWN_SHOWN:  # as the findings: the report lists every one
                more = len(ordered_known) - KNOWN_SHOWN
                write_line(f"  ... and {more} more known issues: the report lists every one.")
        write_line("")
        write_line("Per system and dtype: --equivalence-summary=full, or the report (--equivalence-report=DIR).")

    def render(self, write_line) -> None:
        """The table per system and dtype, in WIDTH columns: rows grouped by family, versions named once."""
        if not self.systems and not self.pairs and not self.non_equivalences:
            if self.quantized:
                _wrap(write_line, int8_line(int8_summary(self.quantized)))
            return
        self._complete_rows()
        _wrap(write_line, f"Depth {self.depth}, seed {self.seed}. Each case compares every output (h, and c for an "
                          "LSTM) with the float64 NumPy reference; 'err/bound' is the largest error as a fraction "
                          "of the bound derived in reference/tolerance.py (equivalent when <= 1); 'padded' and "
                          "'chunked' are the same on padded batches of mixed lengths and on sequences run in "
                          "several calls with the state carried, 'grads' the gradients of every weight, input and "
                          "initial state by the framework's autodiff, 'step' one optimizer step ('-': the system "
                          "has none).")
        versions = sorted({v for row in self.systems.values() for v in row.versions.split(", ") if v})
        _wrap(write_line, "Versions: " + ", ".join(versions) + ". Each system's cell or layer: the report file.")
        if self.conversions_text():
            _wrap(write_line, self.conversions_text())
        if self.references_text():
            _wrap(write_line, self.references_text())
        header = ("system", "dtype", "cases", "max|err|", "err/bound", "padded", "chunked", "grads", "step", "bitwise",
                  "caught", "verdict")
        for family in sorted({row.family for row in self.systems.values()}, key=_family_order):
            write_line("")
            kind = (family.split() or [""])[0]
            write_line(_FAMILY_TITLES.get(kind, family.upper() or "OTHER") + family[len(kind):])
            rows = [header]
            for _, row in sorted(self.systems.items()):
                if row.family != family:
                    continue
                rows.append((row.system, dtype_text(row.dtype, row.arithmetic), str(row.cases + row.known_cases),
                             row.error_text, row.ratio_text, *(getattr(row, kind).text for kind in RUN_KINDS),
                             ("yes" if all(row.exact) else "NO") if row.exact else "-",
                             f"{row.mutations_caught}/{row.mutations}" if row.mutations else "-", row.verdict))
            _table(rows, write_line)
        if any(row.known_cases for row in self.systems.values()):
            write_line("* measured on cases an upstream bug breaks (listed below); 'raises': the bug raises.")
        if self.pairs:
            write_line("")
            write_line("Systems against each other (bound: the sum of both systems' bounds):")
            rows = [("pair", "dtype", "cases", "max|diff|", "diff/bound", "verdict")]
            for _, row in sorted(self.pairs.items()):
                rows.append((row.system, row.dtype, str(row.cases), f"{row.max_error:.2e}", f"{row.worst_ratio:.3f}",
                             row.verdict))
            _table(rows, write_line)
        if self.non_equivalences:
            write_line("")
            write_line("Proved non-equivalences (same weights, different functions; the difference is far "
                       "above the bound):")
            rows = [("system", "against", "max|diff|", "diff/bound")]
            reasons = []
            for r in sorted(self.non_equivalences, key=lambda r: (r["system"], r["other"])):
                rows.append((r["system"], r["other"], f"{r['max_error']:.2e}", f"{r['ratio']:.3g}"))
                reasons.append(r["reason"])
            _table(rows, write_line)
            for reason in sorted(set(reasons)):
                _wrap(write_line, f"why: {reason}", indent="  ")
        known = sorted({(row.system, row.dtype, reason) for row in self.systems.values()
                        for reason in row.known_issues})
        if known:
            write_line("")
            write_line("Known upstream issues (strict expected failures, kept out of the verdict's ratio):")
            by_reason = {}
            for system, dtype, reason in known:
                by_reason.setdefault(reason, []).append(f"{system} {dtype}")
            for reason, where in by_reason.items():
                _wrap(write_line, f"{', '.join(where)}: {reason}", indent="  ")
        if self.quantized:
            write_line("")
            _wrap(write_line, int8_line(int8_summary(self.quantized)))


WIDTH = 120
SCREEN_LINES = 60  # the compact summary's height at most (tests/harness/test_summary.py)
KNOWN_SHOWN = 4  # the known upstream issues the compact summary names, the most widespread first (4: with every
# system's framework a line, ten environments of their own among them, the summary fits ``SCREEN_LINES``)
_FAMILY_TITLES = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}
_FAMILY_SUFFIXES = ("-rnn", "-lstm", "-gru", "-reset-before")
_VERDICT_ORDER = ("NOT equivalent", "FAILED", "UNPROVEN", "NOT equivalent where noted below", "not compared",
                  "equivalent")


def conversions_text(conversions: dict, cache: str | None = None) -> str:
    """"Converted models: N of M from the conversion cache (DIR)", and the damaged entries converted again;
    "" where none was converted nor read."""
    total = conversions.get("from_cache", 0) + conversions.get("converted", 0)
    if not total:
        return ""
    where = f" ({cache})" if cache else " (off)" if cache is not None else ""
    rejected = conversions.get("rejected", 0)
    return (f"Converted models: {conversions.get('from_cache', 0)} of {total} conversions from the conversion cache"
            f"{where}" + (f", {rejected} damaged entries removed and converted again" if rejected else "") + ".")


def framework_of(system: str) -> str:
    """A system's framework as the summary groups it: its name without the family and layer suffixes
    ("keras-jax-gru-reset-before-rnn" -> "keras-jax", "torch-onnx-dynamo-lstm" -> "torch-onnx-dynamo")."""
    name = system
    while name.endswith(_FAMILY_SUFFIXES):
        name = name[:name.rindex("-")] if not name.endswith("-reset-before") else name[:-len("-reset-before")]
    return name


def _short_family(family: str) -> str:
    return family.replace("gru (reset_after)", "gru").replace("gru (reset_before)", "gru-before")


def _worst_text(rows) -> str:
    """The worst err/bound of some rows over every capability, '*' where known issues were met, '!' where
    a row is not equivalent; '-' for none."""
    if not rows:
        return "-"
    worst = max(max(r.worst_ratio, *(getattr(r, k).worst_ratio for k in RUN_KINDS)) for r in rows)
    measured = any(r.cases or any(getattr(r, k).cases for k in RUN_KINDS) for r in rows)
    text = f"{worst:.3f}" if measured else "-"
    if any(r.verdict.startswith(("NOT equivalent", "FAILED", "UNPROVEN")) and not r.verdict.endswith("noted below")
           for r in rows):
        text += "!"
    elif any(r.known_issues for r in rows):
        text += "*"
    return text


def _worst_verdict(rows) -> str:
    verdicts = [r.verdict for r in rows]
    for verdict in _VERDICT_ORDER:
        hit = [v for v in verdicts if v == verdict or v.startswith(verdict + ":")]
        if hit:
            if verdict == "NOT equivalent where noted below":
                return "equivalent but known issues*"
            return hit[0] if verdict != "FAILED" else f"FAILED: {sum(int(v.split()[1]) for v in hit)} test(s)"
    return "-"


def _generic(reason: str, system: str) -> str:
    """A finding without the one system it was measured on, so that it is said once for all of them."""
    return reason.replace(f"{system} ", "", 1) if reason.startswith(f"{system} ") else reason


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def _one_line(write_line, text: str, systems) -> None:
    """``text``, clipped to what the line leaves it, then its systems, as many as fit, the rest counted:
    one line of WIDTH columns at most."""
    first = systems[0] + (f", +{len(systems) - 1} more" if len(systems) > 1 else "")
    text = _clip(text, max(WIDTH - len(first) - 8, 40))
    listed = [systems[0]]
    for name in systems[1:]:
        more = len(systems) - len(listed) - 1
        if len(f"  {text}: {', '.join(listed + [name])}" + (f", +{more} more" if more else "")) > WIDTH:
            break
        listed.append(name)
    more = len(systems) - len(listed)
    write_line(f"  {text}: {', '.join(listed)}" + (f", +{more} more" if more else ""))


def _family_order(family: str):
    kind = (family.split() or [""])[0]
    return (list(_FAMILY_TITLES).index(kind) if kind in _FAMILY_TITLES else len(_FAMILY_TITLES), family)


def _wrap(write_line, text: str, indent: str = "") -> None:
    import textwrap

    for line in textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                              break_long_words=False, break_on_hyphens=False):
        write_line(line)


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
