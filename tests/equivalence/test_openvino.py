"""OpenVINO (CPU) running the ONNX RNN, LSTM and GRU nodes the suite builds: what it computes where it
departs from the spec, what it refuses, and what its default settings compute.

The equivalence itself is the reference tests' (every design case, float32 forced with
``INFERENCE_PRECISION_HINT``): frameworks/onnx_rnn.py, ``OpenVinoEvaluation``. Measured here:

- an LSTM node's ``P`` and ``input_forget`` are dropped without an error, and its ``clip`` is ONNX
  Runtime's (c' unclipped into h): each is shown to be that other cell, within its bound, and far
  from the cell the node describes (those options are refused by the system, naming the reason);
- ``layout=1`` is read as ``layout=0`` (openvinotoolkit/openvino#37820): with an initial state the
  model is refused; without one it runs and answers for another batch and sequence length;
- Affine and HardSigmoid are refused (its cells take sigmoid, tanh and relu);
- the default settings: on a CPU with bf16 or f16 arithmetic the plugin's default inference precision
  is that, not float32; here the default is read and its run compared with the float32 run;
- the half hints (bf16, f16): on a CPU without the arithmetic the compiled model says f32 and computes it,
  bitwise; on one with it, the run is judged by the format's mixed bound (not yet run: no such CPU here).
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.onnx_rnn import OPENVINO_LSTM_DROPS
from rnn_equivalence.harness.cases import case_of, cases_for
from rnn_equivalence.reference.comparison import assert_within_bound
from rnn_equivalence.reference.config import LayerConfig
from tests.equivalence.test_options_onnx import (
    ORDERS_OF_MAGNITUDE, STEPS, against, is_onnx_operator, ort_clip_case, run, without_clip_before_h,
)


def is_openvino(cls):
    return is_onnx_operator(cls, "OpenVINO")


def computed_instead(adapter, option, monkeypatch):
    """(case with ``option``, the float64 results and bound of the cell OpenVINO computes instead,
    what it drops)."""
    if option == "gate_clip":
        case = ort_clip_case(adapter, "gate_clip", "default")
        expected, bounds = without_clip_before_h(case, "float32", monkeypatch)
        return case, expected, bounds, "c' unclipped into h"
    case = case_of(adapter, 5, 4, 2, STEPS, 960 + len(option), adapter.mutation_config, options=option)
    dropped = case.with_(options="")
    return case, dropped.reference(), dropped.bound_vs_reference("float32"), f"{option} dropped"


@pytest.mark.applies_to(lambda cls: is_openvino(cls) and cls.family == "lstm")
@pytest.mark.parametrize("option", sorted(OPENVINO_LSTM_DROPS))
def test_openvino_lstm_computes_another_cell_for_an_option(adapter, option, monkeypatch, record):
    """With ``P`` the node computes the LSTM without peepholes, with ``input_forget=1`` the uncoupled
    LSTM, with ``clip`` ONNX Runtime's cell: within the bound of that cell, far outside the bound of
    the cell the node describes. Hence the system refuses these options, with the reason."""
    case, expected, bounds, what = computed_instead(adapter, option, monkeypatch)
    actual = run(adapter, case, "float32", monkeypatch)  # past the system's own refusal: the node itself
    assert_within_bound(against(adapter, case, "float32", actual, expected, bounds, f"the float64 cell with {what}"))
    described = against(adapter, case, "float32", actual, case.reference(), case.bound_vs_reference("float32"),
                        "the float64 reference")
    assert described.ratio > ORDERS_OF_MAGNITUDE, described.message()
    with pytest.raises(ValueError, match=f"option '{option}' refused: OpenVINO"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
    record("nonequivalence", adapter, other=f"the ONNX LSTM node with {option}", dtype="float32",
           reason=OPENVINO_LSTM_DROPS[option].split(" (measured")[0], **described.as_record())


def batch_first(adapter, initial_state: bool) -> LayerConfig:
    direction = "bidirectional" if adapter.family == "rnn" else "forward"
    return LayerConfig(1, direction == "bidirectional", initial_state=initial_state,
                       options=(("direction", direction), ("layout", 1)))


@pytest.mark.applies_to(lambda cls: is_openvino(cls))
def test_openvino_reads_layout_1_as_layout_0(adapter, record):
    """openvinotoolkit/openvino#37820: the ONNX frontend never reads ``layout``. A batch-first node
    without an initial state runs and answers for X read as (T, batch, I): Y has the shape of that
    reading and Y_h its batch, with no error; with an initial state the model is refused. The systems
    are compared with layout=0 only."""
    T, batch = 6, 3
    config = batch_first(adapter, initial_state=False)
    case = case_of(adapter, 5, 4, batch, T, 970, config)
    native = adapter.to_native(case.stack("float32"), config)
    xs = case.inputs("float32")
    outputs = adapter.run_native(native, xs, None, config, case.activation)
    expected = adapter.arrange(case.reference(), config)
    D = config.num_directions
    assert expected["Y"].shape == (batch, T, D, 4) and expected["Y_h"].shape == (batch, D, 4)
    assert outputs["Y"].shape == (batch, D, T, 4), outputs["Y"].shape  # (T', D, batch', H) with T' = batch, batch' = T
    assert outputs["Y_h"].shape == (D, T, 4), outputs["Y_h"].shape  # the state of a batch of T
    with_state = batch_first(adapter, initial_state=True)
    case = case_of(adapter, 5, 4, batch, T, 971, with_state)
    with pytest.raises(Exception, match=r"RNNSequence|LSTMSequence|GRUSequence|OpConversionFailure|shape"):
        adapter.run_native(adapter.to_native(case.stack("float32"), with_state), case.inputs("float32"),
                           case.state("float32"), with_state, case.activation)


# The activation specs (rnn_equivalence.reference.params) OpenVINO's cells lack: HardSigmoid, both alphas, and
# Affine (identity).
LACKED = {"rnn": ("hard_sigmoid_0.2", "hard_sigmoid_relu6", "identity"),
          "lstm": ("hard_sigmoid_0.2,tanh,tanh", "hard_sigmoid_relu6,tanh,tanh"),
          "gru": ("hard_sigmoid_0.2,tanh", "hard_sigmoid_relu6,tanh")}


@pytest.mark.applies_to(lambda cls: is_openvino(cls))
def test_openvino_refuses_activations_its_cells_lack(adapter, monkeypatch):
    """HardSigmoid (both alphas) and Affine: refused when the model is compiled, never computed as
    something else. Hence the systems' activations."""
    lacked = LACKED[adapter.family]
    assert lacked and not set(lacked) & set(adapter.activations)
    for k, spec in enumerate(lacked):
        case = case_of(adapter, 5, 4, 2, 3, 972 + k, adapter.configs[0], activation=spec)
        with pytest.raises(Exception, match=r"RNNCell|LSTMCell|GRUCell|Sequence"):
            run(adapter, case, "float32", monkeypatch)


