"""docs/ANSWERS.md: the questions people ask, each answered from the committed report (docs/equivalence.json),
never edited by hand:

    python -m docgen.answers            # docs/equivalence.json -> docs/ANSWERS.md

A question (``docgen.questions``) is answered as the best answers on the subject are written: the verdict
in the first sentence, for the frameworks' default settings, with the one condition that changes it; one
formula that explains it; the mapping in the asker's own frameworks, ending in a check; one caveat; then
the evidence. The words of a lead are written in ``docgen.questions``, its verdict is checked here against
the report (``check_claim``): a Yes with a difference proved on its subject, or a No with none, stops the
generator. Each difference is listed once, its systems grouped; each pair's evidence is one table row.
Then every system of a family against an anchor with no known issue, float32 and float64 apart.
tests/harness/test_answers.py regenerates the page from the committed report and holds it equal to the
committed page, and holds each rule of the page; tests/harness/test_answer_snippets.py runs its code.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from rnn_equivalence.compare import answer_from_report, decide, mapping_lines, pinned_only
from docgen.questions import CARRIES, FORWARD, QUESTIONS, Claim, Question, Records, kind_of

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "equivalence.json"
PAGE = ROOT / "docs" / "ANSWERS.md"
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"
LEAD_WORDS = 60  # a lead longer than this is not read to its end
CELL_CHARACTERS = 200  # the anchor table's cells
FIGURES = "#reading-the-figures"


class AnswerContradicted(ValueError):
    """A lead's verdict that the report does not bear out."""


def _report_link(row_anchor: str, report_page: str = "EQUIVALENCE.md") -> str:
    return f"[{row_anchor}]({report_page}#{row_anchor})"


def with_environments(report: dict, root: Path = ROOT) -> dict:
    """The committed report with the rows of the tools that run in environments of their own (its
    ``elsewhere``: docs/environments/<session>/equivalence.json), each row marked with the page it links to,
    so that their questions are answered from their own full-depth reports, with their own versions."""
    merged = {**report, "systems": list(report["systems"]), "non_equivalences": list(report["non_equivalences"])}
    for session in report.get("elsewhere", {}):
        own = json.loads((root / "docs" / "environments" / session / "equivalence.json").read_text())
        where = f"environments/{session}/EQUIVALENCE.md"
        # its own systems' rows only: a session may run a main system beside them (a source its programs are
        # compared with), whose row the committed report has already
        merged["systems"] += [{**row, "page": where} for row in own["systems"]
                              if row["system"] in report["elsewhere"][session]]
        merged["non_equivalences"] += [{**row, "page": where} for row in own["non_equivalences"]]
    return merged


# --- the lead -----------------------------------------------------------------------------------------------

def proved(subject, report: dict) -> list[dict]:
    """The report's proved differences (beyond their bound) that ``subject`` is about."""
    return [n for n in report["non_equivalences"] if subject.matches(n) and n["ratio"] > 1]


def runs_rows(kind: str, report: dict) -> list[dict]:
    """The report's rows (system and dtype) with runs of ``kind`` ("chunked"): known upstream issues' cases,
    strict expected failures, are kept out of them by the summary (rnn_equivalence.harness.summary.Row)."""
    return [r for r in report["systems"] if r[kind]["cases"]]


# The word that names the tests of a kind of run (test_chunked_run_matches_whole_run,
# test_state_not_carried_between_chunks_is_detected, test_projected_layer_in_chunks): a failed one is listed
# in its row's failed_tests, by its test id, whether or not it recorded a comparison first.
RUN_TESTS = {"chunked": "chunk"}


def runs_broken(kind: str, report: dict) -> list[str]:
    """What in the report's records says runs of ``kind`` do not agree: a row's runs beyond their bound, a
    failed test of that kind of run, or a wrong run not caught on a system run so (the report counts a
    system's wrong runs together: dropping the carried state is one of them on every system run in chunks,
    tests/equivalence/test_padded.py). Empty where they agree."""
    systems = {r["system"] for r in runs_rows(kind, report)}
    broken = [f"{r['system']} {r['dtype']}'s {kind} runs reach err/bound {ratio(r[kind]['worst_ratio'])}"
              for r in runs_rows(kind, report) if r[kind]["worst_ratio"] > 1]
    broken += [f"{r['system']} {r['dtype']}: {t['test']} failed: {t['message']}" for r in report["systems"]
               for t in r["failed_tests"] if RUN_TESTS[kind] in t["test"].split("::")[-1].split("[")[0]]
    broken += [f"{r['system']} {r['dtype']} caught {r['mutations_caught']} of its {r['mutations']} wrong runs"
               for r in report["systems"] if r["system"] in systems and r["mutations_caught"] < r["mutations"]]
    return broken


def pinned(row: dict) -> bool:
    """Whether the row's wrong runs not caught are those its system pins as below the bound of the row's dtype
    (``rnn_equivalence.compare.pinned_only``: a half format's), its runs within their bounds."""
    from rnn_equivalence.frameworks import ADAPTERS

    return pinned_only(ADAPTERS[row["system"]], row)


def dtype_rows(dtypes: tuple[str, ...], report: dict) -> list[dict]:
    """The report's rows in ``dtypes`` (the half formats)."""
    return [r for r in report["systems"] if r["dtype"] in dtypes]


def worst_of(row: dict) -> float:
    """A row's worst err/bound over its whole-sequence cases and its padded and chunked runs."""
    return max(row["worst_ratio"], *(row[kind]["worst_ratio"] for kind in ("padded", "chunked")))


def dtypes_broken(dtypes: tuple[str, ...], report: dict) -> list[str]:
    """What in the report's rows in ``dtypes`` says they do not agree: a row neither equivalent nor UNPROVEN by
    its pinned wrong mappings alone (``pinned``): beyond its bound, a test failed, a known issue, a wrong mapping
    passed that its system does not pin. Empty where they agree."""
    return [f"{r['system']} {r['dtype']} is {r['verdict']} (worst err/bound {ratio(worst_of(r))}, "
            f"{r['mutations_caught']} of {r['mutations']} wrong runs caught)"
            for r in dtype_rows(dtypes, report) if r["verdict"] != "equivalent" and not pinned(r)]


# The test modules whose failures belong to a row's records other than the forward pass's (``Records``): a failed
# test of any other module (the reference comparisons, padded and chunked runs, wrong mappings, a system's own
# findings) is the forward pass's.
RECORD_TESTS = {"gradients": "test_gradients.py", "optimizer": "test_optimizer.py"}


def record(row: dict, kind: str) -> dict:
    """A row's record of ``kind``: "cases" is its whole-sequence comparisons, the others its own records."""
    if kind == "cases":
        return {"cases": row["cases"], "max_error": row["max_error"], "worst_ratio": row["worst_ratio"]}
    return row[kind]


def kind_of_test(test: str) -> str:
    """The record a failed test (its id) belongs to: "gradients", "optimizer", or "forward"."""
    module = test.split("::")[0].rsplit("/", 1)[-1]
    return next((kind for kind, name in RECORD_TESTS.items() if name == module), "forward")


