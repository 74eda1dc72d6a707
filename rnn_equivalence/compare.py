"""``rnn-equivalence compare A B``: are two systems of a family the same function, on the versions installed
here? Answered by running the two systems' forward cases now (``rnn_equivalence.engine``: no pytest, no tests/
directory, so an installed package answers too), not by reading a committed report.

The answer is built from one run's report, in the shape ``pytest --equivalence-report`` writes: each system
against the float64 reference in every dtype (both within their bounds on the same canonical parameters means
A and B agree within the sum of the bounds), the known upstream issues the run met for either, and the mapping
between them (``rnn_equivalence.frameworks.convert``: what A's weights become in B's names, or why B cannot hold
A's function). The engine runs the forward equivalence alone; from the full suite's report (the committed one
of docs/ANSWERS.md, ``answer_from_report``) the answer weighs padded, chunked, gradient and optimizer runs
too, and lists the proved non-equivalences of either. Yes: both are the family member they declare, the same
one, every case within its bound, and B holds any A weights. No: a different family member (a GRU's
variant), or a case beyond its bound. Only if: both compute the same function, but B cannot hold every
A weight (the reason is said).
"""

from __future__ import annotations

from dataclasses import dataclass, field


class CompareRefused(ValueError):
    """The two names do not make a question the suite answers (unknown, or of different families), or a
    framework the run needs is not installed here."""


@dataclass
class Answer:
    a: str
    b: str
    verdict: str  # "Yes", "No", "Only if"
    reason: str
    mapping: list[str] = field(default_factory=list)  # lines: the code and the layouts
    evidence: list[dict] = field(default_factory=list)  # per system and dtype
    findings: list[str] = field(default_factory=list)  # proved non-equivalences of either, and known issues
    run: dict = field(default_factory=dict)  # command, depth, seed, date, versions, outcomes

    @property
    def equivalent(self) -> bool:
        return self.verdict == "Yes"

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "verdict": self.verdict, "reason": self.reason, "mapping": self.mapping,
                "evidence": self.evidence, "findings": self.findings, "run": self.run}


def check_question(a: str, b: str) -> tuple[type, type]:
    """The two systems' classes, or CompareRefused naming what is wrong."""
    from rnn_equivalence.frameworks import ADAPTERS

    for name in (a, b):
        if name not in ADAPTERS:
            raise CompareRefused(f"unknown system {name!r}; expected one of {', '.join(ADAPTERS)}")
    if a == b:
        raise CompareRefused(f"expected two different systems, got {a!r} twice")
    cls_a, cls_b = ADAPTERS[a], ADAPTERS[b]
    if cls_a.family != cls_b.family:
        raise CompareRefused(f"expected two systems of one family; {a} is {cls_a.family}, {b} is {cls_b.family}")
    return cls_a, cls_b


def mapping_lines(a: str, b: str) -> tuple[list[str], str | None]:
    """The code that ports A's weights to B's, each side's weights in its framework's names and shapes
    (a one-layer, one-direction module with bias, input 3, hidden 5), and the refusal's reason where B
    cannot hold A's function (None where it can)."""
    from rnn_equivalence.frameworks.convert import ConversionRefused, convert, mapping
    from rnn_equivalence.reference.config import LayerConfig
    config = LayerConfig(1, False)
    source, target = mapping(a), mapping(b)
    lines = ["from rnn_equivalence.frameworks import convert",
             "from rnn_equivalence.reference.config import LayerConfig",
             f"b_weights = convert(a_weights, {a!r},",
             f"                    {b!r},",
             "                    config=LayerConfig(1, False))  # layers, bidirectional",
             "# the weights of a cell of input_size 3, hidden_size 5:",
             f"# {a}: {source.cell}"]
    lines += [f"#   {name:<28} {shape}" for name, (_, shape) in source.native_spec(config, 3, 5).items()]
    lines.append(f"# {b}: {target.cell}")
    lines += [f"#   {name:<28} {shape}" for name, (_, shape) in target.native_spec(config, 3, 5).items()]
    from rnn_equivalence.frameworks import adapter_class
    from rnn_equivalence.harness.cases import case_of

    stack = case_of(adapter_class(a), 3, 5, 1, 1, 0, config).stack()  # what A holds (b_hn = 0 where it has no slot)
    try:
        convert(source.to_native(stack, config), a, b, config=config)
    except ConversionRefused as error:
        return lines, str(error)
    return lines, None


