"""docs/ANSWERS.md is generated from the committed report, never edited: regenerated here and held equal,
so an answer cannot cite a system, figure, date or version the report does not have. And each answer is
built by the rule ``compare`` uses, which these tests hold to its cases (Yes, No, Only if)."""

import json
from pathlib import Path

from rnn_equivalence.frameworks import ADAPTERS
from docgen.answers import PAGE, QUESTIONS, REPORT, anchored, page, with_environments
from rnn_equivalence.compare import decide

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_answers_are_the_committed_reports():
    report = json.loads(REPORT.read_text())
    assert PAGE.read_text() == page(report), (
        "docs/ANSWERS.md differs from what the committed report gives; regenerate with: python -m docgen.answers")


def test_every_question_is_about_systems_the_report_has():
    """The committed report's, or those of its environments' own reports (``with_environments``)."""
    report = with_environments(json.loads(REPORT.read_text()))
    listed = {row["system"] for row in report["systems"]}
    assert QUESTIONS
    for question in QUESTIONS:
        assert question.pairs or (question.tests and question.recheck), question.anchor  # answered from its tests
        for a, b in question.pairs:
            assert {a, b} <= listed, (question.anchor, a, b)
            assert ADAPTERS[a].family == ADAPTERS[b].family, (question.anchor, a, b)
    assert len({q.anchor for q in QUESTIONS}) == len(QUESTIONS)
    pairs = anchored(report)
    assert pairs and all(ADAPTERS[a].family == ADAPTERS[b].family for a, b in pairs)


def row(system, dtype="float32", verdict="equivalent", known=()):
    return {"system": system, "dtype": dtype, "verdict": verdict, "known_issue_cases": len(known),
            "known_issues": list(known), "cases": 4, "worst_ratio": 0.1}


def test_the_rule():
    torch_gru, keras_gru, keras_before = (ADAPTERS[n]
                                          for n in ("torch-gru", "keras-tf-gru", "keras-tf-gru-reset-before"))
    both = [row("torch-gru"), row("keras-tf-gru")]
    assert decide(torch_gru, keras_gru, both, None)[0] == "Yes"
    assert decide(torch_gru, keras_gru, both, "no slot for b_hn")[0] == "Only if"
    assert decide(torch_gru, keras_before, [row("torch-gru"), row("keras-tf-gru-reset-before")], None)[0] == "No"
    assert decide(torch_gru, keras_gru, [row("torch-gru")], None)[0] == "No"  # one side never ran
    assert decide(torch_gru, keras_gru, [row("torch-gru"), row("keras-tf-gru", verdict="NOT equivalent")],
                  None)[0] == "No"
    ort, openvino = ADAPTERS["onnx-ort"], ADAPTERS["onnx-openvino"]
    verdict, reason = decide(ort, openvino, [row("onnx-ort"), row("onnx-openvino")], None)
    assert verdict == "Only if" and "INFERENCE_PRECISION_HINT=f32" in reason  # OpenVINO's runs_with
    noted = row("keras-tf-gru", "float64", "NOT equivalent where noted below", ("float64 computed in float32",))
    verdict, reason = decide(torch_gru, keras_gru, both + [noted], None)
    assert verdict == "Only if" and "float64 computed in float32" in reason


# --- the page's rules (issue 33): each is a test on the generated page ---------------------------------------

import copy
import re

import pytest

from docgen.answers import (AnswerContradicted, CELL_CHARACTERS, LEAD_WORDS, check_claim, has_known_issue, lead,
                             lead_for, plain, question_section, short_reason, words)
from docgen.questions import Claim, Question, subject

COMMITTED = with_environments(json.loads(REPORT.read_text()))


def sections(text: str) -> dict[str, list[str]]:
    """Each question's lines on the page, by its anchor."""
    found, current = {}, None
    for line in text.splitlines():
        heading = re.match(r'## <a id="([^"]+)"></a>', line)
        if heading:
            current = heading.group(1)
            found[current] = []
        elif line.startswith("## "):
            current = None
        if current:
            found[current].append(line)
    return found


PAGE_SECTIONS = sections(PAGE.read_text())


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.anchor for q in QUESTIONS])
def test_the_lead_is_the_first_paragraph_and_short(question):
    lines = PAGE_SECTIONS[question.anchor]
    first = lines[2]
    assert first == lead(question, COMMITTED)
    assert re.match(r"\*\*(Yes|No|Only if)\*\*", first), first
    assert words(first) <= LEAD_WORDS, f"{question.anchor}: {words(first)} words"


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.anchor for q in QUESTIONS])
def test_a_lead_names_no_suite_system(question):
    """Leads speak in the frameworks' own words: `reset_after=False`, not keras-tf-gru-reset-before."""
    first = PAGE_SECTIONS[question.anchor][2]
    named = [name for name in ADAPTERS if "-" in name or name in ("tf1",)
             if re.search(rf"(?<![\w.`/-]){re.escape(name)}(?![\w-])", first)]
    assert not named, f"{question.anchor}: {named}"


def test_every_only_if_carries_its_condition_in_the_same_sentence():
    for anchor, lines in PAGE_SECTIONS.items():
        for sentence in re.findall(r"\*\*Only if\*\*([^.]*)", lines[2]) if anchor != "every-pair" else []:
            condition = sentence.split(":")[0].strip()
            assert condition and not condition.startswith("for"), (anchor, sentence)


def test_training_and_forward_pass_get_their_own_verdicts_where_they_differ():
    by_anchor = {q.anchor: q for q in QUESTIONS}
    for anchor in ("one-bias-or-two", "gradients-and-steps"):
        verdicts = {claim.about: claim.verdict for claim in by_anchor[anchor].claims}
        assert len(verdicts) == 2 and set(verdicts.values()) == {"Yes", "No"}, verdicts


def with_finding(report, **finding):
    report = copy.deepcopy(report)
    report["non_equivalences"].append({"anchor": "x", "max_difference": 0.5, "ratio": 1e5, **finding})
    return report


def test_a_yes_with_a_difference_proved_on_its_subject_stops_the_generator():
    """Watched red: the exporters' Yes, with a difference between an exporter and its source proved."""
    question = next(q for q in QUESTIONS if q.anchor == "exporters")
    lead(question, COMMITTED)  # as committed: holds
    broken = with_finding(COMMITTED, system="torch-onnx-dynamo", against="torch-rnn",
                          reason="the exporter drops the second bias: outputs differ")
    with pytest.raises(AnswerContradicted, match="exporters: the lead says Yes"):
        lead(question, broken)


def test_a_no_with_nothing_proved_stops_the_generator():
    question = next(q for q in QUESTIONS if q.anchor == "hard-sigmoid")
    unproved = copy.deepcopy(COMMITTED)
    unproved["non_equivalences"] = [n for n in unproved["non_equivalences"] if "hard_sigmoid" not in n["reason"]]
    with pytest.raises(AnswerContradicted, match="hard-sigmoid: the lead says No"):
        lead(question, unproved)


def test_a_claim_needs_a_known_verdict_and_an_only_if_its_condition():
    question = QUESTIONS[0]
    with pytest.raises(AnswerContradicted, match="no condition"):
        check_claim(question, Claim("Only if", "x", proof=subject(kinds=("Adam's defaults",))), COMMITTED)
    with pytest.raises(AnswerContradicted, match="expected Yes, No or Only if"):
        check_claim(question, Claim("Maybe", "x"), COMMITTED)


def test_findings_are_matched_by_kind_and_reference_not_by_a_word():
    """A hard_sigmoid finding ("clip(0.2 z + 0.5 ...") never lands under the clipping question."""
    clips = next(q for q in QUESTIONS if q.anchor == "clips-and-peepholes")
    sigmoid = next(n for n in COMMITTED["non_equivalences"] if "'hard_sigmoid' is clip" in n["reason"])
    assert "clip" in sigmoid["reason"] and not clips.differences.matches(sigmoid)
    assert not any("hard_sigmoid" in line for line in PAGE_SECTIONS["clips-and-peepholes"])
    padded = next(q for q in QUESTIONS if q.anchor == "padded-steps")
    assert all(padded.differences.matches(n) == (n["against"] in padded.differences.against)
               for n in COMMITTED["non_equivalences"])


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.anchor for q in QUESTIONS])
def test_one_formula_before_any_code_and_at_most_60_lines_before_the_evidence(question):
    lines = PAGE_SECTIONS[question.anchor]
    fences = [line for line in lines if line.startswith("```") and line != "```"]
    assert fences[0] == "```math" and fences.count("```math") == 1, fences
    table = next(i for i, line in enumerate(lines) if line.startswith("| pair | answer |")
                 or (not question.pairs and line == "Tests that prove what the answer says:"))  # no rows: its tests
    assert table <= 60, f"{question.anchor}: {table} lines before its evidence table"