def name_of_test(test: str) -> str:
    """A test id's function name, without its module and parameters."""
    return test.split("::")[-1].split("[")[0]


def records_rows(records: Records, report: dict) -> list[dict]:
    return [r for r in report["systems"] if r["system"] in records.systems]


def records_broken(records: Records, report: dict) -> list[str]:
    """What in the report says the rows' records of ``records`` do not agree: a system with no row, a record beyond
    its bound, a failed test of it; for the forward pass also a known upstream issue met, a wrong mapping passed,
    a difference proved but the conventions ``records.excluding`` names. Empty where they agree."""
    rows = records_rows(records, report)
    forward = bool(set(records.kinds) & set(FORWARD))
    kinds = set(records.kinds) | ({"forward"} if forward else set())
    broken = [f"{name} has no row" for name in records.systems if name not in {r["system"] for r in rows}]
    for r in rows:
        where = f"{r['system']} {r['dtype']}"
        broken += [f"{where}'s {kind} reach err/bound {ratio(record(r, kind)['worst_ratio'])}"
                   for kind in records.kinds if record(r, kind)["worst_ratio"] > 1]
        broken += [f"{where}: {t['test']} failed: {t['message']}" for t in r["failed_tests"]
                   if kind_of_test(t["test"]) in kinds]
        if forward and r["known_issue_cases"]:
            broken.append(f"{where} met known upstream issues: {'; '.join(r['known_issues'])}")
        if forward and r["mutations_caught"] < r["mutations"]:
            broken.append(f"{where} caught {r['mutations_caught']} of its {r['mutations']} wrong mappings")
    if forward:
        broken += [f"{n['system']} vs {n['against']}: {n['reason']}" for n in report["non_equivalences"]
                   if n["system"] in records.systems and n["ratio"] > 1 and kind_of(n) not in records.excluding]
    return broken


def unrun_rows(claim: Claim, report: dict) -> list[dict]:
    """The report's rows of the systems ``claim`` says cannot be run (``Claim.unrun``): none while it holds."""
    return [r for u in claim.unrun for r in report["systems"] if r["system"].startswith(u.prefix)
            and (not u.family or r["family"].split(" ")[0] == u.family)]


def check_claim(question: Question, claim: Claim, report: dict) -> None:
    """AnswerContradicted unless the report bears ``claim`` out: a Yes with no difference proved on its
    subject, every pair of it Yes and, for a claim about a kind of run, such runs that all agree
    (``runs_broken``); a No or an Only if with a difference proved, a pair answered so, or a run broken; an Only if
    about rows' records (``Claim.records``), with those records all agreeing: they are the runs under its condition."""
    found = proved(claim.proof, report) if claim.proof else []
    verdicts = {answer_from_report(a, b, report).verdict for a, b in claim.pairs}
    where = f"{question.anchor}: the lead says {claim.verdict}{' for ' + claim.about if claim.about else ''}"
    broken = runs_broken(claim.runs, report) if claim.runs else []
    if claim.runs and not runs_rows(claim.runs, report):
        raise AnswerContradicted(f"{where} about {claim.runs} runs, but the report has none")
    # The rows' records: for an Only if, the runs made under its condition (the systems' own setting), which must
    # agree as a Yes's do; the condition itself is proved by a pair answered Only if, or a finding.
    held = records_broken(claim.records, report) if claim.records else []
    broken += held
    ran = unrun_rows(claim, report)
    if ran:
        why = "; ".join(u.why for u in claim.unrun)
        raise AnswerContradicted(f"{where} ({why}), but the report has rows of "
                                 f"{', '.join(dict.fromkeys(r['system'] + ' ' + r['dtype'] for r in ran))}")
    if claim.dtypes:
        if not dtype_rows(claim.dtypes, report):
            raise AnswerContradicted(f"{where} about {' and '.join(claim.dtypes)} rows, but the report has none")
        broken += dtypes_broken(claim.dtypes, report)
    if claim.verdict == "Yes":
        if found:
            raise AnswerContradicted(f"{where}, but the report proves {found[0]['system']} vs "
                                     f"{found[0]['against']}: {found[0]['reason']}")
        if verdicts - {"Yes"}:
            raise AnswerContradicted(f"{where}, but its pairs are answered {sorted(verdicts)}")
        if broken:
            raise AnswerContradicted(f"{where}, but {'; '.join(broken[:3])}")
    elif claim.verdict in ("No", "Only if"):
        if claim.verdict == "Only if" and held:
            raise AnswerContradicted(f"{where} {claim.condition}, but run so {'; '.join(held[:3])}")
        if not found and not broken and claim.verdict not in verdicts and not claim.unrun:
            raise AnswerContradicted(f"{where}, but the report proves no difference on its subject and no pair "
                                     f"of it is answered {claim.verdict}")
        if claim.verdict == "Only if" and not claim.condition:
            raise AnswerContradicted(f"{where} with no condition")
    else:
        raise AnswerContradicted(f"{where}: expected Yes, No or Only if")


def claim_sentence(claim: Claim, figures: dict | None = None) -> str:
    """A claim's sentence, its figures (``{worst}``) filled in from ``figures``."""
    about = f" for {claim.about}" if claim.about else ""
    text = claim.text.format(**figures) if figures is not None else claim.text
    if claim.verdict == "Only if":
        return f"**Only if** {claim.condition}{about}: {text}."
    return f"**{claim.verdict}**{about}: {text}."


def read_by(question: Question, report: dict) -> dict:
    """The report as the question reads it: its rows in the question's dtypes (``Question.dtypes``: float32 and
    float64, or the half formats), so that a float32 answer's figures and evidence are float32's and float64's."""
    if all(r["dtype"] in question.dtypes for r in report["systems"]):
        return report
    return {**report, "systems": [r for r in report["systems"] if r["dtype"] in question.dtypes]}


def lead(question: Question, report: dict) -> str:
    """The question's first paragraph: each claim's verdict, checked against ``report`` (its rows in the
    question's dtypes: ``read_by``) first, with the report's figures where its words name them."""
    report = read_by(question, report)
    for claim in question.claims:
        check_claim(question, claim, report)
    named = any("{" in claim.text for claim in question.claims)
    values = figures(question, report) if named else None
    return " ".join(claim_sentence(claim, values) for claim in question.claims)


def plain(markdown: str) -> str:
    """A lead for a terminal: the Markdown's emphasis and code marks taken out."""
    return re.sub(r"\*\*|`", "", markdown)


def lead_for(a: str, b: str, report: dict | None = None) -> tuple[Question, str] | None:
    """The page's question about the pair A, B (either order) and its lead, from the committed report:
    what ``rnn-equivalence compare`` prints above its own run's answer. None for a pair no question has."""
    for question in QUESTIONS:
        if (a, b) in question.pairs or (b, a) in question.pairs:
            if report is None:
                if not REPORT.exists():  # an installed package without the repository's docs
                    return None
                report = with_environments(json.loads(REPORT.read_text()))
            return question, lead(question, report)
    return None


def words(text: str) -> int:
    return len(re.sub(r"[*`]", "", text).split())


