"""TFLite's int8 quantization of Keras LSTM and GRU layers (issue 37, int8): no equivalence claim, a derived bound.

``TFLiteConverter`` with ``optimizations = [tf.lite.Optimize.DEFAULT]`` and no representative dataset ("dynamic range
quantization", frameworks/tflite_int8.py: what the model holds and the mapping of it back to Keras's weights). What
the hybrid kernels compute, read in TensorFlow's sources (tensorflow/lite/kernels/lstm_eval.cc's hybrid step,
fully_connected.cc's ``EvalHybrid``, internal/reference/portable_tensor_utils.cc's ``BatchQuantizeFloats`` /
``PortableAsymmetricQuantizeFloats``) and confirmed by a NumPy emulation here (``emulated``):

- the weights int8, zero point 0 (W~ within s / 2), a scale per gate tensor (fused LSTM) or per row (FC);
- each matmul's float32 operand (a step's x, the previous h) quantized *per batch row*, asymmetric int8 over
  -128..127 (``asymmetric_quantize_inputs`` is set in both ops): scale (max(v, 0) - min(v, 0)) / 255, no floor, a
  nudged zero point, so each element off by at most half a step; the products summed exactly in int32 (the row sums
  take the zero point out), rescaled by the float32 product of the scales; the rest float32 (the gates, the cell
  state, clipped at +-10 by the fused LSTM as by the float one);
- so the bound is ``quantized_reference_and_bound`` with ``scheme=ORT_ACTIVATIONS`` (255 levels, no smallest scale)
  and ``per_row=True``: each step's x and h quantized row by row, d from each batch row's own range (the whole
  tensor's range bounds it too, but three times looser where rows' ranges differ: the widened cases, err/bound
  0.06 per tensor, 0.18 to 0.20 per row).

Sizes: the converter leaves a weight of fewer than 1024 elements float (measured: the suite's 7 x 5 cases are not
quantized at all), so the cases here are I = 40, H = 32 (I != H: the FC weights are told apart by shape).

Depth: default, one Keras 2 LSTM (a fused UNIDIRECTIONAL_SEQUENCE_LSTM, from h0 and c0) and one Keras 2 GRU (a WHILE
loop, go_backwards with return_state, from h0) converted once each, every test on those two models (the quantizer
bugs rewrite their flatbuffers: no conversion), the full-integer LSTM and a 7 x 5 LSTM: 4 conversions. Full
depth adds Keras 3's GRU, a widened Keras 2 GRU and Keras 2's two-layer bidirectional LSTM (``CASES``).
"""

import signal
import subprocess
import sys

import numpy as np
import pytest

from rnn_equivalence.frameworks.tflite_int8 import (
    DYNAMIC_RANGE, FULL_INTEGER, FUSED_LSTM, MIN_ELEMENTS, converted, dequantized_and_grid, held_weights,
    int8_weight_count, one_gate_scale_doubled, operator_types, run,
)
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.quantized import ORT_ACTIVATIONS, off_grid, quantized_reference_and_bound
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound

I, H, BATCH, STEPS, SEED = 40, 32, 3, 5, 37
RECORD_DTYPE = "qint8"  # this module's records and failures: the report's int8 section (harness/records.py)
# The fused LSTM's configuration: one forward layer from h0 and c0 (go_backwards or return_state make a WHILE loop).
FUSED = LayerConfig(1, False, initial_state=True, options=(("return_sequences", True),))
# (system, configuration: an index into its configs or a LayerConfig, input feature 0 widened)
CASES = {
    "default": (("tflite-keras2-lstm-rnn", FUSED, False), ("tflite-keras2-gru-rnn", 0, False),
                ("tflite-keras2-lstm-rnn", FUSED, True)),
    # The two-layer bidirectional LSTM (configs[1], only the last step's output) over 2 steps, not 5: its bound
    # compounds through both layers and every step while the error is one step's, and over 5 steps it is 200 times
    # the error, per row or per tensor alike (err/bound 0.0050 and 0.0048, seed 37; 0.0050 to 0.0053 over seeds 1
    # to 3; widening feature 0 does not help, 0.0027), below the honesty floor of 0.01; over 2 steps 0.016 (0.014 to
    # 0.020 over seeds 1 to 3; 3 steps 0.011, 4 steps 0.0099). Measured with TensorFlow 2.21, LiteRT 2.3.
    "full": (("tflite-keras-tf-gru-rnn", 0, False), ("tflite-keras2-gru-rnn", 0, True),
             ("tflite-keras2-lstm-rnn", 1, False, 2)),
}
WIDE = 32  # input feature 0 this many times larger: each row's step is set by it, the activations' term dominates
SCHEME = ORT_ACTIVATIONS  # (255 levels, no smallest scale): the red proof sets the levels to 10**12
PER_ROW = True  # each batch row quantized with its own scale (BatchQuantizeFloats): d from each row's range