def repeats(section: list[str]) -> list[str]:
    """The sentences and bullets a section says more than once (a bullet by its words before its figures)."""
    lines = [line for line in section if line.strip() and not line.startswith("```")]
    prose = [line for line in lines if not line.startswith(("|", "import", "from", "#", " ", "- "))]
    bullets = [re.sub(r" \(.*", "", line) for line in lines if line.startswith("- ")]
    return [line for said in (prose, bullets) for line in dict.fromkeys(said) if said.count(line) > 1]


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.anchor for q in QUESTIONS])
def test_each_sentence_and_each_pair_once(question):
    section = PAGE_SECTIONS[question.anchor]
    assert not repeats(section)
    rows = [line.split("|")[1] for line in section if line.startswith("| ") and " and " in line.split("|")[1]]
    assert len(rows) == len(set(rows)) == len(question.pairs)


def test_a_repeated_difference_is_caught():
    """Watched red: a difference listed twice, as the old page listed one per system."""
    question = next(q for q in QUESTIONS if q.anchor == "padded-steps")
    section = question_section(question, COMMITTED)
    bullet = next(line for line in section if line.startswith("- "))
    assert not repeats(section) and repeats(section + [bullet.replace("(", "(other systems; ", 1)])


def test_every_figure_is_explained_before_its_first_use():
    text = PAGE.read_text()
    explained = text.index('<a id="reading-the-figures">')
    for term in ("**err/bound**", "**largest abs. error**", "**inf**", "**bitwise**", "within rounding"):
        assert explained < text.index(term) < text.index('<a id="concat-vs-split">'), term
    for anchor, lines in PAGE_SECTIONS.items():
        headers = [line for line in lines if line.startswith("| pair | answer |")]
        assert all("(#reading-the-figures)" in line and "largest abs. error" in line for line in headers), anchor


@pytest.mark.parametrize("question", QUESTIONS, ids=[q.anchor for q in QUESTIONS])
def test_each_question_can_be_cited(question):
    cite = [line for line in PAGE_SECTIONS[question.anchor] if line.startswith("Cite this: ")]
    assert len(cite) == 1
    report = json.loads(REPORT.read_text())
    if not question.pairs:  # no systems, so no report: its tests, the versions they run on, how to run them again
        assert all(path in cite[0] for path, _ in question.tests) and f"`{question.recheck}`" in cite[0], cite[0]
        return
    assert report["date"] in cite[0] and f"depth {report['depth']}" in cite[0] and "commit " in cite[0]
    assert "`rnn-equivalence compare " in cite[0] and "--depth=full`" in cite[0]
    for a, b in question.pairs[:1]:
        for row in COMMITTED["systems"]:
            if row["system"] in (a, b):
                assert all(v.strip() in cite[0] for v in row["versions"].split(",")), row["versions"]


def test_the_founding_question_answers_what_was_asked():
    text = "\n".join(PAGE_SECTIONS["concat-vs-split"])
    assert "H·H + H·I" in text  # the parameter count
    assert "**What is lost:** nothing" in text
    assert "torch 0.54" in text and "torch 0.92" in text  # the benchmark's medians, quoted from BENCHMARKS.md
    assert "`[x; h]`, inputs first" in text  # TF1's order


def test_the_anchor_table_anchors_on_systems_without_known_issues_with_short_cells():
    lines = [line for line in PAGE.read_text().split('<a id="every-pair">')[1].splitlines() if line.startswith("| ")]
    assert lines[0] == "| A | B | float32 | float64 |"
    anchors = {line.split(" | ")[0].lstrip("| ") for line in lines[2:]}
    assert anchors and not any(has_known_issue(name, COMMITTED) for name in anchors), anchors
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        assert len(cells) == 4 and all(len(cell) <= CELL_CHARACTERS for cell in cells), line


def test_a_long_reason_is_cut_to_its_first_clause():
    reason = ("Only where no known upstream issue applies: keras-jax float64: Keras 3 on jax computes tanh of float64 "
              "in float32: keras.ops.tanh promotes (keras/src/backend/jax/numpy.py: " + "x" * 1500 + ")")
    assert short_reason("Only if", reason) == "Keras 3 on jax computes tanh of float64 in float32"


def test_compare_prints_the_pages_lead_for_its_pair():
    from rnn_equivalence.compare import answer_from_report, text

    question, words_ = lead_for("torch-gru", "keras-tf-gru")
    assert question.anchor == "gru-variants" and words_ == PAGE_SECTIONS["gru-variants"][2]
    assert lead_for("keras-tf-gru", "torch-gru")[1] == words_  # either order
    result = answer_from_report("torch-gru", "keras-tf-gru", COMMITTED)
    printed = " ".join(text(result, 10_000, (question.anchor, plain(words_))))
    assert plain(words_) in printed and "**" not in printed
    assert lead_for("torch", "numpy-split") is None  # no question about the pair: no lead


# --- stateful and chunked runs (issue 36): the lead is the report's chunked records ---------------------------

from docgen.answers import carried_by, ratio, read_by, runs_rows

CHUNKED = next(q for q in QUESTIONS if q.anchor == "chunked-and-stateful")


def test_the_chunked_lead_quotes_the_reports_chunked_records():
    """Its figures are read from the report when the page is generated, never typed in: change a chunked row
    (within its bound) and the lead changes with it. Its rows are float32's and float64's (``read_by``)."""
    rows = runs_rows("chunked", read_by(CHUNKED, COMMITTED))
    first = PAGE_SECTIONS[CHUNKED.anchor][2]
    assert first.startswith("**Yes**: a sequence run in chunks")
    assert f"on all {len({r['system'] for r in rows})} systems run so" in first
    assert (f"({sum(r['chunked']['cases'] for r in rows)} cases, worst err/bound "
            f"{ratio(max(r['chunked']['worst_ratio'] for r in rows))})") in first
    changed = copy.deepcopy(COMMITTED)
    row = next(r for r in changed["systems"] if r["chunked"]["cases"] and r["dtype"] in ("float32", "float64"))
    row["chunked"]["worst_ratio"], row["chunked"]["cases"] = 0.875, row["chunked"]["cases"] + 1000
    again = lead(CHUNKED, changed)
    assert "worst err/bound 0.875)" in again and f"({sum(r['chunked']['cases'] for r in rows) + 1000} cases" in again


def chunked_row(report, prefix):
    return next(r for r in report["systems"] if r["chunked"]["cases"] and r["system"].startswith(prefix)
                and r["dtype"] == "float32")


def beyond_its_bound(report):
    chunked_row(report, "tflite-")["chunked"]["worst_ratio"] = 3.5


def a_chunked_test_failed(report):  # an error before any comparison was recorded: no ratio to read
    chunked_row(report, "torch-onnx-")["failed_tests"].append(
        {"test": "tests/equivalence/test_padded.py::test_chunked_run_matches_whole_run[torch-onnx-legacy-x]",
         "message": "RuntimeError: the exported model has no input for h0"})


def dropping_the_state_passed(report):  # the mutation test fails, and its wrong run counts as not caught
    row = chunked_row(report, "keras-tf-")
    row["mutations_caught"] -= 1
    row["failed_tests"].append({"test": "tests/equivalence/test_padded.py::"
                                        "test_state_not_carried_between_chunks_is_detected[keras-tf-rnn]",
                                "message": "AssertionError: state not carried went undetected"})


def a_wrong_run_passed(report):  # the report does not say which wrong run: any one contradicts the lead
    chunked_row(report, "onnx-ort")["mutations_caught"] -= 1