# --- figures ------------------------------------------------------------------------------------------------

def ratio(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.3g}"


def speed_sentence(path: Path = BENCHMARKS) -> str:
    """The concat-vs-split speed, quoted from the benchmark's page (benchmarks/rnn_formulas.py)."""
    text = path.read_text()
    concat = re.search(r"^Median concat/split over all sizes: (.*)\.$", text, re.M)
    hoisted = re.search(r"^Median hoisted/split over the 100-step sequences: (.*)\.$", text, re.M)
    if not (concat and hoisted):
        raise AnswerContradicted(f"{path}: the medians the answer quotes are missing; rerun benchmarks/rnn_formulas.py")
    medians = lambda line: ", ".join(re.sub(r" \(range [^)]*\)", "", part) for part in line.split(", "))  # noqa: E731
    return (f"neither is reliably faster. One concatenated multiply takes {medians(concat.group(1))} of the split "
            f"form's time (median per framework, [BENCHMARKS.md](BENCHMARKS.md)). What the split form allows is "
            f"hoisting `W_hx x_t` for all steps into one multiply before the loop: {medians(hoisted.group(1))} of "
            f"the split time over 100 steps.")


def concat_figures(report: dict) -> dict:
    rows = [r for r in report["systems"] if r["system"] in ("numpy-concat", "numpy-split", "tf-concat", "torch")]
    worst = max(r["worst_ratio"] for r in rows)
    exact = sorted({f"{r['system']} {r['dtype']}" for r in rows
                    if r["worst_ratio"] == 0 or r.get("bitwise_integer_case")})
    return {"worst_concat": f"worst err/bound {ratio(worst)} over {sum(r['cases'] for r in rows)} cases",
            "bitwise": "integer-valued cases: " + ", ".join(exact) if exact else "none measured",
            "speed": speed_sentence()}


def carried_by(name: str) -> str:
    """How a system's chunked runs hand the state on (``docgen.questions.CARRIES``): "converted", a converter's
    model (the modules ``rnn_equivalence.frameworks.*_export``: torch.onnx.export, tf2onnx, TFLite, onnx2tf,
    nobuco, coremltools, MNNConvert, litert-torch, ExecuTorch), the state an input and an output of its graph;
    "layer", a Keras layer, run with ``stateful=True`` too (among its chunked configurations); "caller", a
    framework's own layer or node, its returned state the next call's initial state."""
    from rnn_equivalence.frameworks import ADAPTERS

    cls = ADAPTERS[name]
    if cls.__module__.endswith("_export"):
        return "converted"
    if any(config.option("stateful") for config in cls.chunked_configs):
        return "layer"
    return "caller"


def runs_line(rows: list[dict], kind: str) -> str:
    """Runs of ``kind`` over ``rows``: the systems, their cases, the worst err/bound and a link to its row."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    worst = max(rows, key=lambda r: r[kind]["worst_ratio"])
    return (f"{len(systems)} systems ({grouped(systems)}), {sum(r[kind]['cases'] for r in rows)} cases, worst "
            f"err/bound {ratio(worst[kind]['worst_ratio'])} "
            f"({_report_link(worst['anchor'], worst.get('page', 'EQUIVALENCE.md'))})")


def chunked_figures(report: dict) -> dict:
    """The chunked question's figures, all from the report's ``chunked`` records: the systems run in chunks,
    their runs and worst err/bound, a bullet per way the state is carried, their wrong runs caught, and the
    rows whose chunked runs are all known upstream issues (kept out of the figures)."""
    rows = runs_rows("chunked", report)
    systems = list(dict.fromkeys(r["system"] for r in rows))
    by_carry: dict[str, list[dict]] = {}
    for r in rows:
        by_carry.setdefault(carried_by(r["system"]), []).append(r)
    missing = sorted(set(CARRIES) - set(by_carry))
    if missing:  # the lead names Keras's stateful layers and converted models: each must have run in chunks
        raise AnswerContradicted(f"chunked runs: none of the kind {missing} in the report")
    carries = [f"- {how}: {runs_line(by_carry[key], 'chunked')}." for key, how in CARRIES.items()]
    mutated = [r for r in report["systems"] if r["system"] in systems and r["mutations"]]
    return {"systems": len(systems), "cases": sum(r["chunked"]["cases"] for r in rows),
            "worst": ratio(max(r["chunked"]["worst_ratio"] for r in rows)), "carries": "\n".join(carries),
            "caught": sum(r["mutations_caught"] for r in mutated), "mutations": sum(r["mutations"] for r in mutated),
            "kept_out": kept_out(report, systems)}


def kept_out(report: dict, systems: list[str]) -> str:
    """The rows of systems run in chunks with no chunked figure but known upstream issues: their chunked runs
    were strict expected failures, kept out of the figures."""
    rows = [r for r in report["systems"] if r["system"] in systems and not r["chunked"]["cases"]
            and r["known_issue_cases"]]
    if not rows:
        return ""
    links = ", ".join(_report_link(r["anchor"], r.get("page", "EQUIVALENCE.md")) for r in rows[:2])
    return (f" **Not in these figures:** the chunked runs of {grouped([r['system'] + ' ' + r['dtype'] for r in rows])}"
            f": known upstream issues, strict expected failures, listed in their rows "
            f"({links}{', …' if len(rows) > 2 else ''}).")


# The modules of the systems that run in half, and the framework the half-precision lead names for each.
HALF_FRAMEWORKS = {".pytorch": "PyTorch", ".torch_programs": "PyTorch", ".keras_adapters": "Keras",
                   ".flax_cells": "Flax", ".equinox_cells": "Equinox"}
HALF_MODULES = tuple(HALF_FRAMEWORKS)


def half_frameworks(rows: list[dict]) -> str:
    """The frameworks of the half rows, in ``HALF_FRAMEWORKS``' order, in words ("PyTorch, Keras and Flax")."""
    from rnn_equivalence.frameworks import ADAPTERS

    modules = {"." + ADAPTERS[r["system"]].__module__.rsplit(".", 1)[1] for r in rows}
    names = list(dict.fromkeys(name for module, name in HALF_FRAMEWORKS.items() if module in modules))
    return _and(names) if names else ""


def half_pending(rows: list[dict]) -> str:
    """The frameworks whose systems run in half in this tree (``dtypes``) but have no half row in the report (one
    written before they did), said after the formats' lines; "" where every one has rows."""
    from rnn_equivalence.frameworks import ADAPTERS
    from rnn_equivalence.reference.formats import HALF_FORMATS

    named = half_frameworks(rows)
    in_half = {"." + cls.__module__.rsplit(".", 1)[1] for cls in ADAPTERS.values()
               if set(HALF_FORMATS) & set(cls.dtypes) and not cls.environment}
    pending = list(dict.fromkeys(f for m, f in HALF_FRAMEWORKS.items() if m in in_half and f not in named))
    if not pending:
        return ""
    return (f"\n\n**Run by the suite, not in this report:** the half rows of {_and(pending)}, whose systems run "
            f"in half since the report was written (their plans' `dtypes`); the next full-depth report has them.")


