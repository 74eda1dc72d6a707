"""MNN (3.6.1, in its own environment: ``nox -s mnn``): MNNConvert converting the ONNX RNN, LSTM and GRU nodes the
suite builds, and ``torch.onnx.export``'s models of ``nn.LSTM``, run in MNN's Python runtime.

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/mnn_export.py. Measured here:

- the ops the conversion emits: an RNN node MNN's fused ``RNN`` op; an LSTM or GRU node a ``While`` loop (its body
  one step), the input projection a ``Convolution`` before it;
- refused loudly by MNNConvert: an LSTM's ``P`` (peepholes) and its HardSigmoid activations;
- computed differently, silently (a model is written and runs): ``direction="reverse"``, ``layout=1``,
  ``sequence_lens``, ``clip``, an LSTM's ``input_forget``, a GRU's ``linear_before_reset=0`` and its activations
  other than the default, an RNN's activations other than tanh. Each is shown far outside the bound of the node
  it was converted from, said what it computes instead where measured, and refused by the systems with the
  reason;
- the threads: MNN#1138 (only the first step output, ``batch_first`` ignored) and MNN#2500 (a large LSTM differs
  between ONNX and MNN), each reproduced as the thread's user wrote it (``torch.onnx.export`` of ``nn.LSTM``) and
  held to the float64 reference of the module's own weights.
"""

import io
import warnings

import numpy as np
import pytest

from rnn_equivalence.frameworks.mnn_export import (
    OPERATORS, RECURRENT, ConversionRefused, convert_onnx, operator_dump, operator_types, run_module,
)
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from tests.equivalence.test_converters import design_models
from tests.equivalence.test_options_onnx import ORDERS_OF_MAGNITUDE, STEPS, against, run

FORWARD = LayerConfig(1, False, options=(("direction", "forward"), ("layout", 0)))


