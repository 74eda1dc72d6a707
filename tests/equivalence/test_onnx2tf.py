"""onnx2tf (2.6.9, in its own environment: ``nox -s onnx2tf``) converting the ONNX RNN, LSTM and GRU nodes
the suite builds: the ops it emits, what it refuses, and what it computes differently.

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/onnx2tf_export.py. Measured here:

- refused loudly: the RNN's Affine and HardSigmoid, ``layout=1`` and ``clip``; the GRU's activations other
  than the default, and its ``clip``; every family's ``sequence_lens`` (onnx2tf's "flatbuffer_direct
  validation failed", or for an LSTM a custom op, ONNX_LSTM, that LiteRT refuses to run, as for its ``P``
  and ``input_forget``);
- computed differently, silently: an RNN node given ``initial_h`` returns ``initial_h`` as ``Y_h`` (its
  ``Y`` is right); an LSTM with ``clip`` or other activations becomes TFLite's fused LSTM kernel, which
  computes another cell. Each is shown far outside the bound of the cell the node describes, and
  refused by the system with the reason.
"""

from dataclasses import replace

import numpy as np
import pytest

from rnn_equivalence.frameworks.onnx2tf_export import OPERATORS
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.padding import Padding
from tests.equivalence.test_options_onnx import ORDERS_OF_MAGNITUDE, against, run


def is_onnx2tf(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.onnx2tf_export"


def first_config(adapter):
    """The system's first configuration, with an initial state where the system takes one."""
    return replace(adapter.configs[0], initial_state=True in adapter.initial_states)


@pytest.mark.applies_to(lambda cls: is_onnx2tf(cls))
def test_onnx2tf_emits_the_declared_ops(adapter):
    """An RNN node becomes TFLite's fused RNN kernel; an LSTM or GRU node with its default activations is
    unrolled (no recurrent op, no WHILE: the sequence length is fixed in the converted model)."""
    case = case_of(adapter, 5, 4, 2, 3, 980, first_config(adapter))
    adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
    recurrent = {op for op in adapter.last_operators if "SEQUENCE" in op or op in ("WHILE", "CUSTOM")}
    expected = OPERATORS[adapter.family]
    assert recurrent == (set() if expected == "unrolled" else {expected}), adapter.last_operators
    if expected == "unrolled":
        assert {"BATCH_MATMUL", "LOGISTIC", "TANH"} <= adapter.last_operators, adapter.last_operators


TOOL_REFUSES = "flatbuffer_direct validation failed|unresolved custom op: ONNX_LSTM"
# What onnx2tf refuses, by family: (activation spec, options, configuration or None: the system's first).
REFUSED = {
    "rnn": [("identity", "", None), ("hard_sigmoid_0.2", "", None), ("hard_sigmoid_relu6", "", None),
            ("tanh", "gate_clip", None),
            ("tanh", "", LayerConfig(1, False, initial_state=False,
                                     options=(("direction", "forward"), ("layout", 1))))],
    "gru": [("hard_sigmoid_0.2,tanh", "", None), ("hard_sigmoid_relu6,tanh", "", None), ("sigmoid,relu", "", None),
            ("default", "gate_clip", None)],
    "lstm": [("default", "peepholes", None), ("default", "coupled_gates", None)],
}


@pytest.mark.applies_to(lambda cls: is_onnx2tf(cls))
def test_onnx2tf_refuses_loudly(adapter, monkeypatch):
    """Each is refused with an error, never converted into something that runs: onnx2tf's own validation
    (RNN, GRU), or LiteRT's refusal of the custom op it emits (LSTM P, input_forget). Hence what the systems
    declare. A release that lowers one of them turns this red."""
    refused = REFUSED[adapter.family]
    assert refused
    monkeypatch.setattr(adapter, "refused_options", {})  # past the system's own refusal: the tool itself
    monkeypatch.setattr(adapter, "options", adapter.options + tuple(o for _, o, _ in refused if o))
    for k, (spec, options, config) in enumerate(refused):
        case = case_of(adapter, 5, 4, 2, 3, 981 + k, config or first_config(adapter), activation=spec, options=options)
        with pytest.raises((NotImplementedError, RuntimeError), match=TOOL_REFUSES):
            run(adapter, case, "float32", monkeypatch)


@pytest.mark.applies_to(lambda cls: is_onnx2tf(cls))
def test_onnx2tf_refuses_sequence_lens_loudly(adapter):
    """A padded batch (``sequence_lens``): refused by onnx2tf's validation (RNN, GRU), or converted to the
    custom op LiteRT refuses to run (LSTM). Hence no padded configurations."""
    config = replace(adapter.configs[0], initial_state=False, options=(("direction", "forward"),))
    case = case_of(adapter, 5, 4, 4, 9, 984, config, padding=Padding((5, 9, 1, 7), "post"))
    native = adapter.to_native(case.stack("float32"), config)
    model, feeds, outputs = adapter.model(native, case.inputs("float32"), None, config, case.activation, case.padding)
    assert "sequence_lens" in feeds
    with pytest.raises((NotImplementedError, RuntimeError), match=TOOL_REFUSES):
        adapter.evaluate(model, feeds, outputs)


@pytest.mark.applies_to(lambda cls: is_onnx2tf(cls) and cls.family == "rnn")
def test_onnx2tf_rnn_returns_the_initial_state_as_Y_h(adapter, record):
    """Given ``initial_h``, the converted RNN returns ``initial_h`` itself as ``Y_h`` (bit for bit), not the
    last state; its ``Y`` is within the bound. Hence the system refuses an initial state, naming this."""
    config = LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0)))
    case = case_of(adapter, 5, 4, 2, 6, 985, config)
    state = case.state("float32")
    assert state is not None
    native = adapter.to_native(case.stack("float32"), config)
    actual = run_past_refusal(adapter, native, case, state)
    bounds = adapter.arrange(case.bound_vs_reference("float32"), config)
    expected = adapter.arrange(case.reference(), config)
    np.testing.assert_array_equal(actual["Y_h"], state["h"])
    ratio = {name: float(np.max(np.abs(actual[name] - expected[name]) / bounds[name])) for name in ("Y", "Y_h")}
    assert ratio["Y"] <= 1 and ratio["Y_h"] > ORDERS_OF_MAGNITUDE, ratio
    with pytest.raises(ValueError, match="initial state refused"):
        adapter.run(case.stack("float32"), case.inputs("float32"), state, config)
    comparison = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                         "the float64 reference")
    record("nonequivalence", adapter, other="the ONNX RNN node with initial_h", dtype="float32",
           reason="onnx2tf returns initial_h as Y_h (Y is right)", **comparison.as_record())