class Int8Run:
    """One run of a converted int8 model: its outputs, the weights it holds (mapped back), the data it ran on."""

    def __init__(self, adapter, config, wide=False, kind=DYNAMIC_RANGE, mutate=None, steps=None):
        config = adapter.configs[config] if isinstance(config, int) else config
        self.adapter, self.config = adapter, config
        self.case = case = case_of(adapter, I, H, BATCH, STEPS if steps is None else steps, SEED, config)
        self.native = adapter.to_native(case.stack("float32"), config)
        xs, self.state = case.inputs("float32"), case.state("float32")
        if wide:
            xs = np.array(xs, copy=True)
            xs[..., 0] *= WIDE  # a power of two: exact in float32
        self.xs = xs
        self.flatbuffer = converted(adapter, self.native, xs, self.state, config, case.activation, kind)
        if mutate is not None:
            self.flatbuffer = mutate(self.flatbuffer, self.native)
        self.outputs = run(adapter, self.flatbuffer, xs, self.state, config)
        stack, _, _ = case.exact_data("float32")
        self.data = (stack, case._read(np.asarray(xs, np.float64)),
                     None if self.state is None else {k: np.asarray(v, np.float64) for k, v in self.state.items()})

    def grid(self):
        dequantized, grid = dequantized_and_grid(self.flatbuffer, self.native)
        return self.adapter.from_native(dequantized, self.config), self.adapter.from_native(grid, self.config)

    def judged(self, bound_kind: str = "quantized", scheme=None, outputs=None, per_row=None):
        """The model against the float64 reference on the float weights, within the quantization bound of its grid
        and the hybrid kernels' activation scheme (or the float32 bound), plus the reference's float64 bound."""
        stack, xs, state = self.data
        if bound_kind == "quantized":
            exact, bound = quantized_reference_and_bound(stack, self.grid()[1], xs, state, scheme=scheme or SCHEME,
                                                         per_row=PER_ROW if per_row is None else per_row)
        else:
            exact, bound = reference_and_bound(stack, xs, state, bound_kind)
        bound = pair_bound(bound, reference_and_bound(stack, xs, state, "float64")[1])
        outputs = self.outputs if outputs is None else outputs
        exact, bound, keys = self.adapter.arrange(exact, self.config), self.adapter.arrange(bound, self.config), \
            sorted(outputs)
        return compare_outputs(outputs, {k: exact[k] for k in keys}, {k: bound[k] for k in keys},
                               f"{self.adapter.name} int8 vs float64 reference on the float weights within the "
                               f"{bound_kind} bound, {self.case.describe('float32')}")


def case_id(case) -> str:
    name, config, wide, *steps = case
    return f"{name}-{'fused' if config is FUSED else f'config{config}'}" + ("-wide" if wide else "") + \
        "".join(f"-T{t}" for t in steps)


@pytest.mark.by_depth("case", default=[pytest.param(c, id=case_id(c)) for c in CASES["default"]],
                      full=[pytest.param(c, id=case_id(c)) for c in CASES["default"] + CASES["full"]])