def half_figures(report: dict) -> dict:
    """The half-precision question's figures, from the report's float16 and bfloat16 rows: their systems, cases
    (whole sequences, padded and chunked runs) and worst err/bound, a line per format, and the rows UNPROVEN by
    the wrong mappings their systems pin (``TestPlan.mutations_within_bound``), named. What the lead says of
    them is checked: PyTorch, Keras, Flax and Equinox alone run in half, judged by the bound of float32 within each
    op with half storage (a mixed policy's, XLA's with its composed activations' inner roundings), and no row is in
    another format (int8)."""
    from rnn_equivalence.frameworks import ADAPTERS
    from rnn_equivalence.harness.detection import caught_beyond
    from rnn_equivalence.reference.formats import COMPOSED_ACTIVATION_POLICIES, HALF_FORMATS, MIXED_POLICIES

    rows = dtype_rows(HALF_FORMATS, report)
    where = "half-precision: the lead says"
    others = sorted({f"{r['system']} {r['dtype']}" for r in rows
                     if not ADAPTERS[r["system"]].__module__.endswith(HALF_MODULES)})
    if others:
        raise AnswerContradicted(f"{where} frameworks other than PyTorch, Keras, Flax and Equinox are not in these "
                                 f"rows, but the "
                                 f"report has {', '.join(others)}")
    unjudged = [f"{r['system']} {r['dtype']}" for r in rows
                if r.get("arithmetic") not in {**MIXED_POLICIES, **COMPOSED_ACTIVATION_POLICIES}]
    if unjudged:
        raise AnswerContradicted(f"{where} the rows are judged by float32 arithmetic with half storage, but "
                                 f"{', '.join(unjudged)} is judged by another bound")
    systems = list(dict.fromkeys(r["system"] for r in rows))

    def cases(of: list[dict]) -> int:
        return sum(r["cases"] + r["padded"]["cases"] + r["chunked"]["cases"] for r in of)

    lines = []
    for dtype in HALF_FORMATS:
        of = [r for r in rows if r["dtype"] == dtype]
        if of:
            worst = max(of, key=worst_of)
            lines.append(f"- {dtype}: {len(of)} systems, {cases(of)} cases, worst err/bound {ratio(worst_of(worst))} "
                         f"({_report_link(worst['anchor'])}).")
    unproven = [r for r in rows if pinned(r)]
    cells: dict[str, list[str]] = {}  # each cell's formats, in the framework's words
    for r in unproven:
        cells.setdefault(f"`{r['cell'].removeprefix('torch.')}`", []).append(r["dtype"])
    by_formats: dict[str, list[str]] = {}
    for cell, dtypes in cells.items():
        said = "both formats" if set(dtypes) == set(HALF_FORMATS) else " and ".join(dtypes)
        by_formats.setdefault(said, []).append(cell)
    named = ", ".join(f"{' and '.join(cells_)} in {said}" for said, cells_ in by_formats.items())
    mistakes: dict[str, list[dict]] = {}
    for r in unproven:
        for mutation in ADAPTERS[r["system"]].mutations_within_bound[r["dtype"]]:
            mistakes.setdefault(mutation, []).append(r)
    pinned_lines = [f"- {mutation}: {', '.join(_report_link(r['anchor']) for r in of)}."
                    for mutation, of in mistakes.items()]
    mutated = [r for r in rows if r["mutations"]]
    return {"systems": len(systems), "frameworks": half_frameworks(rows), "pending": half_pending(rows),
            "cases": cases(rows),
            "worst": ratio(max(map(worst_of, rows))),
            "unproven": (f" UNPROVEN in {len(unproven)} rows ({named}), where a wrong mapping stays below half "
                         f"rounding." if unproven and len(cells) <= 3 else
                         f" UNPROVEN in {len(unproven)} rows, where a wrong mapping stays below half rounding (below)."
                         if unproven else ""),
            "formats": "\n".join(lines), "pinned": "\n".join(pinned_lines) or "- none.",
            "wrong_mappings": wrong_mappings_in_half(unproven, mutated, "\n".join(pinned_lines))}


def wrong_mappings_in_half(unproven: list[dict], mutated: list[dict], pinned_lines: str) -> str:
    """What the half rows' wrong mappings show: every one caught, those the five-step mutation case cannot tell from
    half rounding on the one-step case (``one_step_mutation_case``); or the ones a system pins as passing, named."""
    from rnn_equivalence.frameworks import ADAPTERS
    from rnn_equivalence.harness.detection import caught_beyond
    from rnn_equivalence.reference.formats import HALF_FORMATS

    uncaught = sum(r["mutations"] - r["mutations_caught"] for r in mutated)
    mutations = sum(r["mutations"] for r in mutated)
    beyond = f"{max(caught_beyond(d) for d in HALF_FORMATS):g}"
    if not unproven:
        hidden = sorted({(m, r["system"]) for r in mutated
                         for m in ADAPTERS[r["system"]].mutations_within_bound.get(r["dtype"], ())})
        where = "; ".join(f"{m} ({', '.join(s for n, s in hidden if n == m)})"
                          for m in dict.fromkeys(n for n, _ in hidden))
        return (f"**Wrong mappings:** all {mutations} run in half are caught beyond {beyond} times the bound"
                + (f". Those that move the five-step mutation case's outputs by less than half rounding ({where}) are "
                   f"caught on one step from the initial state, where nothing has been rounded before them "
                   f"(tests/equivalence/test_mutations.py)." if hidden else "."))
    return (f"**Not proven:** {uncaught} of the {mutations} wrong mappings run in half pass, each pinned by its "
            f"system as below the bound on the mutation case, so their rows are UNPROVEN while their outputs are "
            f"within the bound; every other is caught beyond {beyond} times the bound:\n{pinned_lines}")


def versions_said(rows: list[dict]) -> str:
    """The rows' versions, the first (the converter's or the framework's) first and the others in parentheses:
    "coremltools 9.0 (torch 2.13.0+cpu)"."""
    seen = list(dict.fromkeys(v.strip() for r in rows for v in r["versions"].split(",")))
    return seen[0] + (f" ({', '.join(seen[1:])})" if len(seen) > 1 else "")


def forward_figures(systems: tuple[str, ...], report: dict) -> dict:
    """The forward pass of ``systems``' rows (``FORWARD``: whole sequences, padded and chunked runs): their
    versions, systems, cases and worst err/bound, and their wrong mappings caught."""
    rows = [r for r in report["systems"] if r["system"] in systems]
    if not rows:
        raise AnswerContradicted(f"the report has no rows of {', '.join(systems)}")
    return {"versions": versions_said(rows), "systems": len({r["system"] for r in rows}),
            "cases": sum(record(r, kind)["cases"] for r in rows for kind in FORWARD),
            "worst": ratio(max(record(r, kind)["worst_ratio"] for r in rows for kind in FORWARD)),
            "caught": sum(r["mutations_caught"] for r in rows), "mutations": sum(r["mutations"] for r in rows)}


