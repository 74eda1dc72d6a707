"""docs/ANSWERS.md: the questions people ask, each answered from the committed report (docs/equivalence.json),
never written by hand:

    python -m harness.answers            # docs/equivalence.json -> docs/ANSWERS.md

A question is data (``QUESTIONS``): its anchor, its title, the pairs of systems it is about and the proved
differences that concern it (a phrase of their reasons). Its answer is computed: each pair's verdict by the
rule ``compare`` uses (``harness.compare_systems.decide``: Yes, No or Only if, from both systems' rows and
the mapping between them), the differences with their measured sizes, the known upstream issues met, the
mapping as code, the evidence with links to the report's rows, and the command that re-checks it on one's
own versions. Then every system of a family against the family member's anchor (PyTorch's where there is
one), as in the report's pair tests. tests/harness/test_answers.py regenerates the page from the committed
report and holds it equal to the committed page, so no answer can cite a figure the report does not have.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.compare_systems import answer_from_report

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "equivalence.json"
PAGE = ROOT / "docs" / "ANSWERS.md"


@dataclass(frozen=True)
class Question:
    anchor: str
    title: str
    pairs: tuple[tuple[str, str], ...]
    differences: tuple[str, ...] = ()  # phrases of the proved non-equivalences' reasons that concern it


QUESTIONS = (
    Question("concat-vs-split", "Is one concatenated matrix multiplication the same as two? "
             "(`h_t = g(W_h [h_{t-1}; x_t] + b)` vs `g(W_hh h_{t-1} + W_hx x_t + b)`; TF1 `BasicRNNCell`, "
             "Keras `SimpleRNNCell`, PyTorch `RNNCell`)",
             (("numpy-concat", "numpy-split"), ("tf-concat", "torch"), ("tf1", "torch"), ("keras-tf", "torch"),
              ("tf1", "keras-tf"))),
    Question("one-bias-or-two", "Is PyTorch's `bias_ih + bias_hh` the same as Keras's one `bias`? "
             "(and in training?)",
             (("torch", "keras-tf"), ("torch-lstm", "keras-tf-lstm"), ("torch-lstm-rnn", "keras-tf-lstm-rnn")),
             ("SGD on one stored bias", "Adam's defaults")),
    Question("gru-variants", "Is PyTorch's GRU the same as Keras's GRU? (`reset_after`, ONNX's "
             "`linear_before_reset`)",
             (("torch-gru", "keras-tf-gru"), ("torch-gru", "keras-tf-gru-reset-before"),
              ("torch-gru", "onnx-ort-gru"), ("onnx-ort-gru", "onnx-ort-gru-reset-before"),
              ("torch-gru", "tf1-gru"), ("torch-gru", "flax-nnx-gru"), ("torch-gru", "equinox-gru")),
             ("reset after applies r", "GRU reset after vs reset before", "escapes the reset gate")),
    Question("hard-sigmoid", "Is Keras 2's `hard_sigmoid` the same as Keras 3's?",
             (("tf-keras", "keras-tf"), ("tf-keras-gru", "keras-tf-gru"), ("tf-keras-lstm", "keras-tf-lstm")),
             ("'hard_sigmoid' is", "jax.nn.hard_sigmoid")),
    Question("forget-bias", "Is TF1's `BasicLSTMCell` (with `forget_bias=1.0`) the same as PyTorch's "
             "`LSTMCell`?",
             (("tf1-basic-lstm", "torch-lstm"), ("tf1-lstm", "torch-lstm")),
             ("forget_bias",)),
    Question("padded-steps", "Do PyTorch, Keras and ONNX agree on padded batches? (zeros or the last output "
             "on padded steps; pre-padding)",
             (("torch-rnn", "keras-tf-rnn"), ("torch-lstm-rnn", "keras-tf-lstm-rnn"), ("torch-rnn", "onnx-ort")),
             ("on padded steps", "assumes post-padding", "ignores sequence_lens")),
    Question("gradients-and-steps", "Are the gradients and one optimizer step the same?",
             (("torch-lstm", "keras-tf-lstm"), ("torch-gru", "flax-linen-gru"), ("torch-lstm", "equinox-lstm")),
             ("SGD on one stored bias", "Adam's defaults", ": gradients")),
    Question("clips-and-peepholes", "Are LSTM clipping and peepholes the same across TF1, ONNX Runtime and "
             "OpenVINO?",
             (("tf1-lstm", "onnx-ort-lstm"), ("onnx-ort-lstm", "onnx-openvino-lstm")),
             ("clip", "drops it", "peephole")),
    Question("exporters", "Does my model still compute the same after `torch.onnx.export` or tf2onnx?",
             (("torch-rnn", "torch-onnx-legacy"), ("torch-rnn", "torch-onnx-dynamo"),
              ("torch-lstm-rnn", "torch-onnx-legacy-lstm"), ("tf-keras-rnn", "tf2onnx-keras2-rnn"))),
    Question("tflite", "Does my Keras model still compute the same after TFLite conversion (`TFLiteConverter`, run in "
             "LiteRT)?",
             (("tf-keras-rnn", "tflite-keras2-rnn"), ("keras-tf-lstm-rnn", "tflite-keras2-lstm-rnn"),
              ("keras-tf-lstm-rnn", "tflite-keras-tf-lstm-rnn"), ("keras-tf-gru-rnn", "tflite-keras-tf-gru-rnn"))),
    Question("onnx2tf", "Does an ONNX RNN, LSTM or GRU still compute the same after onnx2tf (ONNX to TFLite)?",
             (("onnx-ort", "onnx2tf-rnn"), ("onnx-ort-lstm", "onnx2tf-lstm"), ("onnx-ort-gru", "onnx2tf-gru"),
              ("onnx-ort-gru-reset-before", "onnx2tf-gru-reset-before")),
             ("onnx2tf",)),
    Question("nobuco", "Does my PyTorch LSTM or GRU still compute the same after nobuco (PyTorch to Keras)?",
             (("torch-lstm-rnn", "nobuco-lstm"), ("torch-gru-rnn", "nobuco-gru")),
             ("nobuco",)),
    Question("runtimes", "Do ONNX Runtime, OpenVINO and `onnx.reference` compute the same ONNX node?",
             (("onnx-ort", "onnx-openvino"), ("onnx-ort-lstm", "onnx-openvino-lstm"),
              ("onnx-ort-gru", "onnx-openvino-gru"), ("onnx-ort", "onnx-reference")),
             ("onnx.reference ignores", "OpenVINO")),
)


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
        merged["systems"] += [{**row, "page": where} for row in own["systems"]]
        merged["non_equivalences"] += [{**row, "page": where} for row in own["non_equivalences"]]
    return merged


def pair_section(result, report) -> list[str]:
    """One pair's answer, in Markdown."""
    lines = [f"**{result.a} and {result.b}: {result.verdict}.** {result.reason.rstrip('.')}.", "", "```python"]
    lines += result.mapping + ["```", ""]
    lines += [f"- {e['system']} {e['dtype']}: {e['cases']} cases, worst err/bound {e['worst_ratio']:.3g}"
              + (f", {e['known_issue_cases']} known-issue cases" if e["known_issue_cases"] else "")
              + f", {e['verdict']} ({e['versions']}; {_report_link(e['anchor'], e['page'])})" for e in result.evidence]
    known = [f for f in result.findings if ": known issue: " in f]
    if known:
        lines += ["", "Known upstream issues met:", ""] + [f"- {f}" for f in known]
    lines += ["", f"Re-check on your versions: `{result.run['command'].replace('--depth=' + report['depth'], '--depth=full')}`", ""]
    return lines