def test_int8_dynamic_range_within_the_quantization_bound(load_system, case, record):
    """tensorflow/tensorflow#48774 ("completely wrong predictions", converts only with unroll=True): measured with
    TensorFlow 2.21 and LiteRT 2.3, each layer converts without unroll, Keras 2's LSTM keeps the fused op, and the
    outputs are within the derived bound (err/bound in docs/TOLERANCES.md), beyond the float32 one."""
    name, config, wide, *steps = case  # steps: the case's own sequence length, if not STEPS
    adapter = load_system(name)
    run = Int8Run(adapter, config, wide, steps=steps[0] if steps else None)
    assert int8_weight_count(run.flatbuffer) > 0, "no weight quantized"
    expected = FUSED_LSTM if run.config is FUSED or run.config.bidirectional else "WHILE"
    assert expected in operator_types(run.flatbuffer), operator_types(run.flatbuffer)
    dequantized, grid = run.grid()
    premise = off_grid(run.data[0], dequantized, grid)
    assert max(premise.values()) <= 1, premise  # the bound's premise: W~ within s / 2 of W, every tensor
    comparison, float32 = run.judged(), run.judged("float32")
    described = run.case.describe("int8") + (f", input feature 0 {WIDE} times larger" if wide else "")
    record("quantized", adapter, dtype="qint8", case=described, **comparison.as_record())
    record("float32_bound", adapter, dtype="qint8", case=described, **float32.as_record())
    print(f"err/bound {comparison.ratio:.3f}, max error {comparison.error_at_worst:.2g}")
    assert_within_bound(comparison)
    assert comparison.ratio >= 0.01, comparison.message()  # honest: the bound no more than 100 times the error
    assert float32.ratio > 10, float32.message()  # the quantization shows


def test_small_weights_stay_float(load_system):
    """The converter quantizes no weight of fewer than ``MIN_ELEMENTS`` elements: the suite's usual 7 x 5 LSTM
    converts with optimizations=[DEFAULT] to a model with no int8 weight (a dynamic-range model of a small RNN is
    its float model)."""
    adapter = load_system("tflite-keras2-lstm-rnn")
    case = case_of(adapter, 7, 5, BATCH, STEPS, SEED, FUSED)
    native = adapter.to_native(case.stack("float32"), FUSED)
    flatbuffer = converted(adapter, native, case.inputs("float32"), case.state("float32"), FUSED, case.activation)
    assert 4 * 5 * 7 < MIN_ELEMENTS and int8_weight_count(flatbuffer) == 0


def emulated(held: dict, bias, xs, h0, c0, per_row=True, asymmetric=True) -> np.ndarray:
    """The fused hybrid LSTM step by step in NumPy float32 (lstm_eval.cc's hybrid step): each matmul's operand
    quantized per batch row (or per tensor) to asymmetric int8 over 255 levels (or symmetric over +-127), the int8
    products summed exactly, rescaled by the product of the scales; gates i f c o, the cell clipped at +-10."""
    f32 = np.float32

    def quantized(v):
        rows = v if per_row else v.reshape(1, -1)
        out = np.empty_like(rows, dtype=np.float64)
        for r, row in enumerate(rows):
            if asymmetric:
                lo, hi = min(float(row.min()), 0.0), max(float(row.max()), 0.0)
                scale = (hi - lo) / 255 if hi > lo else 1.0
                zero_from_min, zero_from_max = -128 - lo / scale, 127 - hi / scale
                zero = zero_from_min if 128 + abs(lo / scale) < 127 + abs(hi / scale) else zero_from_max
                zero = int(np.clip(np.round(zero), -128, 127))
                q = np.clip(np.round(zero + row * f32(1 / f32(scale))), -128, 127) - zero
            else:
                scale = max(float(np.abs(row).max()), 1e-30) / 127
                q = np.clip(np.round(row * f32(127 / f32(scale * 127))), -127, 127)
            out[r] = q * f32(scale)
        return out.reshape(v.shape)

    def matmul(v, weights):
        return [(quantized(v) @ w.dequantized.T).astype(f32) for w in weights]

    h, c, ys = h0, c0, []
    for x in xs:
        gates = [f32(b) + a + r for b, a, r in zip(np.split(bias, 4), matmul(x, held["kernel"]),
                                                   matmul(h, held["recurrent_kernel"]))]
        i, f, o = (f32(1) / (f32(1) + np.exp(-g)) for g in (gates[0], gates[1], gates[3]))
        c = np.clip(f * c + i * np.tanh(gates[2]), -10, 10)
        h = o * np.tanh(c)
        ys.append(h)
    return np.stack(ys)


