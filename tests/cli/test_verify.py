"""``rnn-equivalence verify A B``: two files' recurrent modules settled pair by pair (exit 0 equivalent,
1 not, 2 bad input), across frameworks (``--b-as``), and a difference diagnosed: every porting mistake of
rnn_equivalence/diagnose.py, made on purpose, is caught and named. The mapping and the reference only
(``--no-run``): no framework is imported here (tests/cli/test_framework_files.py runs them)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from rnn_equivalence.frameworks.convert import ConversionRefused, convert, write
from rnn_equivalence.frameworks.files import Module, read_as
from rnn_equivalence.cli import main
from rnn_equivalence.diagnose import mistakes, suspects
from rnn_equivalence.verify import inputs_for, verify_modules
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.stack import StackParams

I, H = 5, 3  # non-square; random biases, distinct in every slot


def run(*args):
    """The command, in this process; verify and convert without the frameworks unless ``--run`` is given."""
    args = list(map(str, args))
    if args[0] in ("verify",) and "--run" not in args:
        args.append("--no-run")
    elif "--run" in args:
        args.remove("--run")
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    return result


def save(path, weights):
    np.savez(path, **weights)
    return path


def torch_gru(seed=1):
    return write(StackParams.random("gru", I, H, seed=seed), "torch-gru")


def test_a_file_against_itself_is_equivalent(tmp_path):
    path = save(tmp_path / "a.npz", torch_gru())
    result = run("verify", path, path)
    assert result.exit_code == 0 and "verdict: equivalent" in result.output, result.output


def test_a_correct_port_to_keras_is_equivalent_and_a_copied_gate_order_is_diagnosed(tmp_path):
    a = save(tmp_path / "torch.npz", torch_gru())
    keras = convert(torch_gru(), "torch-gru", "keras-tf-gru")  # z r h columns, two biases (reset_after)
    result = run("verify", a, save(tmp_path / "keras.npz", keras), "--b-as", "keras-tf-gru")
    assert result.exit_code == 0, result.output
    # The port people get wrong: PyTorch's r z n blocks copied into Keras's z r h columns as they are.
    copied = {name: np.concatenate([np.split(v, 3, axis=-1)[i] for i in (1, 0, 2)], axis=-1)
              for name, v in keras.items()}
    result = run("verify", a, save(tmp_path / "copied.npz", copied), "--b-as", "keras-tf-gru", "--json")
    assert result.exit_code == 1, result.output
    (pair,) = json.loads(result.output)["pairs"]
    assert not pair["equivalent"] and pair["runs"]["float32"]["ratio"] > 100
    assert pair["diagnosis"][0]["mistake"] == "the GRU gates r and z exchanged in W_x, W_h and the biases"


def test_different_structures_are_not_equivalent_and_say_why(tmp_path):
    other = write(StackParams.random("gru", I, H + 1, seed=1), "torch-gru")
    result = run("verify", save(tmp_path / "a.npz", torch_gru()), save(tmp_path / "b.npz", other))
    assert result.exit_code == 1 and "hidden_size 3 vs 4" in result.output, result.output


def test_bad_input_exits_2(tmp_path):
    a = save(tmp_path / "a.npz", torch_gru())
    none = save(tmp_path / "none.npz", {"head.weight": np.ones((2, 2))})
    result = run("verify", a, none)
    assert result.exit_code == 2 and "1 in a.npz and 0 in none.npz" in result.output, result.output
    result = run("verify", a, a, "--b-as", "keras-tf-gru")  # PyTorch's names are not Keras's
    assert result.exit_code == 2 and "expected weights named like" in result.output, result.output
    result = run("verify", a, a, "--b-as", "no-such-system")
    assert result.exit_code == 2 and "no-such-system" in result.output, result.output


@pytest.mark.parametrize("name, family, layers, bidirectional", [
    ("torch-lstm-rnn", "lstm", 2, True), ("torch-gru-rnn", "gru", 2, True), ("torch-rnn", "rnn", 2, True),
    ("torch-lstm", "lstm", 1, False), ("torch", "rnn", 1, False),
])
def test_every_porting_mistake_is_caught_and_named(name, family, layers, bidirectional):
    """Each mistake of the catalogue made on a module (square I = H, and I = 2H for the layers, where a
    mistake needs it, so that it applies): verify finds the pair not equivalent, and the diagnosis names
    that mistake. On the cells every mistake but the permutations of more than two gates; on the layers
    one of each kind (each diagnosis tries the whole catalogue: 50 mistakes on a bidirectional LSTM)."""
    kinds = ["dropped", "directions", "layers"] if layers > 1 else ["dropped", "transposed"]
    kinds += ["gates"] if family != "rnn" else []
    kinds += ["variant"] if family == "gru" else []
    tried = set()
    # non-square, square (W_x transposed: I = H; layers exchanged: I = 2H)
    for size in (I, H, 2 * H)[:3 if layers > 1 else 2]:
        stack = StackParams.random(family, size, H, layers, bidirectional, seed=7)
        a = module(name, stack, layers, bidirectional)
        # the catalogue made on A, run once for every B compared with it (verify's own inputs: seed 0)
        suspected = suspects(a, *inputs_for(a, 0, steps=3))
        made = [(what, change) for what, change in mistakes(stack) if "instead of" not in what or "variant" in what]
        if layers > 1:
            made = list({next((k for k in kinds if k in what), what): (what, change) for what, change in made
                         if any(k in what for k in kinds)}.values())
        for what, change in made:
            # three steps: a mistake shows from the first (they are all in the first step's arithmetic)
            verdict = verify_modules(a, module(name, change(stack), layers, bidirectional), steps=3,
                                     suspected=suspected)
            assert not verdict.equivalent, f"{name}: {what} went unnoticed ({verdict.reason})"
            assert what in [e.mistake for e in verdict.diagnosis], (what, [e.mistake for e in verdict.diagnosis])
            tried.add(what)
    missing = [k for k in kinds if not any(k in what for what in tried)]
    assert not missing and len(tried) >= len(kinds), (missing, sorted(tried))


def module(system, stack, layers, bidirectional):
    """The module a file of ``system`` holding ``stack`` reads as (written and read by the mapping); where
    the system cannot hold the mistake (PyTorch computes one GRU variant), the module a file of a system
    that can hold it reads as: the same canonical parameters."""
    config = LayerConfig(layers, bidirectional)
    try:
        return read_as(write(stack, system, config), system)
    except ConversionRefused:
        first = stack.layers[0][0]
        return Module("", system, first.family, config, first.W_x.shape[1], first.W_h.shape[1], {}, stack)


def test_the_users_inputs_and_lengths_are_used_and_checked(tmp_path):
    a = save(tmp_path / "a.npz", torch_gru())
    inputs = np.random.default_rng(0).uniform(-1, 1, (6, 3, I))
    np.save(tmp_path / "x.npy", inputs)
    result = run("verify", a, a, "--inputs", tmp_path / "x.npy", "--lengths", "6,2,4", "--json")
    assert result.exit_code == 0, result.output
    (pair,) = json.loads(result.output)["pairs"]
    assert pair["runs"]["float32"]["worst_index"] is not None
    # B without its recurrent bias, on the user's padded batch: caught and named
    wrong = {**torch_gru(), "bias_hh": np.zeros_like(torch_gru()["bias_hh"])}
    result = run("verify", a, save(tmp_path / "b.npz", wrong), "--inputs", tmp_path / "x.npy", "--lengths", "6,2,4")
    assert result.exit_code == 1 and "B is A with b_h (bias_hh, the recurrent bias) dropped" in result.output, \
        result.output
    bad = {("--inputs", tmp_path / "x.npy", "--lengths", "6,2"): "--lengths",
           ("--inputs", tmp_path / "x.npy", "--lengths", "a,b,c"): "comma-separated integers",
           ("--lengths", "6,2,4"): "needs --inputs"}
    np.save(tmp_path / "wrong.npy", inputs[:, :, :2])
    bad[("--inputs", tmp_path / "wrong.npy")] = "input_size=5"
    for args, message in bad.items():
        result = run("verify", a, a, *args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)


def test_layer_pairs_modules_by_location(tmp_path):
    gru, rnn = torch_gru(), write(StackParams.random("rnn", I, H, seed=2), "torch")
    a = save(tmp_path / "a.npz", {**{f"enc.{k}": v for k, v in gru.items()}, **{f"dec.{k}": v for k, v in rnn.items()}})
    b = save(tmp_path / "b.npz", {**{f"x.{k}": v for k, v in rnn.items()}, **{f"y.{k}": v for k, v in gru.items()}})
    assert run("verify", a, b).exit_code == 1  # in order: enc with x, a GRU with an RNN
    result = run("verify", a, b, "--layer", "enc=y", "--layer", "dec=x")
    assert result.exit_code == 0, result.output
    result = run("verify", a, b, "--layer", "enc=z")
    assert result.exit_code == 2 and "no module 'z' in B" in result.output, result.output


def test_the_other_hard_sigmoid_is_named():
    stack = StackParams.random("lstm", I, H, seed=3, activation="hard_sigmoid_relu6,tanh,tanh")
    other = stack.map(lambda p: p.replace(activation="hard_sigmoid_0.2,tanh,tanh"))
    # a weight file does not hold the activation: the modules as a Keras 3 and a Keras 2 LSTM read them
    a, b = (Module("", "keras-tf-lstm", "lstm", LayerConfig(1, False), I, H, {}, s) for s in (stack, other))
    verdict = verify_modules(a, b, steps=3)
    assert not verdict.equivalent
    assert verdict.diagnosis[0].mistake.startswith("the other hard sigmoid"), verdict.diagnosis