def question_section(question: Question, report: dict) -> list[str]:
    results = [answer_from_report(a, b, report) for a, b in question.pairs]
    differences = [n for n in report["non_equivalences"]
                   if any(phrase in n["reason"] for phrase in question.differences)]
    verdicts = {r.verdict for r in results}
    by_verdict = {v: [f"{r.a} and {r.b}" for r in results if r.verdict == v] for v in ("No", "Only if", "Yes")}
    if "No" in verdicts or "Only if" in verdicts:
        # Grouped by verdict, the pairs that differ first: the answer a reader came for leads.
        top = "; ".join(f"{verdict} for {', '.join(pairs)}" for verdict, pairs in by_verdict.items() if pairs)
    elif differences:
        # Every pair computes the same function; what differs is named here, in short, and proved below.
        kinds = list(dict.fromkeys(n["reason"].split(":")[0] for n in differences))
        top = (f"Yes for the function each pair computes ({', '.join(by_verdict['Yes'])}); not for "
               + "; ".join(kinds[:3]) + (f" and {len(kinds) - 3} more" if len(kinds) > 3 else "") + ", proved below")
    else:
        top = "Yes, once the weights are mapped: " + "; ".join(f"{r.a} and {r.b}" for r in results)
    lines = [f"## <a id=\"{question.anchor}\"></a>{question.title}", "", f"**{top}.**", ""]
    if differences:
        lines += ["Differences proved (same weights, different functions; the largest difference as a multiple "
                  "of the bound):", ""]
        seen = set()
        for n in differences:
            key = (n["reason"], n["against"])
            if key in seen:
                continue
            seen.add(key)
            lines.append(f"- {n['system']} vs {n['against']}: {n['reason']} (difference/bound {n['ratio']:.3g}; "
                         f"{_report_link(n['anchor'], n.get('page', 'EQUIVALENCE.md'))})")
        lines.append("")
    for result in results:
        lines += pair_section(result, report)
    return lines