def test_the_hybrid_lstm_quantizes_each_row_asymmetrically(load_system):
    """The scheme the bound assumes, by experiment on the fused LSTM (the feature-0-widened case: rows' ranges
    differ): the emulation per row, asymmetric, agrees with LiteRT to float32 rounding (measured in
    docs/TOLERANCES.md); per tensor, or symmetric per row, it is farther off."""
    adapter = load_system("tflite-keras2-lstm-rnn")
    run = Int8Run(adapter, FUSED, wide=True)
    held = held_weights(run.flatbuffer, run.native)["layer0.forward"]
    output = np.swapaxes(run.outputs["output"], 0, 1)  # Keras's (batch, T, H) to (T, batch, H)
    args = (held, run.native["layer0.forward.bias"], run.xs, run.state["h"][0], run.state["c"][0])
    off = {scheme: float(np.max(np.abs(emulated(*args, per_row=scheme[0], asymmetric=scheme[1]) - output)))
           for scheme in ((True, True), (False, True), (True, False))}
    print(off)
    assert off[(True, True)] < 1e-5 and min(off[(False, True)], off[(True, False)]) > 10 * off[(True, True)], off


# Quantizer bugs made on purpose, the flatbuffer's scales rewritten: the kernel's candidate gate (Keras's gate 2: c
# of an LSTM, h of a GRU, which moves the state at once) dequantized with twice its scale. Judged against the bound of
# the scales the model declares (the doubled scale widens its own bound: the test's disadvantage).
def doubled(flatbuffer: bytes, native) -> bytes:
    return one_gate_scale_doubled(flatbuffer, native, "layer0.forward", 2)


@pytest.mark.applies_to(lambda cls: cls.name in ("tflite-keras2-lstm-rnn", "tflite-keras2-gru-rnn"))
def test_a_gate_scale_doubled_exceeds_the_quantization_bound(adapter, record):
    """Caught beyond the bound, measured in docs/TOLERANCES.md; the premise check names the tensor too."""
    config = FUSED if "lstm" in adapter.name else 0
    run = Int8Run(adapter, config, mutate=doubled)
    comparison = run.judged()
    record("mutation", adapter, dtype="qint8", mutation="int8: a gate's scale doubled", detected=not
           comparison.equivalent, by="values", case=run.case.describe("int8"), **comparison.as_record())
    print(f"{comparison.ratio:.3g} times the bound")
    assert comparison.ratio > 3, comparison.message()
    dequantized, grid = run.grid()
    assert off_grid(run.data[0], dequantized, grid)["layer 0 forward W_x"] > 1


# tensorflow/tensorflow#48487: "int8 GRU 3% less accurate than Core ML's". The int8 GRU's relative error against
# the float model, and what its grid implies (the bound relative to the outputs' size).
@pytest.mark.applies_to(lambda cls: cls.name == "tflite-keras2-gru-rnn")
def test_tensorflow_48487_int8_gru_relative_error(adapter):
    """The relative error (max |int8 - float| / max |float|) against the float32 model run in LiteRT, and the
    bound's own relative size: measured in docs/TOLERANCES.md, the error within what the grid implies."""
    run = Int8Run(adapter, 0)
    float_outputs = adapter.run_native(run.native, run.xs, run.state, run.config, run.case.activation)
    scale = max(float(np.max(np.abs(v))) for v in float_outputs.values())
    relative = max(float(np.max(np.abs(run.outputs[k] - float_outputs[k]))) for k in float_outputs) / scale
    comparison = run.judged()
    implied = max(float(np.max(b)) for b in comparison.bound.values()) / scale if hasattr(comparison, "bound") \
        else comparison.error_at_worst / comparison.ratio / scale
    print(f"relative error {relative:.3g}, bound relative {implied:.3g}")
    assert_within_bound(comparison)
    assert relative < implied, (relative, implied)


# tensorflow/tensorflow#55267 (calibration fails for RNNs): full-integer conversion with a representative dataset.
@pytest.mark.applies_to(lambda cls: cls.name == "tflite-keras2-lstm-rnn")
def test_tensorflow_55267_full_integer_lstm(adapter):
    """Measured (TensorFlow 2.21): the calibration converts; the fused LSTM kept, with int8 activations, int16 cell
    state and QUANTIZE / DEQUANTIZE at the edges (the 8x8_16 integer LSTM; its biases int32, so the dynamic-range
    mapping does not apply). No derived bound of its own here (the analysis of its static scales is not written);
    judged by the dynamic-range model's bound on the same data, which it exceeds (measured in docs/TOLERANCES.md)."""
    run = Int8Run(adapter, FUSED, kind=FULL_INTEGER)
    operators = operator_types(run.flatbuffer)
    assert {FUSED_LSTM, "QUANTIZE", "DEQUANTIZE"} <= set(operators), operators
    float_outputs = adapter.run_native(run.native, run.xs, run.state, run.config, run.case.activation)
    error = max(float(np.max(np.abs(run.outputs[k] - float_outputs[k]))) for k in float_outputs)
    scale = max(float(np.max(np.abs(v))) for v in float_outputs.values())
    beyond = Int8Run(adapter, FUSED).judged(outputs=run.outputs)
    print(f"full integer: {operators}, max error {error:.3g}, relative {error / scale:.3g}, "
          f"{beyond.ratio:.3g} times the dynamic-range bound")
    assert beyond.ratio > 1, beyond.message()


