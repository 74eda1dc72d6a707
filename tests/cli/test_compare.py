"""``rnn-equivalence compare A B``: the suite's tests for two systems, run now, and the answer (exit 0 Yes,
1 No or Only if, 2 a question the suite does not answer). The runs use systems that need NumPy or ONNX
only; the answer's logic is the same for every framework."""

import json

import pytest

from click.testing import CliRunner

from rnn_equivalence.cli import main
from rnn_equivalence.compare import mapping_lines


def run(*args):
    result = CliRunner().invoke(main, ["compare", *map(str, args)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    return result


def test_the_two_formulas_are_the_same_function():
    """The lecture's question: the concatenated and the split formula, run now at quick depth."""
    result = run("numpy-concat", "numpy-split", "--json")
    answer = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert answer["verdict"] == "Yes"
    assert {e["system"] for e in answer["evidence"]} == {"numpy-concat", "numpy-split"}
    assert {e["dtype"] for e in answer["evidence"]} == {"float32", "float64"}
    assert all(e["cases"] > 0 and e["worst_ratio"] <= 1 for e in answer["evidence"])
    assert answer["run"]["depth"] == "quick" and "numpy" in answer["run"]["versions"]
    assert "convert(a_weights, 'numpy-concat',\n" in "\n".join(answer["mapping"]) + "\n"


def test_the_two_gru_variants_are_not(tmp_path):
    """ONNX's GRU with linear_before_reset 1 and 0: each is within its own bound, and the answer is No,
    naming the variants; the text fits 100 columns."""
    result = run("onnx-reference-gru", "onnx-reference-gru-reset-before")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("No: onnx-reference-gru and onnx-reference-gru-reset-before.")
    assert "reset_after" in result.output and "reset_before" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 100


def test_only_if_where_the_target_cannot_hold_the_weights():
    """PyTorch's GRU to Flax nnx's, which has no slot for b_hn: the mapping says why (the run is not
    needed to see that; ``mapping_lines`` is what the answer's "Only if" comes from)."""
    lines, refusal = mapping_lines("torch-gru", "flax-nnx-gru")
    assert "no slot for b_hn" in refusal
    assert any("dense_h.kernel" in line for line in lines) and any("bias_hh" in line for line in lines)
    assert mapping_lines("torch-gru", "keras-tf-gru")[1] is None
    assert mapping_lines("flax-nnx-gru", "torch-gru")[1] is None  # b_hn = 0 goes anywhere


@pytest.mark.parametrize(("args", "message"), [
    (("torch-lstm", "torch-gru"), "expected two systems of one family; torch-lstm is lstm"),
    (("torch-lstm", "torch-lstmm"), "unknown system 'torch-lstmm'"),
    (("torch-lstm", "torch-lstm"), "expected two different systems")])
def test_questions_the_suite_does_not_answer_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.output, result.output