def about_the_pair(against: str, a: str, b: str) -> bool:
    """A proved non-equivalence of A or B concerns the pair unless it is against a third system of the
    suite (``against`` names a system, or a variant of the reference, or a setting)."""
    from rnn_equivalence.frameworks import ADAPTERS

    named = against.split(" ")[0]
    return named in (a, b) or named not in ADAPTERS


def member(cls) -> str:
    return cls.family + (f" ({cls.variant})" if cls.variant else "")


def pinned_only(cls, row: dict) -> bool:
    """Whether a row is UNPROVEN by nothing but the wrong mappings its system pins as within that dtype's bound
    (``TestPlan.mutations_within_bound``: in a half format, mistakes below half rounding on the square mutation
    case): every run of it within its bound, no test failed, and at most that many wrong runs not caught. Its
    outputs agree; the mapping is proved by the float32 row, which catches them."""
    if not row["verdict"].startswith("UNPROVEN"):
        return False
    return 0 < row["mutations"] - row["mutations_caught"] <= len(cls.mutations_within_bound.get(row["dtype"], ()))


def decide(cls_a, cls_b, rows: list[dict], refusal: str | None) -> tuple[str, str]:
    """Yes, No or Only if, and why, from the two systems' rows of one run's report (every dtype) and the
    mapping's refusal (None: B holds any A weights). The one rule, for ``compare`` and docs/ANSWERS.md."""
    a, b = cls_a.name, cls_b.name
    # A row whose only departures are known upstream issues: the systems agree except where those apply.
    noted = [r for r in rows if r["verdict"] == "NOT equivalent where noted below"]
    # A half row whose wrong runs not caught are the pinned ones (pinned_only): within its bound, said below.
    unproven = [r for r in rows if pinned_only({a: cls_a, b: cls_b}[r["system"]], r)]
    failed = [r for r in rows if not r["verdict"].startswith("equivalent") and r not in noted and r not in unproven]
    missing = {a, b} - {r["system"] for r in rows}
    if cls_a.variant != cls_b.variant:
        return "No", (f"{a} computes the {member(cls_a)} cell, {b} the {member(cls_b)} one: the two GRU "
                      f"variants are different functions (b_hn inside or outside the reset)")
    if missing:
        return "No", f"no case of {', '.join(sorted(missing))} ran (is its framework installed?)"
    if failed:
        return "No", "; ".join(f"{r['system']} {r['dtype']}: {r['verdict']}" for r in failed)
    known = sorted({r["system"] + " " + r["dtype"] for r in rows if r["known_issue_cases"]})
    caveat = f"; known upstream issues break some cases of {', '.join(known)} (listed below)" if known else ""
    if unproven:
        caveat += (f"; UNPROVEN in {', '.join(r['system'] + ' ' + r['dtype'] for r in unproven)}: a wrong mapping "
                   f"below the half bound passes there (pinned by the system)")
    if noted:
        issues = "; ".join(f"{r['system']} {r['dtype']}: {k}" for r in noted for k in r["known_issues"])
        return "Only if", (f"Only where no known upstream issue applies: {issues}"
                           + (f"; and {refusal.rstrip('.')}" if refusal else ""))
    if refusal:
        return "Only if", (f"Both compute the {member(cls_a)} cell within their bounds, "
                           f"but {refusal.rstrip('.')}{caveat}")
    worst = max(r["worst_ratio"] for r in rows)
    agree = (f"Both compute the {member(cls_a)} cell within the derived bound on the same canonical "
             f"parameters ({sum(r['cases'] for r in rows)} cases, worst err/bound {worst:.3g}), so they agree "
             f"within the sum of their bounds once mapped{caveat}")
    settings = list(dict.fromkeys(cls.runs_with for cls in (cls_a, cls_b) if cls.runs_with))
    if settings:  # the verdict holds under a setting the system's default may not have
        return "Only if", f"Only with the setting the suite runs: {'; '.join(settings)}. {agree}"
    return "Yes", agree