@pytest.mark.parametrize("broken", [beyond_its_bound, a_chunked_test_failed, dropping_the_state_passed,
                                    a_wrong_run_passed], ids=lambda f: f.__name__)
def test_a_chunked_run_that_disagrees_stops_the_generator(broken):
    lead(CHUNKED, COMMITTED)  # as committed: holds
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="chunked-and-stateful: the lead says Yes, but "):
        lead(CHUNKED, report)


def test_a_lead_about_chunked_runs_needs_them_and_each_way_of_carrying_named():
    none = copy.deepcopy(COMMITTED)
    for row in none["systems"]:
        row["chunked"] = {"cases": 0, "max_error": 0.0, "worst_ratio": 0.0}
    with pytest.raises(AnswerContradicted, match="about chunked runs, but the report has none"):
        lead(CHUNKED, none)
    unconverted = copy.deepcopy(COMMITTED)  # the lead says converted models stream: some must have run in chunks
    for row in unconverted["systems"]:
        if carried_by(row["system"]) == "converted":
            row["chunked"] = {"cases": 0, "max_error": 0.0, "worst_ratio": 0.0}
    with pytest.raises(AnswerContradicted, match=r"none of the kind \['converted'\]"):
        lead(CHUNKED, unconverted)


def test_each_system_run_in_chunks_carries_its_state_one_named_way():
    carried = {name: carried_by(name) for name in {r["system"] for r in runs_rows("chunked", COMMITTED)}}
    converters = ("tflite-", "tf2onnx-", "torch-onnx-", "onnx2tf-", "nobuco-", "coreml-", "mnn-", "ncnn-",
                  "litert-torch-", "executorch-")
    assert {n for n, how in carried.items() if how == "converted"} == {n for n in carried if n.startswith(converters)}
    assert {n for n, how in carried.items() if how == "layer"} == {n for n in carried
                                                                   if n.startswith(("keras-", "tf-keras-"))}
    section = "\n".join(PAGE_SECTIONS[CHUNKED.anchor])
    for how in ("**Keras layers**", "**The frameworks' own layers and ONNX nodes**", "**Converted models**"):
        assert f"\n- {how}" in section, how


# --- half precision (issue 37): the lead is the report's float16 and bfloat16 rows ----------------------------

from docgen.answers import dtypes_broken
from rnn_equivalence.reference.formats import HALF_FORMATS

HALF = next(q for q in QUESTIONS if q.anchor == "half-precision")


def with_half_rows(report):
    """The report with half rows: its own where it has them; else each PyTorch system's float32 row in both half
    formats, judged by float32 within each op, every wrong mapping caught (those below the half bound on the
    five-step case on the one-step case: tests/equivalence/test_mutations.py), the shape of the rows
    ``pytest --frameworks=torch,...`` writes."""
    if any(r["dtype"] in HALF_FORMATS for r in report["systems"]):
        return report
    report = copy.deepcopy(report)
    for row in [r for r in report["systems"] if r["dtype"] == "float32"
                and ADAPTERS[r["system"]].__module__.endswith(".pytorch")]:
        for dtype in HALF_FORMATS:
            report["systems"].append({**copy.deepcopy(row), "dtype": dtype, "anchor": f"{row['system']}-{dtype}",
                                      "arithmetic": f"mixed_{dtype}", "worst_ratio": 0.25,
                                      "mutations_caught": row["mutations"], "verdict": "equivalent"})
    return report


WITH_HALF = with_half_rows(COMMITTED)


def half_row(report, system, dtype="float16"):
    return next(r for r in report["systems"] if r["system"] == system and r["dtype"] == dtype)


def test_the_half_lead_quotes_the_reports_half_rows_and_names_the_unproven():
    rows = [r for r in WITH_HALF["systems"] if r["dtype"] in HALF_FORMATS]
    first = lead(HALF, WITH_HALF)
    assert first.startswith("**Yes**: on a CPU, within half precision on "
                            f"{len({r['system'] for r in rows})} systems of PyTorch")
    # the frameworks named are the rows' own: from PyTorch's half rows alone, one of Keras's added, then Flax's
    torch_only = copy.deepcopy(WITH_HALF)
    torch_only["systems"] = [r for r in torch_only["systems"] if r["dtype"] not in HALF_FORMATS
                             or ADAPTERS[r["system"]].__module__.endswith(".pytorch")]
    assert " systems of PyTorch, float16" in lead(HALF, torch_only)
    keras = copy.deepcopy(torch_only)
    keras["systems"].append({**half_row(keras, "torch-gru"), "system": "keras-tf-gru-rnn",
                             "anchor": "keras-tf-gru-rnn-float16", "arithmetic": "mixed_float16"})
    flax = copy.deepcopy(keras)
    flax["systems"].append({**half_row(flax, "torch-gru"), "system": "flax-nnx-gru", "anchor": "flax-nnx-gru-float16",
                            "arithmetic": "mixed_float16_composed_activations"})
    assert " systems of PyTorch and Keras, float16" in lead(HALF, keras)
    assert " systems of PyTorch, Keras and Flax, float16" in lead(HALF, flax)
    # the frameworks that run in half in this tree without rows in the report are said to be missing from it
    pending = "**Run by the suite, not in this report:** the half rows of "
    assert pending + "Equinox, " in "\n".join(question_section(HALF, flax))
    equinox = copy.deepcopy(flax)
    equinox["systems"].append({**half_row(equinox, "torch-gru"), "system": "equinox-gru",
                               "anchor": "equinox-gru-float16", "arithmetic": "mixed_float16_composed_activations"})
    assert pending not in "\n".join(question_section(HALF, equinox))
    cases = sum(r["cases"] + r["padded"]["cases"] + r["chunked"]["cases"] for r in rows)
    assert f"({cases} cases, worst err/bound " in first and "Other frameworks and int8: tested by name" in first
    assert words(first) <= LEAD_WORDS
    changed = copy.deepcopy(WITH_HALF)
    half_row(changed, "torch-gru")["worst_ratio"] = 0.875
    assert "worst err/bound 0.875)" in lead(HALF, changed)
    # The rows with a wrong mapping not caught are those whose systems pin one in that format, and only those; the
    # lead names them as UNPROVEN, the section lists them under "Not proven", or says every one is caught.
    for report in (WITH_HALF, one_pinned_mapping_passed(WITH_HALF)):
        rows = [r for r in report["systems"] if r["dtype"] in HALF_FORMATS]
        pinned = {f"{r['system']} {r['dtype']}" for r in rows if r["mutations_caught"] < r["mutations"]}
        assert pinned <= {f"{r['system']} {r['dtype']}" for r in rows
                          if ADAPTERS[r["system"]].mutations_within_bound.get(r["dtype"])}
        first, section = lead(HALF, report), "\n".join(question_section(HALF, report))
        if not pinned:
            assert "UNPROVEN" not in first and "**Wrong mappings:** all " in section
            continue
        assert f"UNPROVEN in {len(pinned)} rows" in first
        not_proven = section.split("**Not proven:**")[1].split("**Not checked")[0]
        for r in rows:
            if f"{r['system']} {r['dtype']}" in pinned:
                assert f"(EQUIVALENCE.md#{r['anchor']})" in not_proven


def one_pinned_mapping_passed(report):
    """``report`` with one wrong mapping that torch-lstm-rnn pins in float16 recorded as passing (UNPROVEN)."""
    report = copy.deepcopy(report)
    row = half_row(report, "torch-lstm-rnn")
    row["mutations_caught"], row["verdict"] = row["mutations"] - 1, "UNPROVEN: a wrong mapping passed"
    return report


def test_the_pinned_wrong_mappings_are_caught_in_the_committed_report():
    """The wrong mappings below the half bound on the five-step mutation case (``mutations_within_bound``) are
    caught on the one-step case: the committed report's half rows of the systems that list them catch every one."""
    rows = [r for r in COMMITTED["systems"] if r["dtype"] in HALF_FORMATS
            and ADAPTERS[r["system"]].mutations_within_bound.get(r["dtype"])]
    assert rows, "no half row of a system that lists a wrong mapping below its half bound"
    assert all(r["mutations"] and r["mutations_caught"] == r["mutations"] for r in rows), \
        [(r["system"], r["dtype"], r["mutations_caught"], r["mutations"]) for r in rows]


