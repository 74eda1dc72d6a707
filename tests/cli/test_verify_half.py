"""``rnn-equivalence verify A B`` where one file is stored in float16 or bfloat16 and the other in float32 (issue 37,
lower precision): judged as the half model of its original (rnn_equivalence.verify.half_verdict). The half file's
tensors must be the original's rounded to nearest; its float64 reference must stay within the bound the rounding
implies of the original's function (the weight grid of rnn_equivalence.reference.quantized), and each step of its
runs, computed in float32 within each op and in the format throughout, within that step's bound. Each bound is
honest: the error it allows uses at least 1 % of it (err/bound >= 0.01). A port that is wrong and then rounded is
caught, by the parameters and by the runs, and named. The mapping and the reference only (``--no-run``); PyTorch
writes the users' files where a test says so (skipped where it is missing, an error under CI: ``load_system``)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnn_equivalence.diagnose import mistakes
from rnn_equivalence.frameworks.convert import convert, write
from rnn_equivalence.frameworks.files import FileRefused, read_as
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.formats import numpy_dtype
from rnn_equivalence.reference.stack import StackParams
from rnn_equivalence.verify import verify_modules
from tests.cli.test_verify import run

HONEST = 0.01  # a bound more than 100 times the error it allows judges nothing: err/bound must reach this
LAYER = {"lstm": "torch-lstm-rnn", "gru": "torch-gru-rnn", "rnn": "torch-rnn"}
TORCH = {"lstm": "LSTM", "gru": "GRU"}


def torch_files(tmp_path, family: str, load_system) -> dict:
    """``torch.nn.LSTM(3, 5, num_layers=2)`` (or GRU) saved as users save it: float32 and, converted with
    ``.half()`` / ``.bfloat16()``, float16 and bfloat16 safetensors; float16 and bfloat16 state_dicts (.pt)."""
    load_system(LAYER[family])
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(3)
    state = getattr(torch.nn, TORCH[family])(3, 5, num_layers=2).state_dict()
    paths = {}
    for name, dtype in (("float32", torch.float32), ("float16", torch.float16), ("bfloat16", torch.bfloat16)):
        paths[name] = tmp_path / f"{family}_{name}.safetensors"
        save_file({key: value.to(dtype).contiguous() for key, value in state.items()}, paths[name])
        if name != "float32":
            paths[f"{name}.pt"] = tmp_path / f"{family}_{name}.pt"
            torch.save({key: value.to(dtype) for key, value in state.items()}, paths[f"{name}.pt"])
    return paths


def text(result) -> str:
    """The command's output with its wrapping undone (human output is wrapped at 100 columns)."""
    return " ".join(result.output.split())


def ratios(pair: dict) -> dict:
    return {key: c["ratio"] for key, c in pair["half"]["runs"].items()}


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("family", ["lstm", "gru"])
def test_a_half_file_of_a_torch_model_is_equivalent_in_its_format(tmp_path, load_system, family, fmt):
    paths = torch_files(tmp_path, family, load_system)
    result = run("verify", paths["float32"], paths[fmt])
    print(result.output)
    assert result.exit_code == 0, result.output
    assert f"EQUIVALENT IN {fmt.upper()}" in text(result) and f"B is A's weights rounded to {fmt}" in text(result)
    (pair,) = json.loads(run("verify", paths["float32"], paths[fmt], "--json").output)["pairs"]
    half = pair["half"]
    assert half["format"] == fmt and half["rounded"] == "B" and half["rounded_to_nearest"] and half["equivalent"]
    assert set(half["runs"]) == {"float64", f"mixed_{fmt}", fmt}
    print(f"{family} {fmt}: err/bound {ratios(pair)}, float32 bound alone: {pair['runs']['float32']['ratio']:.3g}")
    assert all(HONEST <= r <= 1 for r in ratios(pair).values()), ratios(pair)
    # today's judgment, the float32 bound alone, cannot tell the rounding from a mistake: the half bound is needed
    assert pair["runs"]["float32"]["ratio"] > 1