# tensorflow/model-optimization#1090 ("16x8 Quantization fails for RNN model - Max and min for dynamic tensors should be
# recorded during calibration"): the thread's model, a Keras 2 Embedding(5, 16) on a fixed batch [1, 10], SimpleRNN(8,
# return_sequences=True), Dense(5), converted with a representative dataset, optimizations=[DEFAULT] and the 16x8 op
# set (EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8). The thread imports tensorflow_model_optimization
# but its failing call is TFLiteConverter.convert (the error is the calibrator's), so it reduces to the installed
# converter; tensorflow_model_optimization is not installed here. Run in a child process: it may crash.
CONVERSION_1090 = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf, tf_keras as keras
layer, ops = sys.argv[1], sys.argv[2]
model = keras.Sequential([keras.layers.Embedding(5, 16, batch_input_shape=[1, 10]),
                          getattr(keras.layers, layer)(8, return_sequences=True), keras.layers.Dense(5)])
data = np.random.default_rng(1090).integers(0, 5, (20, 10)).astype(np.float32)
converter = tf.lite.TFLiteConverter.from_keras_model(model)
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = lambda: ([sample[None]] for sample in data)
if ops == "16x8":
    converter.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
try:
    print("converted", len(converter.convert()), flush=True)
except Exception as error:
    print("raised", type(error).__name__, error, flush=True)
"""


def conversion_1090(layer: str, ops: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-X", "faulthandler", "-W", "ignore", "-c", CONVERSION_1090, layer, ops],
                          capture_output=True, text=True, timeout=300)


# The thread's call, the int8 op set on the same model (the crash is the calibration, not 16x8) and Keras 2's LSTM,
# which calibrates. At full depth only (rnn_equivalence.harness.depth): each is a child process that imports
# TensorFlow and calibrates, 15 to 25 s alone, for a thread about a converter, not a mapping.
RUNS_1090 = {"thread": ("SimpleRNN", "16x8"), "int8": ("SimpleRNN", "int8"), "control": ("LSTM", "16x8")}


@pytest.mark.parametrize("run", list(RUNS_1090))
@pytest.mark.applies_to(lambda cls: cls.name == "tflite-keras2-rnn", short_of_full=False)
def test_model_optimization_1090_calibrating_a_recurrent_loop_crashes(adapter, run):
    """Measured (TensorFlow 2.21, tf_keras 2.21): the thread's conversion no longer raises its RuntimeError ("Max and
    min for dynamic tensors should be recorded during calibration"); it kills the process (SIGSEGV) in the
    calibrator (calibrator.py's ``_feed_tensors``), before any 16x8 quantization: the same model with the int8
    full-integer op set crashes there too (``run`` "int8"), so the failure is calibrating the WHILE loop SimpleRNN
    converts to (Keras 2's GRU, also a WHILE loop, crashes the same way, measured). Keras 2's LSTM (``run``
    "control"), TFLite's fused op and no loop, calibrates, and 16x8 is then refused by a clean RuntimeError ("not yet
    supported for op"). Reproduced, then, in substance (16x8 quantization of an RNN fails) with a worse failure than
    reported. A TensorFlow that converts (or raises) turns this red."""
    layer, ops = RUNS_1090[run]
    child = conversion_1090(layer, ops)
    if layer == "SimpleRNN":
        assert child.returncode == -signal.SIGSEGV, (ops, child.returncode, child.stdout[-500:], child.stderr[-500:])
        assert "calibrator.py" in child.stderr and "_feed_tensors" in child.stderr, child.stderr[-2000:]
    else:
        assert child.returncode == 0 and "raised RuntimeError" in child.stdout and "16x8-bit not yet supported" in \
            child.stdout, (child.returncode, child.stdout[-500:], child.stderr[-500:])