def beyond_the_half_bound(report):
    half_row(report, "torch-gru")["worst_ratio"], half_row(report, "torch-gru")["verdict"] = 3.5, "NOT equivalent"


def a_wrong_mapping_passed_unpinned(report):  # torch-gru pins none: any wrong run not caught contradicts
    row = half_row(report, "torch-gru", "bfloat16")
    row["mutations_caught"], row["verdict"] = row["mutations"] - 1, "UNPROVEN: a wrong mapping passed"


def more_passed_than_pinned(report):
    row = half_row(report, "torch-lstm-rnn")
    pins = ADAPTERS["torch-lstm-rnn"].mutations_within_bound["float16"]
    row["mutations_caught"], row["verdict"] = row["mutations"] - len(pins) - 1, "UNPROVEN: a wrong mapping passed"


def a_half_test_failed(report):
    half_row(report, "torch-rnn")["verdict"] = "FAILED: 1 test(s)"


@pytest.mark.parametrize("broken", [beyond_the_half_bound, a_wrong_mapping_passed_unpinned, more_passed_than_pinned,
                                    a_half_test_failed], ids=lambda f: f.__name__)
def test_a_half_row_that_disagrees_stops_the_generator(broken):
    lead(HALF, WITH_HALF)  # as built: holds
    report = copy.deepcopy(WITH_HALF)
    broken(report)
    assert dtypes_broken(HALF_FORMATS, report)
    with pytest.raises(AnswerContradicted, match="half-precision: the lead says Yes, but "):
        lead(HALF, report)


def test_what_the_half_lead_says_of_the_rows_is_checked():
    none = copy.deepcopy(WITH_HALF)
    none["systems"] = [r for r in none["systems"] if r["dtype"] not in HALF_FORMATS]
    with pytest.raises(AnswerContradicted, match="about float16 and bfloat16 rows, but the report has none"):
        lead(HALF, none)
    other = copy.deepcopy(WITH_HALF)  # the lead names only PyTorch, Keras, Flax and Equinox
    other["systems"].append({**half_row(other, "torch-gru"), "system": "onnx-ort-gru",
                             "anchor": "onnx-ort-gru-float16"})
    with pytest.raises(AnswerContradicted, match="other than PyTorch, Keras, Flax and Equinox are not in these rows, "
                                                 "but .*onnx-ort-gru"):
        lead(HALF, other)
    unjudged = copy.deepcopy(WITH_HALF)  # the lead says float32 arithmetic with half storage
    del half_row(unjudged, "torch-lstm", "bfloat16")["arithmetic"]
    with pytest.raises(AnswerContradicted, match="torch-lstm bfloat16 is judged by another bound"):
        lead(HALF, unjudged)
    int8 = copy.deepcopy(WITH_HALF)  # the lead says int8 is not checked yet
    int8["systems"].append({**half_row(int8, "torch-gru"), "dtype": "int8", "anchor": "torch-gru-int8"})
    with pytest.raises(AnswerContradicted, match="rows in int8, which no question reads"):
        page(int8)


@pytest.mark.parametrize("question", [q for q in QUESTIONS if q is not HALF], ids=lambda q: q.anchor)
def test_a_float32_answer_reads_float32_and_float64_rows_only(question):
    """Half rows do not move another answer's figures or evidence (``read_by``): its section is the same."""
    assert question_section(question, WITH_HALF) == question_section(question, read_by(question, WITH_HALF))
    assert question_section(question, WITH_HALF) == question_section(question, COMMITTED)


def test_a_row_unproven_by_its_pinned_wrong_mappings_alone_does_not_make_a_pair_no():
    lstm, layer = ADAPTERS["torch-lstm"], ADAPTERS["torch-lstm-rnn"]
    pinned = {**row("torch-lstm-rnn", "float16", "UNPROVEN: a wrong mapping passed"), "mutations": 5,
              "mutations_caught": 4}
    verdict, reason = decide(lstm, layer, [row("torch-lstm"), row("torch-lstm-rnn"), pinned], None)
    assert verdict == "Yes" and "UNPROVEN in torch-lstm-rnn float16" in reason
    unpinned = {**pinned, "system": "torch-lstm", "dtype": "float16"}  # torch-lstm pins none
    assert decide(lstm, layer, [row("torch-lstm"), row("torch-lstm-rnn"), unpinned], None)[0] == "No"
    beyond = {**pinned, "mutations_caught": 3}  # two passed, one pinned
    assert decide(lstm, layer, [row("torch-lstm"), row("torch-lstm-rnn"), beyond], None)[0] == "No"


# --- PaddlePaddle, Core ML, onnx2torch (issue 36): each lead's first sentence is its reports' rows --------------

from docgen.answers import FORWARD, cited_tests, noxfile_pins, record
from docgen.questions import COREML, PADDLE_CELLS, PADDLE_LAYERS

BY_ANCHOR = {q.anchor: q for q in QUESTIONS}
PADDLE, COREML_Q, ONNX2TORCH = BY_ANCHOR["paddle"], BY_ANCHOR["coreml"], BY_ANCHOR["onnx2torch"]


def rows_of(report, systems):
    return [r for r in report["systems"] if r["system"] in systems]


def forward_said(rows):
    """The forward pass's figures as a lead quotes them: cases and worst err/bound over whole sequences, padded
    and chunked runs."""
    cases = sum(record(r, kind)["cases"] for r in rows for kind in FORWARD)
    worst = max(record(r, kind)["worst_ratio"] for r in rows for kind in FORWARD)
    return f"({cases} cases, worst err/bound {ratio(worst)})"


def first_sentence(anchor):
    lead_ = PAGE_SECTIONS[anchor][2]
    return re.split(r"(?<=\.) (?=\*\*)", lead_)[0]  # up to the next verdict


def test_the_paddle_lead_is_the_paddle_rows():
    """Yes for the forward pass with its figures and version, No for the gradients of the layers whose rows fail,
    named with their worst err/bound; each failing row linked under the answer."""
    rows = rows_of(COMMITTED, PADDLE_CELLS + PADDLE_LAYERS)
    first, lead_ = first_sentence("paddle"), PAGE_SECTIONS["paddle"][2]
    versions = sorted({r["versions"] for r in rows})
    assert versions == ["paddlepaddle 3.3.1"]
    assert first.startswith(f"**Yes** for the forward pass: {versions[0]} keeps PyTorch's names, shapes and gate "
                            f"order, both ways {forward_said(rows)}"), first
    failing = [r for r in rows if r["gradients"]["worst_ratio"] > 1]
    assert {(r["system"], r["dtype"]) for r in failing} == {(s, d) for s in PADDLE_LAYERS
                                                            for d in ("float32", "float64")}
    assert all(r["verdict"] == "NOT equivalent" and r["failed_tests"] for r in failing)
    assert ("**No** for `paddle.grad` of a bidirectional layer given `sequence_length` and an initial state: not its "
            "forward pass's derivative (`SimpleRNN`, `LSTM` and `GRU` in float32 and float64: gradient err/bound up "
            f"to {ratio(max(r['gradients']['worst_ratio'] for r in failing))})") in lead_
    listed = "\n".join(PAGE_SECTIONS["paddle"]).split("The failing rows:")[1].split("\n\n")[0]
    for r in failing:
        assert f"- {r['system']} {r['dtype']}: gradients err/bound {ratio(r['gradients']['worst_ratio'])}" in listed
        assert f"(environments/paddle/EQUIVALENCE.md#{r['anchor']})" in listed
    changed = copy.deepcopy(COMMITTED)
    next(r for r in rows_of(changed, ("paddle-gru",)) if r["dtype"] == "float64")["gradients"]["worst_ratio"] = 5e12
    next(r for r in rows_of(changed, ("paddle-cell",)) if r["dtype"] == "float32")["worst_ratio"] = 0.875
    again = lead(PADDLE, changed)
    assert "worst err/bound 0.875)" in again and "gradient err/bound up to 5e+12)" in again


def paddle_row(report, system, dtype="float32"):
    return next(r for r in report["systems"] if r["system"] == system and r["dtype"] == dtype)