def run_past_refusal(adapter, native, case, state):
    """The converted node on ``state``, past the system's refusal of an initial state."""
    model, feeds, outputs = adapter.model(native, case.inputs("float32"), state, case.config, case.activation)
    return dict(zip(outputs, (np.asarray(v) for v in adapter.evaluate(model, feeds, outputs))))


@pytest.mark.applies_to(lambda cls: is_onnx2tf(cls) and cls.family == "lstm")
@pytest.mark.parametrize("spec, options", [("default", "gate_clip"), ("sigmoid,relu,relu", ""),
                                           ("sigmoid,tanh,relu", "")])
def test_onnx2tf_lstm_fuses_into_another_cell(adapter, spec, options, monkeypatch, record):
    """An LSTM node with ``clip``, or with activations other than the default, becomes TFLite's fused
    UNIDIRECTIONAL_SEQUENCE_LSTM kernel and runs, far outside the bound of the cell the node describes.
    Hence the system has the default activations only and refuses clip, naming this."""
    monkeypatch.setattr(adapter, "refused_options", {})
    monkeypatch.setattr(adapter, "options", adapter.options + ((options,) if options else ()))
    case = case_of(adapter, 5, 4, 2, 10, 986, first_config(adapter), activation=spec, options=options)
    actual = run(adapter, case, "float32", monkeypatch)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in adapter.last_operators, adapter.last_operators
    comparison = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                         "the float64 reference")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    what = "clip" if options else f"activations {spec}"
    record("nonequivalence", adapter, other=f"the ONNX LSTM node with {what}", dtype="float32",
           reason="onnx2tf converts it to TFLite's fused LSTM kernel, another cell", **comparison.as_record())