@pytest.mark.applies_to(lambda cls: is_openvino(cls))
def test_openvino_default_settings(adapter, monkeypatch, record):
    """The run at OpenVINO's default settings against the float32 run the suite compares: bitwise
    the same where the CPU plugin's default inference precision is f32 (read from the plugin); where it
    is lower (bf16, f16 on processors that have them) the difference is recorded, with its size, and the
    float32 run is still held to the bound."""
    case = cases_for(adapter, "quick")[0]
    native = adapter.to_native(case.stack("float32"), case.config)
    arguments = (native, case.inputs("float32"), case.state("float32"), case.config, case.activation)
    forced = adapter.run_native(*arguments)
    monkeypatch.setattr(adapter, "precision_hint", None)
    default = adapter.run_native(*arguments)
    precision = adapter.default_precision()
    if precision == "f32":
        for name in forced:
            np.testing.assert_array_equal(default[name], forced[name], err_msg=f"{name}: default settings (f32)")
        return
    assert_within_bound(against(adapter, case, "float32", forced, case.reference(), case.bound_vs_reference("float32"),
                                "the float64 reference"))
    comparison = against(adapter, case, "float32", default, case.reference(), case.bound_vs_reference("float32"),
                         f"the float64 reference (OpenVINO's default precision {precision})")
    record("nonequivalence", adapter, other="the node at float32", dtype="float32",
           reason=f"OpenVINO's default inference precision on this CPU is {precision}", **comparison.as_record())