def is_mnn(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.mnn_export"


def node_outputs(adapter, native, case, config, state):
    """The converted node's outputs (Y, Y_h[, Y_c]) as MNN returns them, past the system's refusals."""
    model, feeds, outputs = adapter.model(native, case.inputs("float32"), state, config, case.activation,
                                          case.padding)
    return dict(zip(outputs, adapter.evaluate(model, feeds, outputs)))


# --- the ops ------------------------------------------------------------------------------------------


@pytest.mark.applies_to(lambda cls: is_mnn(cls))
def test_mnn_emits_the_declared_ops(adapter, depth, design_seed):
    """Every converted model of the design (each activation, each configuration) and the mutations' configuration:
    its recurrent ops, read back from the .mnn model (its JSON dump, its subgraphs included), are one kind: MNN's
    fused ``RNN`` op for an RNN node, a ``While`` loop for an LSTM or GRU node, with the input projection of
    every step one ``Convolution`` before it in the main graph (a node of one step may be unrolled, its step's
    ops only: measured for a GRU, and an LSTM fed an initial state). Never MNN's fused ``LSTM`` op (that is
    ``--useOriginRNNImpl``'s). A release that fuses, or unrolls, turns this red."""
    runs = design_models(adapter, depth, design_seed, adapter.mutation_config)
    assert runs
    for case in runs:
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        found = adapter.operator_set() & set(RECURRENT)
        expected = {OPERATORS[adapter.family]}
        if adapter.family != "rnn" and case.steps == 1:  # one step: the converter may unroll it, never fuse
            assert found <= expected, (case.config, case.steps, adapter.last_operators)
        else:
            assert found == expected, (case.config, case.steps, adapter.last_operators)
        if adapter.family != "rnn":
            assert "Convolution" in adapter.last_operators["main"], adapter.last_operators


# --- refused loudly by MNNConvert -----------------------------------------------------------------------


@pytest.mark.applies_to(lambda cls: cls.name == "mnn-lstm")
@pytest.mark.parametrize("spec, options, said", [
    ("hard_sigmoid_0.2,tanh,tanh", "", "MNN LSTM Don't support activation: HardSigmoid"),
    ("hard_sigmoid_relu6,tanh,tanh", "", "MNN LSTM Don't support activation: HardSigmoid"),
    ("default", "peepholes", r"MNN LSTM not support 8th input \(peepholes\)"),
])
def test_mnnconvert_refuses_loudly(adapter, spec, options, said, monkeypatch):
    """MNNConvert writes no model, saying why: an LSTM node's HardSigmoid, its P. Hence the LSTM system's
    activations and its refused peepholes; a release that converts one turns this red."""
    monkeypatch.setattr(adapter, "refused_options", {})
    monkeypatch.setattr(adapter, "options", adapter.options + ((options,) if options else ()))
    case = case_of(adapter, 5, 4, 2, 3, 981, FORWARD, activation=spec, options=options)
    with pytest.raises(ConversionRefused, match=said):
        run(adapter, case, "float32", monkeypatch)


# --- computed differently, silently ------------------------------------------------------------------------


# (activation, options, what MNN computes instead: the same node with this activation and these options, or
# None where that is not measured to be one of the suite's cells).
SILENT = {
    "rnn": [("relu", "", ("tanh", "")), ("identity", "", ("tanh", "")), ("hard_sigmoid_0.2", "", ("tanh", "")),
            ("tanh", "gate_clip", ("tanh", ""))],
    "lstm": [("default", "gate_clip", ("default", "")), ("default", "coupled_gates", ("default", ""))],
    "gru": [("hard_sigmoid_0.2,tanh", "", ("default", "")), ("hard_sigmoid_relu6,tanh", "", ("default", "")),
            ("sigmoid,relu", "", ("default", "")), ("default", "gate_clip", ("default", ""))],
}
@pytest.mark.applies_to(lambda cls: is_mnn(cls))
def test_mnn_ignores_what_the_node_says(adapter, monkeypatch, record):
    """A node whose activations or options MNN does not compute (``SILENT``, the system's family) converts and
    runs, far outside the bound of the cell the node describes, and within the bound of the node without them (an
    RNN's Relu, Affine, HardSigmoid computed as tanh; a GRU's activations as the default ones; clip and
    input_forget dropped). Hence each system's activations and refused options. A release that honours one
    turns this red."""
    rows = SILENT[adapter.family]
    assert rows
    for spec, options, instead in rows:
        with monkeypatch.context() as patch:
            patch.setattr(adapter, "refused_options", {})
            patch.setattr(adapter, "options", adapter.options + ((options,) if options else ()))
            case = case_of(adapter, 5, 4, 3, STEPS, 982, FORWARD, activation=spec, options=options)
            actual = run(adapter, case, "float32", patch)
        comparison = against(adapter, case, "float32", actual, case.reference(),
                             case.bound_vs_reference("float32"), "the float64 reference")
        print(f"MNN, {spec} {options}: {comparison.message()}")
        assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
        other = case.with_(activation=instead[0], options=instead[1])
        assert_within_bound(against(adapter, other, "float32", actual, other.reference(),
                                    other.bound_vs_reference("float32"), f"the node with {instead}"))
        what = f"options {options}" if options else f"activations {spec}"
        record("nonequivalence", adapter, other=f"the ONNX {adapter.family.upper()} node with {what}",
               dtype="float32", reason=f"MNN computes the node with activations {instead[0]}, options "
                                       f"{instead[1] or 'none'}", **comparison.as_record())


@pytest.mark.applies_to(lambda cls: is_mnn(cls))
def test_mnn_runs_a_reverse_node_as_another_function(adapter, record):
    """``direction="reverse"``: converted and run, far outside the bound of the node; the system refuses it,
    naming why. A release that runs it right turns this red."""
    config = LayerConfig(1, False, options=(("direction", "reverse"), ("layout", 0)))
    case = case_of(adapter, 5, 4, 3, 7, 983, config)
    native = adapter.to_native(case.stack("float32"), config)
    actual = node_outputs(adapter, native, case, config, case.state("float32"))
    comparison = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                         "the float64 reference")
    print(f"MNN, direction=reverse: {comparison.message()}")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    with pytest.raises(ValueError, match="direction='reverse' refused: MNN 3.6.1 runs"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config)
    record("nonequivalence", adapter, other=f"the ONNX {adapter.family.upper()} node with direction=reverse",
           dtype="float32", reason="MNN runs a reverse node as another function", **comparison.as_record())