# The configuration the Paddle layers' gradients fail in (tests/equivalence/test_paddle.py, GRAD_SETTINGS): a
# failed gradient test of a Paddle layer in any other contradicts the lead.
PADDLE_GRADIENT_SETTING = re.compile(r"-bi-h0-.*-lengths")


def paddle_figures(report: dict) -> dict:
    """The Paddle question's figures: its systems' forward pass (``forward_figures``), and the rows whose gradients
    fail, each a bullet with its gradient record, its failed tests and its link. What the lead says of them is
    checked: every failed gradient test of a layer is of a bidirectional layer given lengths and an initial state."""
    from docgen.questions import PADDLE_CELLS, PADDLE_LAYERS

    values = forward_figures(PADDLE_CELLS + PADDLE_LAYERS, report)
    rows = [r for r in report["systems"] if r["system"] in PADDLE_LAYERS]
    failed = {id(r): [t["test"] for t in r["failed_tests"] if kind_of_test(t["test"]) == "gradients"] for r in rows}
    other = [test for tests in failed.values() for test in tests if not PADDLE_GRADIENT_SETTING.search(test)]
    if other:
        raise AnswerContradicted(f"paddle: the lead says paddle.grad fails for a bidirectional layer given "
                                 f"sequence_length and an initial state, but {other[0]} failed")
    failing = sorted((r for r in rows if r["gradients"]["worst_ratio"] > 1 or failed[id(r)]),
                     key=lambda r: (PADDLE_LAYERS.index(r["system"]), r["dtype"]))
    bullets = []
    for r in failing:
        tests, gradients = failed[id(r)], r["gradients"]
        said = (f"; failed: `{tests[0].split('::')[-1]}`" + (f" and {len(tests) - 1} more" if len(tests) > 1 else "")
                if tests else "")
        bullets.append(f"- {r['system']} {r['dtype']}: gradients err/bound {ratio(gradients['worst_ratio'])} over "
                       f"{gradients['cases']} cases, largest error {gradients['max_error']:.2g}{said} "
                       f"({_report_link(r['anchor'], r.get('page', 'EQUIVALENCE.md'))}).")
    cells = list(dict.fromkeys(f"`{r['cell'].split('.')[-1]}`" for r in failing))
    dtypes = list(dict.fromkeys(r["dtype"] for r in failing))
    return {**values, "failing": f"{_and(cells)} in {_and(dtypes)}" if failing else "none",
            "gradient_worst": ratio(max((r["gradients"]["worst_ratio"] for r in failing), default=0.0)),
            "failing_rows": "\n".join(bullets) or "- none."}


def coreml_figures(report: dict) -> dict:
    """The Core ML question's figures: its systems' forward pass (``forward_figures``) and its LSTM's, the figure
    for coremltools#824. What the lead says of it is checked: the LSTM's rows run bidirectional layers, and a wrong
    mapping that swaps the directions is among those they catch."""
    from docgen.questions import COREML
    from rnn_equivalence.frameworks import ADAPTERS

    values = forward_figures(COREML, report)
    lstm = [r for r in report["systems"] if r["system"] in COREML and r["family"] == "lstm"]
    where = "coreml: the lead says coremltools#824's bidirectional LSTM is not reproduced"
    if not lstm:
        raise AnswerContradicted(f"{where}, but the report has no Core ML LSTM row")
    systems = [ADAPTERS[name] for name in dict.fromkeys(r["system"] for r in lstm)]
    configs = [config for cls in systems for config in cls.configs]
    both = [config for config in configs if config.bidirectional]
    swaps = [name for cls in systems for name in cls.mutations if "forward and backward swapped" in name]
    if not both or not swaps:
        raise AnswerContradicted(f"{where}, but its rows run no bidirectional layer or do not check its directions")
    return {**values, "bidirectional": ratio(max(r["worst_ratio"] for r in lstm)),
            "lstm_cases": sum(r["cases"] for r in lstm), "bidirectional_configs": len(both),
            "lstm_configs": len(configs), "swap": swaps[0]}


def tool_versions(rows: list[dict], tools: tuple[str, ...], where: str) -> str:
    """The one version of each of ``tools`` (distributions) the rows list, "pnnx 20261020 and ncnn 1.0.20261020":
    the converter's and runtime's, not those of the frameworks listed beside them (torch, onnx)."""
    found: dict[str, set[str]] = {}
    for r in rows:
        for entry in r["versions"].split(","):
            name, _, version = entry.strip().partition(" ")
            if name in tools:
                found.setdefault(name, set()).add(version)
    if set(found) != set(tools) or any(len(versions) > 1 for versions in found.values()):
        raise AnswerContradicted(f"{where}: the lead names one version of each of {', '.join(tools)}, but the rows "
                                 f"list {found or 'none'}")
    return _and([f"{name} {found[name].pop()}" for name in tools])


def silent_attributes(report: dict) -> tuple[str, list[dict]]:
    """What the ncnn and MNN lead says MNN computes as another function, from the report's findings of MNN's systems
    of those kinds (``MNN_SILENT``): each finding's node attribute in the ONNX node's words (``MNN_ATTRIBUTES``),
    in their order; and the findings of ``layout=1``, which MNN reads as ``layout=0`` (the note's figure). A
    finding about an attribute the lead has no words for contradicts it, as none at all does."""
    from docgen.questions import MNN, MNN_ATTRIBUTES, MNN_SILENT
    from rnn_equivalence.frameworks import ADAPTERS

    found = [n for n in report["non_equivalences"] if n["system"] in MNN and kind_of(n) in MNN_SILENT]
    where = "ncnn-and-mnn: the lead says MNN computes node attributes as another function"
    if not found:
        raise AnswerContradicted(f"{where}, but the report has no such finding of {', '.join(MNN)}")
    named: dict[str, list[dict]] = {}
    for n in found:
        attribute = n["against"].split(" node with ", 1)[-1]
        prefix = next((p for p in MNN_ATTRIBUTES if attribute.startswith(p)), None)
        if prefix is None:
            raise AnswerContradicted(f"{where}, but it has no words for {n['system']}'s finding {n['against']!r}")
        named.setdefault(prefix, []).append(n)
    families = "/".join(sorted({ADAPTERS[n["system"]].family.upper() for n in named.get("activations ", [])}))
    said = [MNN_ATTRIBUTES[p].format(families=families) for p in MNN_ATTRIBUTES if p in named]
    return _and(said), named.get("layout=1", [])


