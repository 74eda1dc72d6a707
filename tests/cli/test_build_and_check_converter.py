"""``rnn_equivalence.frameworks.build`` gives each framework's own object holding canonical parameters (it computes the
reference's function: checked here on one case each); ``rnn_equivalence.converter_check.check_converter`` runs a
user's converter over the suite's design, passing a correct one and failing, by name, a converter that
gets the gate order wrong and one that hides a broken input."""

import numpy as np
import pytest

from rnn_equivalence.frameworks.build import build
from rnn_equivalence.frameworks.convert import ConversionRefused, convert
from rnn_equivalence.converter_check import check_converter
from rnn_equivalence.reference.tolerance import reference_and_bound
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import random_inputs
from rnn_equivalence.reference.stack import StackParams

I, H = 5, 3


def numpy_gru_in_keras_layout(weights, xs, state, config):
    """A user's own GRU (reset_after), reading Keras's layout: kernel (I, 3H) in z r h order, recurrent_kernel
    (H, 3H), bias (2, 3H) = input and recurrent biases. What a user's port might run on."""
    kernel, recurrent, (b_x, b_h) = weights["kernel"], weights["recurrent_kernel"], weights["bias"]
    h = np.zeros((xs.shape[1], recurrent.shape[0]), xs.dtype) if state is None else state["h"][0]
    sigmoid = lambda z: 1 / (1 + np.exp(-z))
    out = []
    for x in xs:
        xz, xr, xh = np.split(x @ kernel + b_x, 3, axis=-1)
        hz, hr, hh = np.split(h @ recurrent + b_h, 3, axis=-1)
        z, r = sigmoid(xz + hz), sigmoid(xr + hr)
        h = z * h + (1 - z) * np.tanh(xh + r * hh)
        out.append(h)
    return {"output": np.stack(out), "h_n": h[None]}


def correct(native, config):
    return convert(native, "torch-gru", "keras-tf-gru", config=config)


def copied_in_pytorchs_order(native, config):
    """The mistake: PyTorch's r z n rows transposed into Keras's columns, not reordered to z r h."""
    return {"kernel": native["weight_ih"].T, "recurrent_kernel": native["weight_hh"].T,
            "bias": np.stack([native["bias_ih"], native["bias_hh"]])}


def test_a_correct_converter_passes_over_the_whole_design():
    comparisons = check_converter("torch-gru", correct, numpy_gru_in_keras_layout)
    assert len(comparisons) >= 6 and all(c.ratio <= 1 for c in comparisons)


def test_a_converter_with_the_wrong_gate_order_fails_naming_the_case():
    with pytest.raises(AssertionError, match="EXCEEDS the bound"):
        check_converter("torch-gru", copied_in_pytorchs_order, numpy_gru_in_keras_layout)


def test_a_converter_that_hides_a_broken_input_fails_on_the_mutations():
    """A converter whose output for one shape is fixed (it loads a checkpoint of that shape instead of
    converting its input): right on the design, which has no 4 x 4 case, blind to the mutations."""
    from rnn_equivalence.frameworks import adapter_class
    from rnn_equivalence.harness.cases import mutation_cases

    adapter = adapter_class("torch-gru")()
    case = mutation_cases(adapter, "quick")[0]  # I = H = 4
    fixed = correct(adapter.to_native(case.stack("float32"), case.config), case.config)

    def fixed_for_one_shape(native, config):
        return fixed if native["weight_hh"].shape == fixed["recurrent_kernel"].T.shape else correct(native, config)

    with pytest.raises(AssertionError, match="the check cannot tell this input mistake apart"):
        check_converter("torch-gru", fixed_for_one_shape, numpy_gru_in_keras_layout)


@pytest.mark.parametrize("name", ["torch-lstm-rnn", "keras-tf-gru-rnn", "onnx-ort-lstm"])
def test_build_gives_the_frameworks_own_object_computing_the_reference(name, load_system):
    system = name
    load_system(system)
    family = {"torch-lstm-rnn": "lstm", "keras-tf-gru-rnn": "gru", "onnx-ort-lstm": "lstm"}[system]
    layers, bidirectional = (1, True) if system.startswith("onnx") else (2, True)
    stack = StackParams.random(family, I, H, layers, bidirectional, seed=4, dtype=np.float32)
    xs = random_inputs(6, 2, I, 0, np.float32)
    expected, bound = reference_and_bound(stack, xs, None, "float32")
    allowed = bound["output"] + reference_and_bound(stack, xs, None, "float64")[1]["output"]  # both round
    built = build(system, stack, LayerConfig(layers, bidirectional))
    if system.startswith("torch"):
        import torch

        assert isinstance(built, torch.nn.LSTM)
        output = built(torch.from_numpy(xs))[0].detach().numpy()
    elif system.startswith("keras"):
        import keras

        assert isinstance(built, keras.Sequential)
        output = np.asarray(built(xs.transpose(1, 0, 2))).transpose(1, 0, 2)
    else:
        import onnx
        import onnxruntime

        assert isinstance(built, onnx.ModelProto)
        session = onnxruntime.InferenceSession(built.SerializeToString(), providers=["CPUExecutionProvider"])
        y = session.run(["Y"], {"X": xs})[0]  # (T, D, batch, H), for any T and batch
        output = np.concatenate([y[:, 0], y[:, 1]], axis=-1)
    assert np.all(np.abs(output - expected["output"]) <= allowed), np.max(np.abs(output - expected["output"]) / allowed)


@pytest.mark.parametrize("name", ["flax-linen-lstm", "flax-nnx-gru"])
def test_build_gives_a_flax_cell_computing_the_reference(name, load_system):
    """A Flax cell (linen: the module and its variables; nnx: the module), one step from a state, within the
    bound of the reference's step."""
    load_system(name)
    import jax.numpy as jnp

    family = name.split("-")[-1]
    stack = StackParams.random(family, I, H, seed=6, dtype=np.float32)
    if name == "flax-nnx-gru":  # nnx's GRUCell has no b_hn: a cell it can hold
        p = stack.layers[0][0]
        b_h = p.b_h.copy()
        b_h[2 * H:] = 0
        stack = StackParams([[p.replace(b_h=b_h)]])
    xs, state = random_inputs(1, 2, I, 1, np.float32), {"h": np.full((1, 2, H), 0.25, np.float32)}
    if family == "lstm":
        state["c"] = np.full((1, 2, H), -0.5, np.float32)
    expected, bound = reference_and_bound(stack, xs, state, "float32")
    allowed = bound["output"] + reference_and_bound(stack, xs, state, "float64")[1]["output"]
    built = build(name, stack)
    carry = (jnp.asarray(state["c"][0]), jnp.asarray(state["h"][0])) if family == "lstm" else jnp.asarray(state["h"][0])
    if name.startswith("flax-linen"):
        cell, variables = built
        new_carry, _ = cell.apply(variables, carry, jnp.asarray(xs[0]))
    else:
        new_carry, _ = built(carry, jnp.asarray(xs[0]))
    h = np.asarray(new_carry[1] if family == "lstm" else new_carry)
    assert np.all(np.abs(h - expected["output"][0]) <= allowed[0]), (
        np.max(np.abs(h - expected["output"][0]) / allowed[0]))


def test_build_refuses_what_it_does_not_build():
    stack = StackParams.random("rnn", I, H, seed=1)
    with pytest.raises(ConversionRefused, match="is not built here"):
        build("flax-nnx-rnn", stack)