@pytest.mark.applies_to(lambda cls: is_mnn(cls))
def test_mnn_reads_a_batch_first_node_as_time_major(adapter, record):
    """MNN#1138's symptom, at the node: ``layout=1`` (X is (batch, T, I)) is read as ``layout=0``. The converted
    node returns Y in the time-major shape (batch, D, T, H) of X read as (T', batch') = (batch, T): the sequence
    run along the batch axis, each of the T real steps a batch element of its own, so that for batch 1 every
    output is one step from the initial state ("only the first step"). Measured: within the float64 bound of
    that run. The system refuses layout=1, naming why."""
    config = LayerConfig(1, False, bias=False, initial_state=False, options=(("direction", "forward"),
                                                                           ("layout", 1)))
    case = case_of(adapter, 5, 4, 1, 6, 984, config)
    native = adapter.to_native(case.stack("float32"), config)
    actual = node_outputs(adapter, native, case, config, None)
    T, batch, H = case.steps, case.batch, case.hidden_size
    assert actual["Y"].shape == (batch, 1, T, H) != (batch, T, 1, H)  # layout 1's shape is (batch, T, D, H)
    xs = case.inputs("float64")  # (T, batch, I): the node is fed X = xs.transpose(1, 0, 2)
    swapped = xs.transpose(1, 0, 2)  # read time-major: T' = batch steps of T' elements
    stack = case.stack("float32").astype("float64")
    expected, bound32 = reference_and_bound(stack, swapped, None, "float32")
    _, bound64 = reference_and_bound(stack, swapped, None, "float64")
    bound = pair_bound(bound32, bound64)
    first_steps = compare_outputs({"output": actual["Y"][:, 0]}, {"output": expected["output"]},
                                  {"output": bound["output"]}, "MNN's Y vs the sequence along the batch axis")
    print(f"MNN#1138 at the node: {first_steps.message()}")
    assert_within_bound(first_steps)
    with pytest.raises(ValueError, match="layout=1 refused: MNN 3.6.1 reads a layout=1"):
        adapter.run(case.stack("float32"), case.inputs("float32"), None, config)
    record("nonequivalence", adapter, other=f"the ONNX {adapter.family.upper()} node with layout=1",
           dtype="float32", reason="MNN reads layout=1 as layout=0 (MNN#1138's symptom)",
           **first_steps.as_record())


@pytest.mark.applies_to(lambda cls: is_mnn(cls))
def test_mnn_drops_sequence_lens(adapter, record):
    """A padded batch (``sequence_lens``): MNNConvert converts the node without it (for an LSTM it says so, "MNN
    LSTM not support sequence_lens, all batch must be seq_length, the result may has error"): every element runs
    all T steps, within the bound of the unpadded run and far outside that of the padded one. Hence no padded
    configurations; the system refuses a padded batch, naming why."""
    config = LayerConfig(1, False, initial_state=False, options=(("direction", "forward"),))
    case = case_of(adapter, 5, 4, 4, 9, 985, config, padding=Padding((5, 9, 1, 7), "post"))
    native = adapter.to_native(case.stack("float32"), config)
    actual = node_outputs(adapter, native, case, config, None)
    comparison = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                         "the float64 reference of the padded batch")
    print(f"MNN, sequence_lens: {comparison.message()}")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    unpadded = case.with_(padding=None)
    assert_within_bound(against(adapter, unpadded, "float32", actual, unpadded.reference(),
                                unpadded.bound_vs_reference("float32"), "every element's T steps"))
    with pytest.raises(ValueError, match=r"padded batches are not supported by this system \(sequence_lens refused: "
                                         r"MNNConvert 3.6.1"):
        adapter.run(case.stack("float32"), case.inputs("float32"), None, config, case.padding)
    record("nonequivalence", adapter, other=f"the ONNX {adapter.family.upper()} node with sequence_lens",
           dtype="float32", reason="MNN drops sequence_lens: every element runs all steps", **comparison.as_record())