def a_forward_run_beyond_its_bound(report):
    paddle_row(report, "paddle-lstm")["worst_ratio"] = 3.5  # the gate order wrong, say: its verdict unchanged


def a_padded_run_beyond_its_bound(report):
    paddle_row(report, "paddle-gru", "float64")["padded"]["worst_ratio"] = 2.0


def a_wrong_mapping_passed(report):
    paddle_row(report, "paddle-cell-gru")["mutations_caught"] -= 1


def a_forward_test_failed(report):  # #23116's test: no comparison recorded, the test itself failed
    paddle_row(report, "paddle-rnn")["failed_tests"].append(
        {"test": "tests/equivalence/test_paddle.py::test_pytorchs_gate_order_alone_is_paddles[paddle-rnn]",
         "message": "AssertionError: another gate order within the bound"})


def a_difference_proved(report):
    report["non_equivalences"].append({"anchor": "x", "system": "paddle-lstm", "against": "torch.nn.LSTM in float64",
                                       "max_difference": 0.5, "ratio": 1e5,
                                       "reason": "paddle-lstm reads bias_hh as bias_ih: outputs differ"})


@pytest.mark.parametrize("broken", [a_forward_run_beyond_its_bound, a_padded_run_beyond_its_bound,
                                    a_wrong_mapping_passed, a_forward_test_failed, a_difference_proved],
                         ids=lambda f: f.__name__)
def test_a_paddle_forward_pass_that_disagrees_stops_the_generator(broken):
    lead(PADDLE, COMMITTED)  # as committed: holds (its padding conventions, PyTorch's, are no disagreement)
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="paddle: the lead says Yes for the forward pass, but "):
        lead(PADDLE, report)


def test_paddle_gradients_that_agree_or_fail_elsewhere_stop_the_generator():
    """The No is the failing rows': gradients within their bounds and no gradient test failed contradict it; a
    gradient test failed in another setting contradicts what the lead says of them."""
    agree = copy.deepcopy(COMMITTED)
    for row in rows_of(agree, PADDLE_LAYERS):
        row["gradients"]["worst_ratio"], row["failed_tests"], row["verdict"] = 0.5, [], "equivalent"
    with pytest.raises(AnswerContradicted, match="paddle: the lead says No for `paddle.grad` .* but the report "
                                                 "proves no difference"):
        lead(PADDLE, agree)
    elsewhere = copy.deepcopy(COMMITTED)
    paddle_row(elsewhere, "paddle-lstm")["failed_tests"].append(
        {"test": "tests/equivalence/test_gradients.py::test_gradients_match_float64_backward_pass[paddle-lstm-"
                 "default-float32-L1-h0-I3-H6-B4-T9-seed950]", "message": "BoundExceeded"})
    with pytest.raises(AnswerContradicted, match="paddle: the lead says paddle.grad fails for a bidirectional layer "
                                                 "given sequence_length and an initial state, but .*L1-h0"):
        lead(PADDLE, elsewhere)


def test_the_coreml_lead_is_the_coreml_rows():
    """Yes for the LSTM and RNN with their figures and versions, coremltools#824's figure the LSTM's rows' (its
    bidirectional layers among them), and the GRU: no op to check, coremltools#1124 unresolved at that level."""
    rows = rows_of(COMMITTED, COREML)
    lstm = [r for r in rows if r["family"] == "lstm"]
    first = first_sentence("coreml")
    assert [r["versions"] for r in rows] == ["coremltools 9.0, torch 2.13.0+cpu"] * 2
    assert first.startswith("**Yes** for `nn.LSTM` and `nn.RNN` at specification level: coremltools 9.0 (torch "
                            "2.13.0+cpu) writes PyTorch's weights"), first
    assert f"agree within float32 rounding {forward_said(rows)}" in first
    assert (f"coremltools#824's bidirectional LSTM not reproduced (err/bound {ratio(lstm[0]['worst_ratio'])}); "
            "`nn.GRU` becomes a `while_loop`, so there is no `gru` op to check: coremltools#1124 stands unresolved "
            "at specification level.") in first
    assert any(config.bidirectional for config in ADAPTERS["coreml-lstm"].configs)
    assert not [r for r in COMMITTED["systems"] if r["system"].startswith("coreml") and r["family"].startswith("gru")]
    changed = copy.deepcopy(COMMITTED)
    rows_of(changed, ("coreml-lstm",))[0]["worst_ratio"] = 0.875
    assert "not reproduced (err/bound 0.875)" in lead(COREML_Q, changed)


def a_coreml_gru_row(report):  # a coremltools that writes the gru op: then there is one to check
    lstm = rows_of(report, ("coreml-lstm",))[0]
    report["systems"].append({**copy.deepcopy(lstm), "system": "coreml-gru", "family": "gru (reset_after)",
                              "anchor": "coreml-gru-float32"})


def the_lstm_beyond_its_bound(report):
    rows_of(report, ("coreml-lstm",))[0]["worst_ratio"] = 3.5


def the_rnn_chunks_beyond_their_bound(report):
    rows_of(report, ("coreml-rnn",))[0]["chunked"]["worst_ratio"] = 2.0


def the_bidirectional_test_failed(report):
    rows_of(report, ("coreml-lstm",))[0]["failed_tests"].append(
        {"test": "tests/equivalence/test_coreml.py::test_bidirectional_lstm_is_pytorchs_in_the_program[coreml-lstm]",
         "message": "BoundExceeded: coremltools#824"})


def no_lstm_row(report):
    report["systems"] = [r for r in report["systems"] if r["system"] != "coreml-lstm"]


@pytest.mark.parametrize("broken", [a_coreml_gru_row, the_lstm_beyond_its_bound, the_rnn_chunks_beyond_their_bound,
                                    the_bidirectional_test_failed, no_lstm_row], ids=lambda f: f.__name__)
def test_a_coreml_row_that_disagrees_stops_the_generator(broken):
    lead(COREML_Q, COMMITTED)  # as committed: holds
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="coreml: the lead says Yes for `nn.LSTM` and `nn.RNN` at "
                                                 r"specification level.*, but "):
        lead(COREML_Q, report)


def test_the_onnx2torch_lead_is_its_sessions_pin_and_its_tests():
    """No report: the version is the one its nox session pins, the operators those its tests convert, and its
    tests are cited by name; rows of onnx2torch systems (a release that converts the nodes) stop the generator."""
    pinned = dict(re.findall(r'"([\w.-]+)==([\w.+]+)"', re.search(r"^ONNX2TORCH = \((.*?)\)$",
                                                                  (ROOT / "noxfile.py").read_text(), re.M).group(1)))
    assert first_sentence("onnx2torch").startswith(
        f"**No**: onnx2torch {pinned['onnx2torch']} refuses the ONNX `RNN`, `LSTM` and `GRU` nodes by name "
        "(`NotImplementedError: Converter is not implemented`) before building any module")
    assert "(ENOT-AutoDL/onnx2torch#136, open)" in first_sentence("onnx2torch")
    assert noxfile_pins("ONNX2TORCH") == pinned
    converted = copy.deepcopy(COMMITTED)
    converted["systems"].append({**copy.deepcopy(rows_of(COMMITTED, ("onnx-ort-lstm",))[0]),
                                 "system": "onnx2torch-lstm", "anchor": "onnx2torch-lstm-float32"})
    with pytest.raises(AnswerContradicted, match="onnx2torch: the lead says No .*, but the report has rows of "
                                                 "onnx2torch-lstm float32"):
        lead(ONNX2TORCH, converted)


def test_a_new_pin_changes_the_onnx2torch_lead(tmp_path, monkeypatch):
    import docgen.answers

    text = (ROOT / "noxfile.py").read_text().replace('"onnx2torch==1.5.15"', '"onnx2torch==1.6.0"')
    (tmp_path / "noxfile.py").write_text(text)
    monkeypatch.setattr(docgen.answers, "ROOT", tmp_path)
    assert lead(ONNX2TORCH, COMMITTED).startswith("**No**: onnx2torch 1.6.0 refuses")
    (tmp_path / "noxfile.py").write_text(text.replace('"onnx2torch==1.6.0"', '"onnx2torch>=1.6"'))
    with pytest.raises(AnswerContradicted, match="ONNX2TORCH pins no onnx2torch version"):
        lead(ONNX2TORCH, COMMITTED)