def test_a_half_file_reads_as_a_state_dict_on_either_side_and_as_a_keras_port(tmp_path, load_system):
    paths = torch_files(tmp_path, "lstm", load_system)
    result = run("verify", paths["float16.pt"], paths["float32"])  # the half file first: A is B's rounded
    assert result.exit_code == 0 and "A is B's weights rounded to float16" in text(result), result.output
    result = run("verify", paths["float32"], paths["bfloat16.pt"])  # torch's bfloat16, read as ml_dtypes'
    assert result.exit_code == 0 and "EQUIVALENT IN BFLOAT16" in text(result), result.output
    # A Keras port, its one bias the sum b_x + b_h rounded once, stored in float16 (Keras's names, an .npz)
    stack = StackParams.random("lstm", 3, 5, seed=1, dtype=np.float32)
    keras = convert(write(stack, "torch-lstm"), "torch-lstm", "keras-tf-lstm")
    np.savez(tmp_path / "torch.npz", **write(stack, "torch-lstm"))
    np.savez(tmp_path / "keras.npz", **{key: value.astype(np.float16) for key, value in keras.items()})
    result = run("verify", tmp_path / "torch.npz", tmp_path / "keras.npz", "--b-as", "keras-tf-lstm", "--json")
    (pair,) = json.loads(result.output)["pairs"]
    assert result.exit_code == 0 and pair["half"]["biases_summed"] == ["layer 0 forward b_x + b_h"], result.output
    assert all(HONEST <= r <= 1 for r in ratios(pair).values()), ratios(pair)


def half_module(stack: StackParams, fmt: str, shape=(1, False)):
    """The module a PyTorch file of ``stack`` stored in ``fmt`` reads as (the tensors rounded to nearest)."""
    system, config = LAYER[stack.family], LayerConfig(*shape)
    native = write(stack, system, config)
    return read_as({key: value.astype(numpy_dtype(fmt)) for key, value in native.items()}, system)


def float_module(stack: StackParams, shape=(1, False)):
    return read_as(write(stack, LAYER[stack.family], LayerConfig(*shape)), LAYER[stack.family])


@settings(max_examples=15, deadline=None)
@given(family=st.sampled_from(["rnn", "lstm", "gru"]), sizes=st.tuples(st.integers(1, 6), st.integers(1, 6)),
       shape=st.sampled_from([(1, False), (2, False), (1, True), (2, True)]), seed=st.integers(0, 2**16),
       fmt=st.sampled_from(["float16", "bfloat16"]))
def test_the_half_bounds_hold_and_are_honest_over_seeds_and_sizes(family, sizes, shape, seed, fmt):
    """Every judgment of a correctly rounded file, the whole run's and each step's, within its bound and honest,
    over families, sizes, stacked and bidirectional layers (where a whole bfloat16 run's worst case would not be:
    a step's does not compound)."""
    stack = StackParams.random(family, *sizes, *shape, seed=seed, dtype=np.float32)
    verdict = verify_modules(float_module(stack, shape), half_module(stack, fmt, shape), diagnose=False)
    found = {key: c.ratio for key, c in verdict.half.runs.items()}
    assert verdict.equivalent and all(HONEST <= r <= 1 for r in found.values()), (verdict.reason, found)


MISTAKES = ["each gate block of W_h transposed", "the {} gates {} and {} exchanged in W_x, W_h and the biases",
            "b_h (bias_hh, the recurrent bias) dropped", "the summed bias b_x + b_h put in both slots (doubled)"]


# Short of full depth, every pair of a family, a format and a mistake (8 of the 16: harness/depth.py, "Tests of
# the reference and the machinery"); each verify diagnoses, trying every mistake of its catalogue (about 1.5 s).
@pytest.mark.factors(**{"family,gates": [pytest.param("lstm", ("i", "f"), id="lstm"),
                                         pytest.param("gru", ("r", "z"), id="gru")],
                        "fmt": ["float16", "bfloat16"],
                        "what": [pytest.param(what, id=f"mistake{i}") for i, what in enumerate(MISTAKES)]})
def test_a_wrong_port_rounded_to_a_half_format_is_caught_and_named(family, gates, fmt, what):
    """A mistake made on the float32 weights (the diagnosis's catalogue: every layer), then rounded to the format:
    the parameters name the tensors that are not the original's rounded, every run exceeds its bound, and the
    diagnosis names the mistake (judged by the bound of the mistake's weights rounded)."""
    stack = StackParams.random(family, 3, 5, 2, seed=7, dtype=np.float32)
    original, catalogue = float_module(stack, (2, False)), dict(mistakes(stack))
    mistake = what.format(family.upper(), *gates)
    verdict = verify_modules(original, half_module(catalogue[mistake](stack), fmt, (2, False)), steps=3)
    assert not verdict.equivalent and verdict.half.differing, (mistake, verdict.reason)
    assert all(c.ratio > 1 for c in verdict.half.runs.values()), (mistake, verdict.reason)
    assert mistake in [e.mistake for e in verdict.diagnosis], (mistake, verdict.explanations())