def answer(a: str, b: str, depth: str = "quick", seed: int = 0) -> Answer:
    """The answer from the two systems' forward runs, now, on the installed versions (``rnn_equivalence.engine``);
    CompareRefused where a framework of either is not installed."""
    from rnn_equivalence.engine import Unavailable, report

    check_question(a, b)
    try:
        run = report([a, b], depth, seed)
    except Unavailable as error:
        raise CompareRefused(f"compare {a} {b}: {error}") from None
    return answer_from_report(a, b, run)


def answer_from_report(a: str, b: str, report: dict) -> Answer:
    """The answer from one run's report (``--equivalence-report``'s JSON): a run of ``compare``, or the
    committed full-depth report (docs/ANSWERS.md)."""
    cls_a, cls_b = check_question(a, b)
    lines, refusal = mapping_lines(a, b)
    rows = [row for row in report["systems"] if row["system"] in (a, b)]
    evidence = [{"system": r["system"], "dtype": r["dtype"], "cell": r["cell"], "versions": r["versions"],
                 "cases": r["cases"], "worst_ratio": r["worst_ratio"], "known_issue_cases": r["known_issue_cases"],
                 "verdict": r["verdict"], "anchor": r["anchor"], "page": r.get("page", "EQUIVALENCE.md")}
                for r in rows]
    findings = [f"{n['system']} vs {n['against']}: {n['reason']} (difference/bound {n['ratio']:.3g})"
                for n in report["non_equivalences"] if n["system"] in (a, b) and about_the_pair(n["against"], a, b)]
    findings += sorted({f"{r['system']} {r['dtype']}: known issue: {k}" for r in rows for k in r["known_issues"]})
    depth, seed = report["depth"], report["seed"]
    run = {"command": f"rnn-equivalence compare {a} {b} --depth={depth} --seed={seed}", "depth": depth,
           "seed": seed, "date": report["date"], "versions": report["environment"]["versions"],
           "outcomes": report["outcomes"]}
    verdict, reason = decide(cls_a, cls_b, rows, refusal)
    return Answer(a, b, verdict, reason, lines, evidence, findings, run)


def text(result: Answer, width: int = 100, lead: tuple[str, str] | None = None) -> list[str]:
    """The answer for people: paragraphs wrapped to ``width``, the code as it is. ``lead``: the anchor and the
    lead of docs/ANSWERS.md's question about the pair, printed first, as the page gives it."""
    import textwrap

    def para(words: str, indent: str = "") -> list[str]:
        return textwrap.wrap(words, width, initial_indent=indent, subsequent_indent=indent + "    ")

    out = []
    if lead:
        anchor, words = lead
        out += para(f"docs/ANSWERS.md#{anchor} (the committed report): {words}") + [""]
        out += para(f"This run: {result.verdict}: {result.a} and {result.b}. {result.reason.rstrip('.')}.")
    else:
        out += para(f"{result.verdict}: {result.a} and {result.b}. {result.reason.rstrip('.')}.")
    out.append("The mapping:")
    out += [f"    {line}" for line in result.mapping]
    out += para(f"Evidence ({result.run['command']}, {result.run['date']}):")
    for e in result.evidence:
        known = f", {e['known_issue_cases']} known-issue case(s)" if e["known_issue_cases"] else ""
        out += para(f"{e['system']} {e['dtype']}: {e['cases']} cases, worst err/bound {e['worst_ratio']:.3g}"
                    f"{known}: {e['verdict']} ({e['versions']})", "    ")
    if result.findings:
        out.append("Differences proved and known issues met:")
        for finding in result.findings:
            out += para(finding, "    ")
    return out