def ncnn_mnn_figures(report: dict) -> dict:
    """The ncnn and MNN question's figures: each tool's versions and its systems' worst err/bound over the forward
    pass (``forward_figures``), and what MNN computes as another function (``silent_attributes``). What the lead
    says of the systems is checked: ncnn's RNN runs tanh alone (relu refused), MNN's nodes are forward or
    bidirectional, both run, and ``layout=0``."""
    from docgen.questions import MNN, MNN_TOOLS, NCNN, NCNN_TOOLS
    from rnn_equivalence.frameworks import ADAPTERS

    where = "ncnn-and-mnn: the lead says"
    relu = [name for name in NCNN if "relu" in ADAPTERS[name].activations]
    if relu:
        raise AnswerContradicted(f"{where} relu is refused, but {', '.join(relu)} runs it")
    configs = [config for name in MNN for config in ADAPTERS[name].configs]
    directions = {config.option("direction", "forward") for config in configs}
    if directions != {"forward", "bidirectional"} or {config.option("layout", 0) for config in configs} != {0}:
        raise AnswerContradicted(f"{where} MNN's rows are forward and bidirectional layout=0 nodes, but its systems "
                                 f"run directions {sorted(directions)}")
    silent, layout = silent_attributes(report)
    if not layout:
        raise AnswerContradicted(f"{where} MNN reads a layout=1 node as layout=0, but the report has no such row")
    worst = max(layout, key=lambda n: n["ratio"])
    ncnn = [r for r in report["systems"] if r["system"] in NCNN]
    mnn = [r for r in report["systems"] if r["system"] in MNN]
    return {"ncnn_versions": tool_versions(ncnn, NCNN_TOOLS, f"{where} ncnn's versions"),
            "ncnn_worst": forward_figures(NCNN, report)["worst"],
            "mnn_versions": tool_versions(mnn, MNN_TOOLS, f"{where} MNN's version"),
            "mnn_worst": forward_figures(MNN, report)["worst"], "silent": silent,
            "layout": f"err/bound {ratio(worst['ratio'])}: "
                      f"{_report_link(worst['anchor'], worst.get('page', 'EQUIVALENCE.md'))}"}


def unrolled_figures(anchor: str, names: tuple[str, ...], report: dict) -> dict:
    """The figures of a question about converted PyTorch layers whose every step is unrolled (litert-torch,
    ExecuTorch: ``torch.export``'s decomposition): its systems' forward pass (``forward_figures``), each family's
    worst err/bound and the chunked runs. What such a lead says of the models is checked against the systems and
    rows: none declares a recurrent op (their tests hold every model to ``operators``), none takes padded batches,
    each runs stacked and bidirectional layers, the LSTM a projection, and every row has chunked runs."""
    from rnn_equivalence.frameworks import ADAPTERS

    values = forward_figures(names, report)
    rows = [r for r in report["systems"] if r["system"] in names]
    systems = [ADAPTERS[name] for name in names]
    where = f"{anchor}: the lead says"
    fused = [f"{cls.name} ({', '.join(sorted(cls.operators))})" for cls in systems if cls.operators]
    if fused:
        raise AnswerContradicted(f"{where} every step is unrolled, but {', '.join(fused)} declares recurrent ops")
    padded = ([cls.name for cls in systems if cls.padded_configs]
              + [f"{r['system']} {r['dtype']}" for r in rows if r["padded"]["cases"]])
    if padded:
        raise AnswerContradicted(f"{where} packed sequences are refused (no padded batches), but "
                                 f"{', '.join(padded)} runs them")
    flat = [cls.name for cls in systems if not any(config.num_layers > 1 for config in cls.configs)
            or not any(config.bidirectional for config in cls.configs)]
    lstm = [cls.name for cls in systems if cls.family == "lstm" and "projection" in cls.options]
    if flat or not lstm:
        raise AnswerContradicted(f"{where} stacked and bidirectional layers and an LSTM's `proj_size`, but "
                                 f"{', '.join(flat) or 'no LSTM system runs a projection'}")
    unchunked = [f"{r['system']} {r['dtype']}" for r in rows if not r["chunked"]["cases"]]
    if unchunked:
        raise AnswerContradicted(f"{where} chunked runs are included, but {', '.join(unchunked)} has none")
    by_family = _and([f"{forward_figures((cls.name,), report)['worst']} for the {cls.family.upper()}"
                      for cls in systems])
    chunked = (f"{sum(r['chunked']['cases'] for r in rows)} chunked runs up to "
               f"{ratio(max(r['chunked']['worst_ratio'] for r in rows))}")
    return {**values, "by_family": by_family, "chunked": chunked}


def per_step(ops: dict) -> str:
    """The ops one unrolled step holds, by count: "3 `LOGISTIC` and 2 `TANH`"."""
    return " and ".join(f"{n} `{op}`" for op, n in ops.items())


def litert_figures(report: dict) -> dict:
    """The litert-torch question's figures (``unrolled_figures``), and the nonlinearities one step holds once
    unrolled (the module's ``STEP_OPS``, which its tests count)."""
    from docgen.questions import LITERT
    from rnn_equivalence.frameworks.litert_torch_export import STEP_OPS

    logistic = STEP_OPS["lstm"]["LOGISTIC"] * 2 * 2  # per step of the note's two-layer bidirectional LSTM
    return {**unrolled_figures("litert-torch", LITERT, report), "lstm_short": 2 * logistic,
            "lstm_long": 12 * logistic,
            "step_ops": f"an LSTM's {per_step(STEP_OPS['lstm'])}, a GRU's {per_step(STEP_OPS['gru'])}, a tanh "
                        f"RNN's {per_step(STEP_OPS['rnn']['tanh'])}; a relu RNN's relu is fused into its "
                        "`FULLY_CONNECTED`"}


def executorch_figures(report: dict) -> dict:
    """The ExecuTorch question's figures (``unrolled_figures``), and the nonlinearities one step calls once unrolled
    (the module's ``STEP_CALLS``, which its tests count)."""
    from docgen.questions import EXECUTORCH
    from rnn_equivalence.frameworks.executorch_export import STEP_CALLS

    return {**unrolled_figures("executorch", EXECUTORCH, report),
            "step_calls": f"an LSTM's {per_step(STEP_CALLS['lstm'])}, a GRU's {per_step(STEP_CALLS['gru'])}, an "
                          f"RNN's {' or '.join(per_step(calls) for calls in STEP_CALLS['rnn'].values())}"}


def noxfile_pins(name: str, path: Path | None = None) -> dict:
    """The distributions a nox session installs, by name, as its tuple ``name`` pins them (``ONNX2TORCH``)."""
    path = path or ROOT / "noxfile.py"
    found = re.search(rf"^{name} = \((.*?)\)$", path.read_text(), re.M | re.S)
    pins = dict(re.findall(r'"([\w.-]+)==([\w.+]+)"', found.group(1))) if found else {}
    if not pins:
        raise AnswerContradicted(f"{path}: no pinned versions in {name}")
    return pins


def onnx2torch_figures(report: dict) -> dict:
    """The onnx2torch question's figures, from what its tests run (no systems, no report): the version its session
    pins (noxfile.py), the operators and the refusal the tests pin (frameworks/onnx2torch_export.py)."""
    from rnn_equivalence.frameworks.onnx2torch_export import ISSUE, NODES, PULL_REQUEST, REFUSAL

    pins = noxfile_pins("ONNX2TORCH")
    if "onnx2torch" not in pins:  # the lead names the one release its tests ran on
        raise AnswerContradicted("onnx2torch: the lead names the release its tests ran on, but noxfile.py's "
                                 "ONNX2TORCH pins no onnx2torch version")
    return {"version": pins["onnx2torch"], "operators": _and([f"`{op}`" for op in dict.fromkeys(NODES.values())]),
            "issue": ISSUE, "pull_request": PULL_REQUEST, "refusal": REFUSAL.split(" (")[0],
            "message": REFUSAL.format(op="LSTM", version="…"),
            "nodes": ", ".join(f"{system} (`{op}`)" for system, op in NODES.items()),
            "pinned": ", ".join(f"{name} {version}" for name, version in pins.items())}