@pytest.mark.parametrize("question", [q for q in QUESTIONS if q.tests], ids=lambda q: q.anchor)
def test_every_test_an_answer_names_is_cited_and_there(question):
    """The tests named in an answer's words are those it cites (``Question.tests``), each in its file; the failed
    tests of the report's rows it lists are test ids, with their parameters."""
    named = set(re.findall(r"`(test_\w+)`", "\n".join(PAGE_SECTIONS[question.anchor])))
    cited = {name for _, names in question.tests for name in names}
    assert named == cited, (named ^ cited)
    assert cited_tests(question, COMMITTED) == [line for line in PAGE_SECTIONS[question.anchor]
                                                if line.startswith("- `tests/")]


def test_a_cited_test_that_failed_or_is_gone_stops_the_generator(tmp_path):
    failed = copy.deepcopy(COMMITTED)
    paddle_row(failed, "paddle-lstm")["failed_tests"].append(
        {"test": "tests/equivalence/test_paddle.py::test_paddle_crashes_on_a_bias_free_layer[paddle-lstm]",
         "message": "AssertionError: (0, 'ran', '')"})  # a Paddle that runs a bias-free layer: #70231 fixed
    with pytest.raises(AnswerContradicted, match="paddle: the answer states what .*test_paddle_crashes_on_a_bias_"
                                                 "free_layer proves, but it failed"):
        cited_tests(PADDLE, failed)
    path = "tests/equivalence/test_onnx2torch.py"
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text((ROOT / path).read_text().replace("def test_onnx2torch_refuses_the_node(",
                                                                   "def test_onnx2torch_converts_the_node("))
    with pytest.raises(AnswerContradicted, match="cites tests/equivalence/test_onnx2torch.py::"
                                                 "test_onnx2torch_refuses_the_node, which is not there"):
        cited_tests(ONNX2TORCH, COMMITTED, root=tmp_path)


def test_compare_prints_the_new_answers_for_their_pairs():
    assert lead_for("torch-lstm-rnn", "paddle-lstm")[0] is PADDLE
    assert lead_for("paddle-cell-gru", "torch-gru")[0] is PADDLE
    assert lead_for("torch-rnn", "coreml-rnn")[0] is COREML_Q


# --- ncnn (through pnnx) and MNN (issue 36): the lead's two verdicts are their environments' rows -------------

from docgen.answers import silent_attributes
from docgen.questions import MNN, MNN_PAIRS, NCNN, NCNN_PAIRS
from rnn_equivalence.compare import answer_from_report
from rnn_equivalence.reference.config import LayerConfig

NCNN_MNN = BY_ANCHOR["ncnn-and-mnn"]


def worst_forward(rows):
    return ratio(max(record(r, kind)["worst_ratio"] for r in rows for kind in FORWARD))


def test_the_ncnn_and_mnn_lead_is_their_rows():
    """Only if for ncnn, as compare answers its pairs (the systems' setting: pnnx fp16=0, ncnn's half options off),
    its rows run so all within their bounds, with their tools' versions and worst err/bound; Yes for MNN's nodes
    with its rows' figures, and after its "but" the node attributes its findings are about. The figures move with
    the rows, the attributes with the findings."""
    ncnn, mnn = rows_of(COMMITTED, NCNN), rows_of(COMMITTED, MNN)
    assert len(ncnn) == len(mnn) == 3 and {r["verdict"] for r in ncnn + mnn} == {"equivalent"}
    assert {answer_from_report(a, b, COMMITTED).verdict for a, b in NCNN_PAIRS} == {"Only if"}
    assert {answer_from_report(a, b, COMMITTED).verdict for a, b in MNN_PAIRS} == {"Yes"}
    first, lead_ = first_sentence("ncnn-and-mnn"), PAGE_SECTIONS["ncnn-and-mnn"][2]
    assert first == ("**Only if** pnnx and ncnn stay float32 (`fp16=0`, fp16/bf16 off): pnnx 20261020 and ncnn "
                     "1.0.20261020 compute `nn.LSTM`, `nn.GRU` and `nn.RNN` within float32 rounding (worst err/bound "
                     f"{worst_forward(ncnn)}); relu is refused: pnnx writes tanh."), first
    assert lead_ == (f"{first} **Yes**: MNN 3.6.1 computes forward and bidirectional `layout=0` nodes (worst "
                     f"err/bound {worst_forward(mnn)}), but runs `direction=\"reverse\"`, `layout=1`, `sequence_lens`, "
                     "`clip`, `input_forget`, `linear_before_reset=0` and non-default GRU/RNN activations silently as "
                     "another function."), lead_
    changed = copy.deepcopy(COMMITTED)
    rows_of(changed, ("ncnn-gru",))[0]["chunked"]["worst_ratio"] = 0.875
    rows_of(changed, ("mnn-rnn",))[0]["worst_ratio"] = 0.625
    # MNN honours reverse nodes and the GRU's activations: their findings gone, the lead no longer names them
    changed["non_equivalences"] = [n for n in changed["non_equivalences"] if not n["system"].startswith("mnn")
                                   or not n["against"].endswith("direction=reverse")
                                   and not (n["system"] == "mnn-gru" and " with activations " in n["against"])]
    again = lead(NCNN_MNN, changed)
    assert "within float32 rounding (worst err/bound 0.875)" in again and "(worst err/bound 0.625), but runs" in again
    assert "`direction=\"reverse\"`" not in again and "non-default RNN activations" in again


def ncnn_row(report, system):
    return rows_of(report, (system,))[0]


def an_ncnn_run_beyond_its_bound(report):
    ncnn_row(report, "ncnn-lstm")["worst_ratio"] = 3.5


def ncnn_chunks_beyond_their_bound(report):
    ncnn_row(report, "ncnn-rnn")["chunked"]["worst_ratio"] = 2.0


def an_ncnn_wrong_mapping_passed(report):
    ncnn_row(report, "ncnn-gru")["mutations_caught"] -= 1


def an_ncnn_test_failed(report):  # no comparison recorded: the module and its model disagree
    ncnn_row(report, "ncnn-gru")["failed_tests"].append(
        {"test": "tests/equivalence/test_ncnn.py::test_the_ncnn_model_agrees_with_the_pytorch_module[ncnn-gru]",
         "message": "BoundExceeded"})


@pytest.mark.parametrize("broken", [an_ncnn_run_beyond_its_bound, ncnn_chunks_beyond_their_bound,
                                    an_ncnn_wrong_mapping_passed, an_ncnn_test_failed], ids=lambda f: f.__name__)
def test_an_ncnn_row_that_disagrees_under_the_condition_stops_the_generator(broken):
    """The Only if's rows are the runs made under its condition: one that disagrees contradicts it, as a Yes's."""
    lead(NCNN_MNN, COMMITTED)  # as committed: holds
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match=r"ncnn-and-mnn: the lead says Only if pnnx and ncnn stay float32 "
                                                 r"\(`fp16=0`, fp16/bf16 off\), but run so "):
        lead(NCNN_MNN, report)


def test_an_ncnn_that_needs_no_setting_or_runs_relu_stops_the_generator(monkeypatch):
    """The condition is the systems' own setting (``runs_with``), which makes compare answer Only if: without it the
    pairs are Yes and the Only if stands on nothing. And the lead says relu is refused: an ncnn RNN running it
    contradicts it."""
    with monkeypatch.context() as patch:
        for name in NCNN:
            patch.setattr(ADAPTERS[name], "runs_with", "")
        with pytest.raises(AnswerContradicted, match="ncnn-and-mnn: the lead says Only if, but the report proves no "
                                                     "difference on its subject and no pair of it is answered Only if"):
            lead(NCNN_MNN, COMMITTED)
    monkeypatch.setattr(ADAPTERS["ncnn-rnn"], "activations", ("tanh", "relu"))
    with pytest.raises(AnswerContradicted, match="ncnn-and-mnn: the lead says relu is refused, but ncnn-rnn runs it"):
        lead(NCNN_MNN, COMMITTED)


def mnn_finding(report, against_end):
    return next(n for n in report["non_equivalences"] if n["system"].startswith("mnn-")
                and n["against"].endswith(against_end))