@pytest.mark.applies_to(lambda cls: cls.name == "mnn-gru")
def test_mnn_runs_a_reset_before_gru_as_another_function(adapter, monkeypatch, record):
    """``linear_before_reset=0`` (the ONNX default, Keras's reset-before GRU): converted and run, far outside its
    bound; bidirectional, the run fails ("Reshape error"). Hence no reset-before system, and the runner refuses
    the variant by name."""
    monkeypatch.setattr(adapter, "variant", "reset_before")
    case = case_of(adapter, 5, 4, 3, 7, 986, FORWARD)
    assert case.variant == "reset_before"
    native = adapter.to_native(case.stack("float32"), FORWARD)
    actual = node_outputs(adapter, native, case, FORWARD, case.state("float32"))
    comparison = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                         "the float64 reference")
    print(f"MNN, linear_before_reset=0: {comparison.message()}")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    bidirectional = LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0)))
    both = case_of(adapter, 5, 4, 3, 7, 987, bidirectional)
    with pytest.raises(RuntimeError, match="MNN returned 0 outputs"):
        node_outputs(adapter, adapter.to_native(both.stack("float32"), bidirectional), both, bidirectional,
                     both.state("float32"))
    with pytest.raises(ValueError, match="linear_before_reset=0 refused"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), FORWARD)
    record("nonequivalence", adapter, other="the ONNX GRU node with linear_before_reset=0", dtype="float32",
           reason="MNN runs the reset-before GRU as another function", **comparison.as_record())


# --- the threads: torch.onnx.export of nn.LSTM, converted and run as their users did -------------------------


def exported_lstm(torch, layer, args, names, steps):
    """``torch.onnx.export`` (the TorchScript exporter, as the threads' users ran it) of a module returning the
    layer's (output, h_n, c_n), its input viewed as (-1, steps, I) (MNN#1138's ``x.view((-1, 48, 224))``); the ONNX
    bytes."""

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, *state):
            output, (h, c) = self.layer(x.view(-1, steps, x.shape[-1]), tuple(state) if state else None)
            return output, h, c

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Module().eval(), args, buffer, dynamo=False, input_names=list(names),
                          output_names=["output", "h_n", "c_n"])
    return buffer.getvalue()


def thread_case(torch, input_size, hidden_size, layers, leading, steps, with_state, seed):
    """``nn.LSTM(input_size, hidden_size, layers, batch_first=True)`` with PyTorch's own initialization (the
    suite's case generator draws distinct values, which at the threads' sizes it cannot), inputs of shape
    ``leading + (steps, input_size)`` and, ``with_state``, an initial state; the float64 reference of its weights
    and the float32 bound against it, in PyTorch's batch-first layout."""
    from rnn_equivalence.frameworks import adapter_class

    torch.manual_seed(seed)
    layer = torch.nn.LSTM(input_size, hidden_size, layers, batch_first=True)
    torch_lstm = adapter_class("torch-lstm-rnn")()  # PyTorch's layer mapping (nothing imported)
    config = LayerConfig(layers, False, initial_state=with_state, options=(("batch_first", True),))
    stack = torch_lstm.from_native({k: v.detach().numpy().copy() for k, v in layer.named_parameters()}, config)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (*leading, steps, input_size)).astype(np.float32)
    batch = int(np.prod(leading))
    state = ({key: rng.uniform(-0.5, 0.5, (layers, batch, hidden_size)).astype(np.float32) for key in ("h", "c")}
             if with_state else None)
    xs = x.reshape(batch, steps, input_size).transpose(1, 0, 2).astype(np.float64)  # (T, batch, I)
    state64 = None if state is None else {k: v.astype(np.float64) for k, v in state.items()}
    expected, bound32 = reference_and_bound(stack.astype("float64"), xs, state64, "float32")
    _, bound64 = reference_and_bound(stack.astype("float64"), xs, state64, "float64")
    arrange = lambda result: torch_lstm.arrange(result, config)  # noqa: E731
    return layer, x, state, arrange(expected), arrange(pair_bound(bound32, bound64))


def mnn_and_ort(torch, data, feeds):
    """The exported model's (output, h_n, c_n) in MNN (converted by default) and in ONNX Runtime."""
    import MNN
    import onnxruntime

    names = ["output", "h_n", "c_n"]
    converted = convert_onnx(data)
    in_mnn = dict(zip(names, run_module(MNN, converted, feeds, names)))
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    return converted, in_mnn, dict(zip(names, session.run(names, feeds)))