FIGURES_OF = {"concat-vs-split": concat_figures, "chunked-and-stateful": chunked_figures,
              "half-precision": half_figures, "paddle": paddle_figures, "coreml": coreml_figures,
              "onnx2torch": onnx2torch_figures, "ncnn-and-mnn": ncnn_mnn_figures, "litert-torch": litert_figures,
              "executorch": executorch_figures}


def figures(question: Question, report: dict) -> dict:
    """The figures a question's words name, computed from the report when the page is generated."""
    return FIGURES_OF[question.anchor](report) if question.anchor in FIGURES_OF else {}


def notes(question: Question, report: dict) -> list[str]:
    """The notes, their figures filled in from the report."""
    values = figures(question, report) if question.notes else {}
    return [note.format(**values) for note in question.notes]


# --- differences, evidence, citation -------------------------------------------------------------------------

def grouped(names: list[str], shown: int = 3) -> str:
    names = list(dict.fromkeys(names))
    return ", ".join(names) if len(names) <= shown + 1 else f"{', '.join(names[:shown])} and {len(names) - shown} more"


def differences(question: Question, report: dict) -> list[str]:
    """Each difference the question's subject takes once: its kind, its systems grouped, its largest ratio and
    absolute difference, a link to one of its rows."""
    if not question.differences:
        return []
    kinds: dict[str, list[dict]] = {}
    for n in report["non_equivalences"]:
        if question.differences.matches(n):
            kinds.setdefault(kind_of(n), []).append(n)
    lines = []
    for kind, found in kinds.items():
        worst = max(found, key=lambda n: n["ratio"])
        what = kind.replace("{system} ", "") if "{system}" in kind else kind
        detail = worst["reason"].split(":", 1)[1].strip() if ":" in worst["reason"] else ""
        lines.append(f"- {what}{': ' + detail if detail and '{system}' not in kind else ''} "
                     f"({grouped([n['system'] for n in found])}; err/bound up to {ratio(worst['ratio'])}, "
                     f"largest difference {worst['max_difference']:.2g}; "
                     f"{_report_link(worst['anchor'], worst.get('page', 'EQUIVALENCE.md'))})")
    return lines


def evidence_row(a: str, b: str, report: dict) -> str:
    result = answer_from_report(a, b, report)
    rows = [r for r in report["systems"] if r["system"] in (a, b)]
    worst = max(rows, key=lambda r: r["worst_ratio"])
    largest = max(r["max_error"] for r in rows)
    links = ", ".join(_report_link(r["anchor"], r.get("page", "EQUIVALENCE.md")) for r in rows)
    versions = "; ".join(dict.fromkeys(r["versions"] for r in rows))
    verdict = result.verdict + (f" ({short_reason(result.verdict, result.reason)})" if result.verdict != "Yes" else "")
    return (f"| {a} and {b} | {verdict} | {sum(r['cases'] for r in rows)} | {ratio(worst['worst_ratio'])} | "
            f"{largest:.2g} | {versions} | {links} |")


def evidence(question: Question, report: dict) -> list[str]:
    return ["| pair | answer | cases | [worst err/bound](" + FIGURES + ") | largest abs. error | versions | rows |",
            "|---|---|---|---|---|---|---|"] + [evidence_row(a, b, report) for a, b in question.pairs]


def known_issues(question: Question, report: dict) -> list[str]:
    systems = {name for pair in question.pairs for name in pair}
    issues: dict[str, list[str]] = {}
    for r in report["systems"]:
        if r["system"] in systems:
            for issue in r["known_issues"]:
                issues.setdefault(issue, []).append(f"{r['system']} {r['dtype']}")
    return [f"- {issue} ({grouped(where)})" for issue, where in issues.items()]


def versions_of(question: Question, report: dict) -> str:
    systems = {name for pair in question.pairs for name in pair}
    seen = dict.fromkeys(v.strip() for r in report["systems"] if r["system"] in systems
                         for v in r["versions"].split(","))
    return ", ".join(seen)


def cited_tests(question: Question, report: dict, root: Path = ROOT) -> list[str]:
    """The tests the answer states the findings of (``Question.tests``), a bullet per file; each must be in its
    file, and none among the report's failed tests (a test that failed no longer proves what the answer says)."""
    failed = {name_of_test(t["test"]): f"{r['system']} {r['dtype']}" for r in report["systems"]
              for t in r["failed_tests"]}
    lines = []
    for path, names in question.tests:
        text = (root / path).read_text()
        for name in names:
            if not re.search(rf"^def {name}\(", text, re.M):
                raise AnswerContradicted(f"{question.anchor}: the answer cites {path}::{name}, which is not there")
            if name in failed:
                raise AnswerContradicted(f"{question.anchor}: the answer states what {path}::{name} proves, but it "
                                         f"failed ({failed[name]})")
        lines.append(f"- `{path}`: " + ", ".join(f"`{name}`" for name in names) + ".")
    return lines


def cite(question: Question, report: dict) -> str:
    if not question.pairs:  # answered from its tests alone: no systems, no report
        files = ", ".join(path for path, _ in question.tests)
        return (f"Cite this: rnn-equivalence, docs/ANSWERS.md#{question.anchor}; {files}, on "
                f"{figures(question, report)['pinned']}: no systems, so no report. Re-check on your versions: "
                f"`{question.recheck}`.")
    a, b = question.pairs[0]
    commit = report.get("commit") or "not recorded in this report"
    return (f"Cite this: rnn-equivalence, docs/ANSWERS.md#{question.anchor}; report of {report['date']} (depth "
            f"{report['depth']}, seed {report['seed']}, commit {commit}); {versions_of(question, report)}. "
            f"Re-check on your versions: `rnn-equivalence compare {a} {b} --depth=full`.")


def convert_line(question: Question, report: dict) -> list[str]:
    """The one-liner for people who install the suite, for the question's first pair the mapping holds."""
    for a, b in question.pairs or (question.maps,):
        if (question.maps == (a, b) or answer_from_report(a, b, report).verdict != "No") and mapping_lines(a, b)[1] is None:
            return ["With the suite installed, one call maps the weights (a one-layer, one-direction module):", "",
                    "```python", "from rnn_equivalence.frameworks import convert",
                    "from rnn_equivalence.reference.config import LayerConfig",
                    f"b_weights = convert(a_weights, {a!r}, {b!r}, config=LayerConfig(1, False))", "```", ""]
    return []