def an_mnn_run_beyond_its_bound(report):
    rows_of(report, ("mnn-gru",))[0]["worst_ratio"] = 3.5


def an_mnn_finding_of_another_kind(report):  # not among what the "but" names: the Yes would hide it
    report["non_equivalences"].append({**mnn_finding(report, "direction=reverse"), "system": "mnn-lstm",
                                       "against": "the ONNX LSTM node with bias",
                                       "reason": "MNN drops the node's B: outputs differ"})


@pytest.mark.parametrize("broken", [an_mnn_run_beyond_its_bound, an_mnn_finding_of_another_kind],
                         ids=lambda f: f.__name__)
def test_an_mnn_row_that_disagrees_stops_the_generator(broken):
    lead(NCNN_MNN, COMMITTED)  # as committed: holds (its findings are of the kinds the "but" names)
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="ncnn-and-mnn: the lead says Yes, but "):
        lead(NCNN_MNN, report)


def test_what_the_lead_says_mnn_computes_otherwise_is_its_findings(monkeypatch):
    """Each attribute after the "but" is a finding's; a finding about one the lead has no words for, no layout=1
    finding (the note's figure), or MNN systems that run a reverse node contradict it."""
    silent, layout = silent_attributes(COMMITTED)
    assert silent.startswith('`direction="reverse"`, `layout=1`, ') and {n["system"] for n in layout} == set(MNN)
    unnamed = copy.deepcopy(COMMITTED)
    unnamed["non_equivalences"].append({**mnn_finding(unnamed, "sequence_lens"),
                                        "against": "the ONNX LSTM node with P"})
    with pytest.raises(AnswerContradicted, match="it has no words for mnn-.*'the ONNX LSTM node with P'"):
        lead(NCNN_MNN, unnamed)
    no_layout = copy.deepcopy(COMMITTED)
    no_layout["non_equivalences"] = [n for n in no_layout["non_equivalences"] if not n["against"].endswith("layout=1")]
    with pytest.raises(AnswerContradicted, match="MNN reads a layout=1 node as layout=0, but the report has no such"):
        lead(NCNN_MNN, no_layout)
    reverse = LayerConfig(1, False, options=(("direction", "reverse"), ("layout", 0)))
    monkeypatch.setattr(ADAPTERS["mnn-rnn"], "configs", ADAPTERS["mnn-rnn"].configs + (reverse,))
    with pytest.raises(AnswerContradicted, match="MNN's rows are forward and bidirectional layout=0 nodes, but its "
                                                 r"systems run directions \['bidirectional', 'forward', 'reverse'\]"):
        lead(NCNN_MNN, COMMITTED)


def test_compare_prints_the_ncnn_and_mnn_answer_for_their_pairs():
    assert lead_for("torch-gru-rnn", "ncnn-gru")[0] is NCNN_MNN
    assert lead_for("mnn-lstm", "onnx-ort-lstm")[0] is NCNN_MNN


# --- litert-torch (issue 36): the lead is its environment's rows, what it says of the models the systems' -------------

from docgen.questions import LITERT, LITERT_PAIRS

LITERT_Q = BY_ANCHOR["litert-torch"]


def litert_row(report, system="litert-torch-lstm"):
    return rows_of(report, (system,))[0]


def test_the_litert_torch_lead_is_its_rows():
    """Yes, as compare answers its pairs, with the rows' versions, cases (whole sequences and chunked runs) and worst
    err/bound; the note's figures (each family's worst, the chunked runs, the wrong mappings caught) are the rows'
    too. Change a row within its bound and the lead and the note change with it."""
    rows = rows_of(COMMITTED, LITERT)
    assert len(rows) == 3 and {(r["verdict"], r["dtype"]) for r in rows} == {("equivalent", "float32")}
    assert {r["versions"] for r in rows} == {"litert-torch 0.10.0, torch 2.13.0+cpu, ai-edge-litert 2.3.0"}
    assert {answer_from_report(a, b, COMMITTED).verdict for a, b in LITERT_PAIRS} == {"Yes"}
    first = PAGE_SECTIONS["litert-torch"][2]
    assert first == ("**Yes**: litert-torch 0.10.0 (torch 2.13.0+cpu, ai-edge-litert 2.3.0) converts `nn.LSTM` "
                     "(`proj_size` included), `nn.GRU` and `nn.RNN`, stacked and bidirectional, into models that agree "
                     f"within float32 rounding {forward_said(rows)}, chunked runs included: every step unrolled (no "
                     "fused op, no `WHILE`), for one batch size and length; packed sequences are refused."), first
    section = "\n".join(PAGE_SECTIONS["litert-torch"])
    assert (f"worst err/bound {worst_forward([litert_row(COMMITTED)])} for the LSTM, "
            f"{worst_forward([litert_row(COMMITTED, 'litert-torch-gru')])} for the GRU and "
            f"{worst_forward([litert_row(COMMITTED, 'litert-torch-rnn')])} for the RNN, "
            f"{sum(r['chunked']['cases'] for r in rows)} chunked runs up to "
            f"{ratio(max(r['chunked']['worst_ratio'] for r in rows))}; {sum(r['mutations_caught'] for r in rows)} of "
            f"{sum(r['mutations'] for r in rows)} wrong mappings caught.") in section
    changed = copy.deepcopy(COMMITTED)
    litert_row(changed, "litert-torch-gru")["chunked"]["worst_ratio"] = 0.875
    litert_row(changed, "litert-torch-rnn")["cases"] += 1000
    again = lead(LITERT_Q, changed)
    cases = sum(record(r, kind)["cases"] for r in rows for kind in FORWARD) + 1000
    assert f"({cases} cases, worst err/bound 0.875)" in again, again
    assert "0.875 for the GRU" in "\n".join(question_section(LITERT_Q, changed))


def a_litert_run_beyond_its_bound(report):
    litert_row(report)["worst_ratio"] = 3.5


def litert_chunks_beyond_their_bound(report):
    litert_row(report, "litert-torch-rnn")["chunked"]["worst_ratio"] = 2.0


def a_litert_wrong_mapping_passed(report):
    litert_row(report, "litert-torch-gru")["mutations_caught"] -= 1


def the_unrolling_test_failed(report):  # a release that emits a fused op or a loop: no comparison recorded
    litert_row(report)["failed_tests"].append(
        {"test": "tests/equivalence/test_litert_torch.py::test_litert_torch_unrolls_every_step[litert-torch-lstm]",
         "message": "AssertionError: ({'UNIDIRECTIONAL_SEQUENCE_LSTM'}, ...)"})


def a_litert_difference_proved(report):
    report["non_equivalences"].append({"anchor": "x", "system": "litert-torch-gru", "max_difference": 0.5,
                                       "against": "torch.nn.GRU in float64", "ratio": 1e5,
                                       "reason": "litert-torch-gru computes the reset gate before: outputs differ"})


def no_rnn_row(report):
    report["systems"] = [r for r in report["systems"] if r["system"] != "litert-torch-rnn"]


@pytest.mark.parametrize("broken", [a_litert_run_beyond_its_bound, litert_chunks_beyond_their_bound,
                                    a_litert_wrong_mapping_passed, the_unrolling_test_failed,
                                    a_litert_difference_proved, no_rnn_row], ids=lambda f: f.__name__)
def test_a_litert_torch_row_that_disagrees_stops_the_generator(broken):
    lead(LITERT_Q, COMMITTED)  # as committed: holds
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="litert-torch: the lead says Yes, but "):
        lead(LITERT_Q, report)