@pytest.mark.applies_to(lambda cls: cls.name == "mnn-lstm")
def test_mnn_1138_every_step_batch_first_refuted(adapter):
    """MNN#1138 ("LSTM do not convert correctly from ONNX to MNN": only the first step's output, ``batch_first``
    ignored), the thread's module: ``nn.LSTM(224, 128, 1, batch_first=True)`` on ``x.view(-1, 48, 224)`` of a
    (7, 3, 16, 224) input, exported by ``torch.onnx.export`` and converted by MNNConvert 3.6.1. Refuted: the MNN
    model returns (7, 48, 128), every step, batch first, within the float64 reference's float32 bound (err/bound
    printed with ``-s``). torch's exporter writes a layout=0 LSTM node between Transposes; the symptom itself is
    what MNN makes of a layout=1 node (``test_mnn_reads_a_batch_first_node_as_time_major``)."""
    import torch

    layer, x, _, expected, bound = thread_case(torch, 224, 128, 1, (7,), 48, False, 1138)
    x = x.reshape(7, 3, 16, 224)  # the thread's input, which its module views as (-1, 48, 224)
    data = exported_lstm(torch, layer, (torch.from_numpy(x),), ["x"], 48)
    converted, in_mnn, in_ort = mnn_and_ort(torch, data, {"x": x})
    ops = operator_types(operator_dump(converted))
    assert "While" in {op for graph in ops.values() for op in graph}, ops
    assert in_mnn["output"].shape == (7, 48, 128) == expected["output"].shape
    comparison = compare_outputs(in_mnn, expected, bound, "MNN#1138: torch.onnx.export(nn.LSTM(224, 128, "
                                 "batch_first=True)) converted by MNNConvert, in MNN")
    print(f"MNN#1138: {comparison.message()}; max |MNN - ONNX Runtime| "
          f"{max(float(np.abs(in_mnn[k] - in_ort[k]).max()) for k in in_ort):.3g}")
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "mnn-lstm")
@pytest.mark.parametrize("steps", [1, 32])
@pytest.mark.parametrize("converter_options", [(), ("--useOriginRNNImpl",)], ids=["while", "fused-lstm"])
def test_mnn_2500_large_lstm_refuted(adapter, steps, converter_options):
    """MNN#2500 (a large LSTM, "参数量较大", differs between ONNX and MNN; MNN 2.6.1): the thread's layer,
    ``nn.LSTM(256, 128, 2, batch_first=True)`` given (h0, c0), one step as in the thread and 32 steps, exported by
    ``torch.onnx.export``, converted by MNNConvert 3.6.1 both ways (by default a ``While`` loop; with
    ``--useOriginRNNImpl`` MNN's fused ``LSTM`` op for more than one step). Refuted with 3.6.1: MNN is within the
    float64 reference's float32 bound, as ONNX Runtime is (err/bound printed with ``-s``)."""
    import MNN
    import torch

    layer, x, state, expected, bound = thread_case(torch, 256, 128, 2, (1,), steps, True, 2500)
    args = (torch.from_numpy(x), torch.from_numpy(state["h"]), torch.from_numpy(state["c"]))
    data = exported_lstm(torch, layer, args, ["x", "h0", "c0"], steps)
    converted = convert_onnx(data, *converter_options)
    ops = {op for graph in operator_types(operator_dump(converted)).values() for op in graph}
    if steps > 1:
        assert ("LSTM" if converter_options else "While") in ops, ops
    feeds = {"x": x, "h0": state["h"], "c0": state["c"]}
    names = ["output", "h_n", "c_n"]
    in_mnn = dict(zip(names, run_module(MNN, converted, feeds, names)))
    comparison = compare_outputs(in_mnn, expected, bound, f"MNN#2500: nn.LSTM(256, 128, 2) over {steps} step(s), "
                                 f"MNNConvert {' '.join(converter_options) or '(default)'}, in MNN")
    print(f"MNN#2500: {comparison.message()}")
    assert_within_bound(comparison)