def test_a_wrong_port_in_float16_exits_1_with_the_diagnosis(tmp_path):
    stack = StackParams.random("lstm", 3, 5, seed=7, dtype=np.float32)
    dropped = dict(mistakes(stack))["b_h (bias_hh, the recurrent bias) dropped"](stack)
    np.savez(tmp_path / "a.npz", **write(stack, "torch-lstm"))
    np.savez(tmp_path / "b.npz", **{k: v.astype(np.float16) for k, v in write(dropped, "torch-lstm").items()})
    result = run("verify", tmp_path / "a.npz", tmp_path / "b.npz")
    assert result.exit_code == 1 and "NOT EQUIVALENT IN FLOAT16" in text(result), result.output
    assert "parameters: layer 0 forward b_h: " in text(result) and "spacings off" in text(result), result.output
    assert "explained: B is A with b_h (bias_hh, the recurrent bias) dropped" in text(result), result.output


def test_a_file_rounded_toward_zero_is_not_rounded_to_nearest():
    """Truncated, not rounded: its runs stay within the bound (a weight moved by one spacing, not half, moves the
    function by about as much as the rounding's worst case), so only the parameters catch it, by name."""
    stack = StackParams.random("gru", 3, 5, 2, seed=7, dtype=np.float32)
    native = write(stack, "torch-gru-rnn", LayerConfig(2, False))
    truncated = {}
    for name, value in native.items():
        half = value.astype(np.float16)
        away = np.abs(half.astype(np.float64)) > np.abs(value.astype(np.float64))
        half[away] = np.nextafter(half[away], np.float16(0))
        truncated[name] = half
    verdict = verify_modules(float_module(stack, (2, False)), read_as(truncated, "torch-gru-rnn"), diagnose=False)
    assert all(c.equivalent for c in verdict.half.runs.values()), verdict.reason
    assert not verdict.equivalent and "layer 0 forward W_x: 0.98 float16 spacings off" in verdict.half.differing[0]


def test_bad_half_input_is_refused_by_name(tmp_path):
    stack = StackParams.random("lstm", 3, 5, seed=1, dtype=np.float32)
    native = write(stack, "torch-lstm")
    a = tmp_path / "a.npz"
    np.savez(a, **native)
    half = {key: value.astype(np.float16) for key, value in native.items()}
    files = {"int8.npz": ({**half, "weight_hh": (native["weight_hh"] * 100).astype(np.int8)}, 2,
                          "weight_hh: expected a float16, bfloat16, float32 or float64 array, got dtype int8, which "
                          "is not supported"),
             "rows.npz": ({**half, "weight_hh": half["weight_hh"][:18]}, 2, "weight_hh has 18 rows for hidden_size 5"),
             "dtypes.npz": ({**half, "bias_hh": native["bias_hh"]}, 2, "expected one dtype for all parameters"),
             "other.npz": ({key: value.astype(np.float16) for key, value in
                            write(StackParams.random("lstm", 3, 4, seed=1), "torch-lstm").items()}, 1,
                           "different structures: hidden_size 5 vs 4")}
    for name, (weights, code, message) in files.items():
        np.savez(tmp_path / name, **weights)
        result = run("verify", a, tmp_path / name)
        assert result.exit_code == code and message in text(result), (name, result.output)
    np.savez(tmp_path / "b.npz", **half)
    np.save(tmp_path / "x.npy", np.full((2, 1, 3), 1e5))  # beyond float16's largest value
    result = run("verify", a, tmp_path / "b.npz", "--inputs", tmp_path / "x.npy")
    assert result.exit_code == 2 and "a float16 model cannot take them" in text(result), result.output
    with pytest.raises(FileRefused, match="--inputs"):
        verify_modules(read_as(native, "torch-lstm"), read_as(half, "torch-lstm"), inputs=np.full((2, 1, 3), 1e5))