HALF_HINTS = {"bf16": "bfloat16", "f16": "float16"}  # INFERENCE_PRECISION_HINT: the format it asks for


@pytest.mark.applies_to(lambda cls: is_openvino(cls))
def test_openvino_half_precision_hints_compute_what_the_model_says(adapter, monkeypatch, record):
    """``INFERENCE_PRECISION_HINT`` bf16 and f16, on data already in the format. Where the CPU lacks the arithmetic
    (an AMD EPYC with AVX2 alone: OPTIMIZATION_CAPABILITIES FP32, INT8), the compiled model says f32 and its outputs
    are the f32 run's bitwise: asked for half, OpenVINO computes float32 and says so (measured, 2026.4.1). Where the
    compiled model says the format, its run is judged by the bound of the format's mixed arithmetic (the weights
    rounded to it, ``rounded_reference_and_bound``'s weight grid; float32 within each operation, results stored in
    the format): within, the row is OpenVINO's in that format; beyond, a proved difference, recorded with its size.
    That branch needs a CPU with AMX or AVX512-FP16, which no machine of this project has had: not yet run."""
    from rnn_equivalence.reference.formats import round_to
    from rnn_equivalence.reference.quantized import rounded_reference_and_bound, rounding_grid
    from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound

    case = cases_for(adapter, "quick")[0]
    stack = case.stack("float32")
    native = adapter.to_native(stack, case.config)
    computed, compile_model = {}, adapter.compile

    def compile_and_note(model, hint):  # what the compiled model says it computes in
        compiled = compile_model(model, hint)
        if hint in HALF_HINTS:
            computed[hint] = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        return compiled

    monkeypatch.setattr(adapter, "compile", compile_and_note)
    for hint, fmt in HALF_HINTS.items():
        xs = round_to(case.inputs("float32"), fmt).astype(np.float32)  # exact in the format and in float32
        state = {key: round_to(value, fmt).astype(np.float32) for key, value in (case.state("float32") or {}).items()}
        state = state or None  # a configuration without an initial state
        arguments = (native, xs, state, case.config, case.activation)
        monkeypatch.setattr(adapter, "precision_hint", "f32")
        forced = adapter.run_native(*arguments)
        monkeypatch.setattr(adapter, "precision_hint", hint)
        ran = adapter.run_native(*arguments)
        if computed[hint] == "f32":
            for name in forced:
                np.testing.assert_array_equal(ran[name], forced[name], err_msg=f"{name}: asked {hint}, said f32")
            continue
        assert computed[hint] == hint, f"asked {hint}, the compiled model says {computed[hint]}"
        data = (case._read(xs.astype(np.float64)),
                None if state is None else {key: v.astype(np.float64) for key, v in state.items()})
        exact, bound = rounded_reference_and_bound(stack, rounding_grid(stack, fmt), *data, f"mixed_{fmt}")
        bound = pair_bound(bound, reference_and_bound(stack, *data, "float64")[1])
        comparison = against(adapter, case, fmt, ran, exact, bound, f"the float64 reference, the {fmt} mixed bound")
        if comparison.equivalent:
            record("reference", adapter, dtype=fmt, **comparison.as_record())
        else:
            record("nonequivalence", adapter, other=f"the {fmt} mixed bound", dtype=fmt,
                   reason=f"OpenVINO's {hint} inference precision beyond the {fmt} bound", **comparison.as_record())
        assert not all(np.array_equal(ran[name], forced[name]) for name in forced), f"says {hint}, computes f32"
    print(f"compiled precision by hint: {computed}")
    assert set(computed) == set(HALF_HINTS)