def test_what_the_litert_torch_lead_says_of_the_models_is_the_systems(monkeypatch):
    """Unrolled (no system declares a recurrent op, which its tests hold every model to), no padded batches (no
    padded configuration, no padded row), stacked and bidirectional layers and a projection, chunked runs in every
    row: a system or row that says otherwise contradicts the lead."""
    unchunked = copy.deepcopy(COMMITTED)
    litert_row(unchunked, "litert-torch-gru")["chunked"] = {"cases": 0, "max_error": 0.0, "worst_ratio": 0.0}
    with pytest.raises(AnswerContradicted, match="chunked runs are included, but litert-torch-gru float32 has none"):
        lead(LITERT_Q, unchunked)
    padded = copy.deepcopy(COMMITTED)
    litert_row(padded)["padded"] = {"cases": 4, "max_error": 1e-7, "worst_ratio": 0.1}
    with pytest.raises(AnswerContradicted, match="packed sequences are refused .*, but litert-torch-lstm float32 "):
        lead(LITERT_Q, padded)
    lstm = ADAPTERS["litert-torch-lstm"]
    with monkeypatch.context() as patch:
        patch.setattr(lstm, "operators", frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"}))
        with pytest.raises(AnswerContradicted, match="every step is unrolled, but litert-torch-lstm "
                                                     r"\(UNIDIRECTIONAL_SEQUENCE_LSTM\) declares"):
            lead(LITERT_Q, COMMITTED)
    with monkeypatch.context() as patch:
        patch.setattr(lstm, "padded_configs", lstm.configs[:1])
        with pytest.raises(AnswerContradicted, match="packed sequences are refused .*, but litert-torch-lstm runs"):
            lead(LITERT_Q, COMMITTED)
    with monkeypatch.context() as patch:
        patch.setattr(lstm, "options", ("",))
        with pytest.raises(AnswerContradicted, match="no LSTM system runs a projection"):
            lead(LITERT_Q, COMMITTED)
    monkeypatch.setattr(ADAPTERS["litert-torch-gru"], "configs", (LayerConfig(1, False),))
    with pytest.raises(AnswerContradicted, match="stacked and bidirectional layers .*, but litert-torch-gru"):
        lead(LITERT_Q, COMMITTED)


def test_compare_prints_the_litert_torch_answer_for_its_pairs():
    assert lead_for("torch-gru-rnn", "litert-torch-gru")[0] is LITERT_Q
    assert lead_for("litert-torch-rnn", "torch-rnn")[0] is LITERT_Q


# --- ExecuTorch (issue 36): a question of its own, its lead the executorch environment's rows ---------------------

from docgen.answers import versions_said
from docgen.questions import EXECUTORCH, EXECUTORCH_PAIRS

EXECUTORCH_Q = BY_ANCHOR["executorch"]


def executorch_row(report, system="executorch-lstm"):
    return rows_of(report, (system,))[0]


def test_the_executorch_lead_is_its_rows():
    """Yes, as compare answers its pairs, with the rows' versions, cases and worst err/bound; the note's figures are
    the rows' too, and move with them. It is a question of its own: as a second verdict of the TorchScript and
    torch.export lead, the lead would pass the page's length."""
    rows = rows_of(COMMITTED, EXECUTORCH)
    assert len(rows) == 3 and {r["dtype"] for r in rows} == {"float32"}
    assert {answer_from_report(a, b, COMMITTED).verdict for a, b in EXECUTORCH_PAIRS} == {"Yes"}
    versions = versions_said(rows)
    assert versions.startswith("executorch 1.5.1 (torch 2.13.0"), versions
    first = PAGE_SECTIONS["executorch"][2]
    assert first == (f"**Yes**: {versions} lowers `nn.LSTM` (`proj_size` included), `nn.GRU` and `nn.RNN`, stacked "
                     "and bidirectional, to programs that agree within float32 rounding "
                     f"{forward_said(rows)}, chunked runs included: every step unrolled into kernel calls, for one "
                     "batch size and length; a dynamic length and packed sequences are refused."), first
    together = PAGE_SECTIONS["torchscript-and-torch-export"][2] + " " + first
    assert words(together) > LEAD_WORDS
    section = "\n".join(PAGE_SECTIONS["executorch"])
    assert (f"Worst err/bound {worst_forward([executorch_row(COMMITTED)])} for the LSTM, "
            f"{worst_forward([executorch_row(COMMITTED, 'executorch-gru')])} for the GRU and "
            f"{worst_forward([executorch_row(COMMITTED, 'executorch-rnn')])} for the RNN, "
            f"{sum(r['chunked']['cases'] for r in rows)} chunked runs up to "
            f"{ratio(max(r['chunked']['worst_ratio'] for r in rows))}; {sum(r['mutations_caught'] for r in rows)} of "
            f"{sum(r['mutations'] for r in rows)} wrong mappings caught.") in section
    changed = copy.deepcopy(COMMITTED)
    executorch_row(changed, "executorch-gru")["worst_ratio"] = 0.875
    executorch_row(changed, "executorch-lstm")["chunked"]["cases"] += 1000
    again = lead(EXECUTORCH_Q, changed)
    cases = sum(record(r, kind)["cases"] for r in rows for kind in FORWARD) + 1000
    assert f"({cases} cases, worst err/bound 0.875)" in again, again
    assert "0.875 for the GRU" in "\n".join(question_section(EXECUTORCH_Q, changed))


def an_executorch_run_beyond_its_bound(report):
    executorch_row(report, "executorch-rnn")["worst_ratio"] = 3.5


def executorch_chunks_beyond_their_bound(report):
    executorch_row(report)["chunked"]["worst_ratio"] = 2.0


def an_executorch_wrong_mapping_passed(report):
    executorch_row(report, "executorch-gru")["mutations_caught"] -= 1


def the_10104_test_failed(report):  # a release that quantizes the GRU: the answer's word on #10104 no longer holds
    executorch_row(report, "executorch-gru")["failed_tests"].append(
        {"test": "tests/equivalence/test_executorch.py::test_executorch_10104_a_gru_under_static_quantization_stays_"
                 "float[executorch-gru]", "message": "AssertionError: ['quantized_decomposed.quantize_per_tensor']"})


def no_executorch_gru_row(report):
    report["systems"] = [r for r in report["systems"] if r["system"] != "executorch-gru"]


@pytest.mark.parametrize("broken", [an_executorch_run_beyond_its_bound, executorch_chunks_beyond_their_bound,
                                    an_executorch_wrong_mapping_passed, the_10104_test_failed, no_executorch_gru_row],
                         ids=lambda f: f.__name__)
def test_an_executorch_row_that_disagrees_stops_the_generator(broken):
    lead(EXECUTORCH_Q, COMMITTED)  # as committed: holds
    report = copy.deepcopy(COMMITTED)
    broken(report)
    with pytest.raises(AnswerContradicted, match="executorch: the lead says Yes, but "):
        lead(EXECUTORCH_Q, report)


def test_what_the_executorch_lead_says_of_the_programs_is_the_systems(monkeypatch):
    """Unrolled (no recurrent operator declared), no padded batches, chunked runs in every row; and the cited
    threads' tests must not have failed (#8468's, the dynamic length the lead says is refused)."""
    monkeypatch.setattr(ADAPTERS["executorch-gru"], "operators", frozenset({"aten::gru"}))
    with pytest.raises(AnswerContradicted, match=r"executorch: the lead says every step is unrolled, but "
                                                 r"executorch-gru \(aten::gru\) declares"):
        lead(EXECUTORCH_Q, COMMITTED)
    monkeypatch.undo()
    unchunked = copy.deepcopy(COMMITTED)
    executorch_row(unchunked, "executorch-rnn")["chunked"] = {"cases": 0, "max_error": 0.0, "worst_ratio": 0.0}
    with pytest.raises(AnswerContradicted, match="chunked runs are included, but executorch-rnn float32 has none"):
        lead(EXECUTORCH_Q, unchunked)
    dynamic = copy.deepcopy(COMMITTED)  # a release that exports a dynamic length: its test fails
    executorch_row(dynamic, "executorch-rnn")["failed_tests"].append(
        {"test": "tests/equivalence/test_executorch.py::test_executorch_8468_a_dynamic_sequence_length_is_refused"
                 "[executorch-rnn]", "message": "Failed: DID NOT RAISE <class 'Exception'>"})
    with pytest.raises(AnswerContradicted, match="executorch: the answer states what .*test_executorch_8468_a_"
                                                 "dynamic_sequence_length_is_refused proves, but it failed"):
        cited_tests(EXECUTORCH_Q, dynamic)


def test_compare_prints_the_executorch_answer_for_its_pairs():
    assert lead_for("torch-lstm-rnn", "executorch-lstm")[0] is EXECUTORCH_Q
    assert lead_for("executorch-rnn", "torch-rnn")[0] is EXECUTORCH_Q