def question_section(question: Question, report: dict) -> list[str]:
    report = read_by(question, report)
    lines = [f"## <a id=\"{question.anchor}\"></a>{question.title}", "", lead(question, report), "",
             "```math", question.formula, "```", ""]
    for note in notes(question, report):
        lines += [note, ""]
    if question.snippet:
        lines += ["```python", question.snippet.rstrip("\n"), "```", ""]
    lines += convert_line(question, report)
    if question.caveat:
        lines += [f"**Caveat:** {question.caveat}", ""]
    tests = cited_tests(question, report)
    if tests:
        lines += ["Tests that prove what the answer says:", ""] + tests + [""]
    found = differences(question, report)
    if found:
        lines += ["Differences proved (same weights, different outputs):", ""] + found + [""]
    if question.pairs:
        lines += evidence(question, report) + [""]
    issues = known_issues(question, report)
    if issues:
        lines += (["Known upstream issues met (strict expected failures, kept out of the worst ratio):", ""]
                  + issues + [""])
    lines += [cite(question, report), ""]
    return lines


# --- every system against its family's anchor ---------------------------------------------------------------

def has_known_issue(name: str, report: dict) -> bool:
    return any(r["known_issue_cases"] or not (r["verdict"].startswith("equivalent") or pinned(r))
               for r in report["systems"] if r["system"] == name)


def anchored(report: dict) -> list[tuple[str, str]]:
    """Every system of the report against its family member's anchor: PyTorch's where it has no known issue,
    else the first member with none (a known issue of the anchor would be read as every other's)."""
    from rnn_equivalence.frameworks import ADAPTERS

    systems = sorted({row["system"] for row in report["systems"]})
    groups: dict[tuple[str, str], list[str]] = {}
    for name in systems:
        cls = ADAPTERS[name]
        groups.setdefault((cls.family, cls.variant), []).append(name)
    pairs = []
    for members in groups.values():
        clean = [name for name in members if not has_known_issue(name, report)] or members
        anchor = next((name for name in clean if name.startswith("torch")), clean[0])
        pairs += [(anchor, name) for name in members if name != anchor]
    return pairs


def short_reason(verdict: str, reason: str, limit: int = CELL_CHARACTERS - 40) -> str:
    """A reason cut to its first clause, for a table cell (the whole reason is in the linked row)."""
    if verdict == "Yes":
        found = re.search(r"\((\d+) cases, worst err/bound ([^)]*)\)", reason)
        return f"{found.group(1)} cases, worst err/bound {found.group(2)}" if found else ""
    text = re.sub(r"^Only (with the setting the suite runs|where no known upstream issue applies): ", "", reason)
    text = re.sub(r"^\S+ float(16|32|64): ", "", text)  # the row it comes from: linked
    text = re.sub(r"^Both compute the .*? cell within their bounds, but ", "", text)
    while re.search(r" ?\([^()]*\)", text):  # parenthesised sources and formulas, innermost first
        text = re.sub(r" ?\([^()]*\)", "", text)
    text = re.split(r"(?<=[a-z0-9])(?:: |; |\. )", text)[0]
    return text if len(text) <= limit else text[:limit - 1].rsplit(" ", 1)[0] + "…"


def dtype_cell(a: str, b: str, dtype: str, report: dict, refusal) -> str:
    from rnn_equivalence.frameworks import ADAPTERS

    rows = [r for r in report["systems"] if r["system"] in (a, b) and r["dtype"] == dtype]
    if {r["system"] for r in rows} != {a, b}:
        missing = sorted({a, b} - {r["system"] for r in rows})
        return f"not run ({', '.join(missing)}: no {dtype})"
    verdict, reason = decide(ADAPTERS[a], ADAPTERS[b], rows, refusal)
    row_b = next(r for r in rows if r["system"] == b)  # on its own environment's page where it ran there
    known = " (known issue)" if reason.startswith("Only where no known upstream issue applies") else ""
    cell = f"{verdict}{known}: {short_reason(verdict, reason)}".rstrip(": ")
    return (f"{cell} ([row]({row_b.get('page', 'EQUIVALENCE.md')}#{row_b['anchor']}))" if verdict != "Yes"
            else cell)


def anchor_table(report: dict) -> list[str]:
    lines = ["## <a id=\"every-pair\"></a>Every system against its family's anchor", "",
             "The anchor is the family's PyTorch system, or its first system with no known issue. Yes: within "
             "the derived bound in that dtype; a known issue of B gives Only if, with the issue.", "",
             "| A | B | float32 | float64 |", "|---|---|---|---|"]
    for a, b in anchored(report):
        refusal = mapping_lines(a, b)[1]
        cells = [dtype_cell(a, b, dtype, report, refusal) for dtype in ("float32", "float64")]
        lines.append(f"| {a} | {b} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return lines


# --- the page ----------------------------------------------------------------------------------------------

def _and(names: list[str]) -> str:
    """"a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def page(report: dict) -> str:
    """The page for the committed ``report`` (the rows of its environments' own reports merged in)."""
    env = report["environment"]
    report = with_environments(report)
    unread = sorted({r["dtype"] for r in report["systems"]} - {d for q in QUESTIONS for d in q.dtypes})
    if unread:  # the half-precision lead says int8 is not checked yet: rows in it need a question that reads them
        raise AnswerContradicted(f"the report has rows in {', '.join(unread)}, which no question reads")
    lines = ["# Answers", "",
             f"Generated by `python -m docgen.answers` from [equivalence.json](equivalence.json), the committed "
             f"report (depth {report['depth']}, seed {report['seed']}, {report['date']}, "
             f"{', '.join(f'{k} {v}' for k, v in env['versions'].items())}; Python {env['python']}), never edited "
             "by hand. Each answer gives its verdict first, for the frameworks' default settings, then the formula "
             "that explains it, the mapping in your frameworks ending in a check, and the evidence. "
             "`rnn-equivalence compare A B` answers again on the versions you have. "
             + (f"{_and(sorted(report['elsewhere']))} are answered from their own environments' full-depth "
                "reports, linked." if report.get("elsewhere") else ""), "",
             "## <a id=\"reading-the-figures\"></a>Reading the figures", "",
             "- **err/bound**: the largest error against the float64 reference divided by its derived rounding "
             "bound ([TOLERANCES.md](TOLERANCES.md)). At most 1: the same function within rounding.",
             "- **largest abs. error**: that error itself, in the outputs' units.",
             "- **inf**: a difference where the bound is 0, e.g. an exact zero on a padded step against a "
             "repeated output.",
             "- **bitwise**: equal to the last bit, checked where every partial sum is exact (integer-valued "
             "cases); **within rounding**: err/bound ≤ 1.",
             "- **Yes / No / Only if**: the same function once the weights are mapped / a different function, or "
             "a case beyond its bound / the same function under the condition said.", "",
             "## Questions", ""]
    lines += [f"- [{q.title}](#{q.anchor})" for q in QUESTIONS]
    lines += ["- [Every system against its family's anchor](#every-pair)", ""]
    for question in QUESTIONS:
        lines += question_section(question, report)
    lines += anchor_table(report)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    report = json.loads(Path(argv[0] if argv else REPORT).read_text())
    out = Path(argv[1]) if len(argv) > 1 else PAGE
    out.write_text(page(report))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