def anchored(report: dict) -> list[tuple[str, str]]:
    """Every system of the report against its family member's anchor (PyTorch's where there is one)."""
    from frameworks import ADAPTERS

    systems = sorted({row["system"] for row in report["systems"]})
    groups: dict[tuple[str, str], list[str]] = {}
    for name in systems:
        cls = ADAPTERS[name]
        groups.setdefault((cls.family, cls.variant), []).append(name)
    pairs = []
    for members in groups.values():
        anchor = next((name for name in members if name.startswith("torch")), members[0])
        pairs += [(anchor, name) for name in members if name != anchor]
    return pairs


def page(report: dict) -> str:
    """The page for the committed ``report`` (the rows of its environments' own reports merged in)."""
    env = report["environment"]
    report = with_environments(report)
    lines = ["# Answers", "",
             f"Generated by `python -m harness.answers` from [equivalence.json](equivalence.json), the committed "
             f"report (depth {report['depth']}, seed {report['seed']}, {report['date']}, "
             f"{', '.join(f'{k} {v}' for k, v in env['versions'].items())}; Python {env['python']}), never edited "
             "by hand. Yes: both systems compute the same family member within the derived bound on the same "
             "canonical parameters, and the mapping carries any weights of the first into the second. Only if: "
             "they do under the condition said. No: different functions, or a case beyond its bound. Each answer "
             "links its rows of [EQUIVALENCE.md](EQUIVALENCE.md); `rnn-equivalence compare A B` answers again on "
             "the versions you have. The tools that live in environments of their own (onnx2tf, nobuco) are "
             "answered from their own full-depth reports, linked, with their versions.", "", "## Questions", ""]
    lines += [f"- [{q.title}](#{q.anchor})" for q in QUESTIONS]
    lines += ["- [Every system against its family's anchor](#every-pair)", ""]
    for question in QUESTIONS:
        lines += question_section(question, report)
    lines += ["## <a id=\"every-pair\"></a>Every system against its family's anchor", "",
              "| A | B | answer | why |", "|---|---|---|---|"]
    for a, b in anchored(report):
        result = answer_from_report(a, b, report)
        lines.append(f"| {a} | {b} | {result.verdict} | {result.reason.rstrip('.').replace('|', '/')} |")
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
