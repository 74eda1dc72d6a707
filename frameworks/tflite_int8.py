"""TFLite's int8 quantization of a Keras model (issue 37, int8): ``TFLiteConverter`` with ``optimizations =
[tf.lite.Optimize.DEFAULT]`` and no representative dataset ("dynamic range quantization"), run in LiteRT as the
float32 model is (``rnn_equivalence.frameworks.tflite_export``); and the same with a representative dataset
("full integer quantization", tensorflow/tensorflow#55267). No system: the model computes another function,
judged by the derived bound of rnn_equivalence.reference.quantized (tests/equivalence/test_quantized_tflite.py).

What the dynamic-range model holds, measured (TensorFlow 2.21, LiteRT's ``ai_edge_litert`` 2.3):

- each weight tensor of at least ``MIN_ELEMENTS`` elements as int8, symmetric (zero point 0); a smaller one stays
  float32, untouched (the converter's ``min_num_elements_for_weights``: a 7 x 20 kernel is not quantized);
- Keras 2's LSTM keeps TFLite's fused ``UNIDIRECTIONAL_SEQUENCE_LSTM``: its eight gate matrices (H, I) and (H, H)
  (inputs 1-4, 5-8: gates i f c o, Keras's order) int8 with one scale each, its biases (inputs 12-15) float32, and
  ``asymmetric_quantize_inputs`` set; a ``WHILE`` loop (Keras 2's GRU, every Keras 3 layer) holds per cell two
  ``FULLY_CONNECTED`` weights, kernel^T (G*H, I) and recurrent_kernel^T (G*H, H), int8 with a scale per row
  (per output channel), each followed by an ``ADD`` of a float32 bias, the FC's ``asymmetric_quantize_inputs`` set.

The layout, both sides (Keras's native names, as the float mapping's: ``keras_mapping``):

    fused LSTM:  kernel = [W_i^T W_f^T W_c^T W_o^T] (I, 4H), W_g = (q_g - 0) * s_g, recurrent_kernel likewise,
                 bias = [b_i b_f b_c b_o] (float32, exactly the Keras bias)
    WHILE body:  kernel = ((q - 0) * s per row)^T (I, G*H), recurrent_kernel likewise (H, G*H), bias the body's
                 float32 constants (one (G*H,) per kernel where Keras holds (2, G*H))

A cell is found by its biases, which the conversion keeps exactly (float32 equality with the native bias), so the
mapping is independent of the weights' values (a quantizer bug in them shows as weights off their grid). The
scales are the interpreter's ``get_tensor_details`` ``quantization_parameters``, never inferred.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import Native, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once, files_digest
from rnn_equivalence.frameworks.torch_quantized import QuantizedWeight
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.quantized import half_steps

MIN_ELEMENTS = 1024  # the converter's smallest weight it quantizes (measured: 32 x 32 is int8, 7 x 20 float)
FUSED_LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"
LSTM_INPUT_WEIGHTS, LSTM_RECURRENT_WEIGHTS, LSTM_BIASES = slice(1, 5), slice(5, 9), slice(12, 16)
DYNAMIC_RANGE, FULL_INTEGER = "int8 dynamic range", "int8 full integer"


# --- the converter and the runner ----------------------------------------------------------------


def representative_feeds(adapter, xs, state, config: LayerConfig, samples: int = 4):
    """A representative dataset for full-integer calibration: the run's own feeds, scaled by 1 to 1.3 (the data
    the model then runs on is within the calibrated range)."""
    feeds = adapter.feeds(xs, state, config, None)

    def dataset():
        for k in range(samples):
            yield {name: (np.asarray(value) * (1 + 0.1 * k)).astype(np.float32) for name, value in feeds.items()}
    return dataset


def converted(adapter, native: Native, xs, state, config: LayerConfig, g: str, kind: str = DYNAMIC_RANGE) -> bytes:
    """``adapter`` (a TFLite system) converted with ``kind`` of int8 quantization, cached as the float32 models
    are (``converted_once``), its key the float32 model's plus the kind and this file's digest."""
    adapter.check_call(native, xs, state, config, g)
    batch = xs.shape[1]

    def convert() -> bytes:
        converter, _ = adapter.tflite_converter(native, xs, state, config, g, batch=batch)
        converter.optimizations = [adapter.tf.lite.Optimize.DEFAULT]
        if kind == FULL_INTEGER:
            converter.representative_dataset = representative_feeds(adapter, xs, state, config)
        with contextlib.redirect_stdout(io.StringIO()):  # Keras 3's export prints its endpoints
            return converter.convert()

    key = (*adapter.conversion_key(native, xs, state, config, g, batch), kind, files_digest([Path(__file__)]))
    return converted_once(adapter, key, convert, suffix=".tflite")


def run(adapter, flatbuffer: bytes, xs, state, config: LayerConfig) -> dict:
    """The converted model's native outputs (float64), as ``run_native`` gives the float32 model's."""
    outputs = adapter.run_flatbuffer(flatbuffer, adapter.feeds(xs, state, config, None), adapter.output_names(config))
    return {key: np.asarray(value, np.float64) for key, value in outputs.items()}


def interpreter(flatbuffer: bytes, preserve: bool = False):
    litert = import_framework("ai_edge_litert.interpreter", "tflite")
    return litert.Interpreter(model_content=flatbuffer, experimental_preserve_all_tensors=preserve)


def subgraphs(model):
    """Each subgraph's tensor details (the main graph first, then the WHILE loops' conditions and bodies)."""
    details, k = [], 0
    while True:
        try:
            details.append(model.get_tensor_details(subgraph_index=k))
        except ValueError:
            return details
        k += 1


def weight(model, detail: dict, subgraph: int) -> QuantizedWeight:
    """An int8 tensor as stored, its scales and zero points per row from the interpreter's details."""
    q = np.asarray(model.get_tensor(detail["index"], subgraph_index=subgraph))
    parameters = detail["quantization_parameters"]
    rows = q.shape[0]
    scales = np.broadcast_to(np.asarray(parameters["scales"], np.float64), (rows,)).copy()
    zero_points = np.broadcast_to(np.asarray(parameters["zero_points"], np.int64), (rows,)).copy()
    return QuantizedWeight(q, scales, zero_points)


def operator_types(flatbuffer: bytes) -> dict[str, int]:
    """How many of each op type the model's main graph holds."""
    ops = [op["op_name"] for op in interpreter(flatbuffer)._get_ops_details()]
    return {name: ops.count(name) for name in sorted(set(ops))}


def int8_weight_count(flatbuffer: bytes) -> int:
    model = interpreter(flatbuffer)
    return sum(d["dtype"] == np.int8 and len(d["shape"]) == 2 for tensors in subgraphs(model) for d in tensors)


# --- the mapping: the quantized weights back to Keras's native ones -------------------------------


def cells(native: Native) -> list[str]:
    return sorted({name.rsplit(".", 1)[0] for name in native})


def _cell_of_bias(native: Native, bias) -> str | None:
    """The cell whose Keras bias (or one row of a GRU's (2, G*H)) is exactly ``bias``."""
    bias = np.asarray(bias, np.float32).ravel()
    for cell in cells(native):
        held = np.asarray(native[f"{cell}.bias"], np.float32)
        if any(row.shape == bias.shape and np.array_equal(row, bias) for row in held.reshape(-1, bias.size)):
            return cell
    return None


def held_weights(flatbuffer: bytes, native: Native) -> dict[str, dict[str, list[QuantizedWeight]]]:
    """{cell: {"kernel": [QuantizedWeight in the model's layout], "recurrent_kernel": [...]}}: one weight per gate
    (the fused LSTM's (H, I), Keras's gate order) or one (G*H, I) per WHILE body, each cell found by its biases."""
    model = interpreter(flatbuffer)
    details = subgraphs(model)
    held = {}
    for op in model._get_ops_details():
        if op["op_name"] == FUSED_LSTM:
            inputs = list(op["inputs"])
            by_index = {d["index"]: d for d in details[0]}
            bias = np.concatenate([model.get_tensor(i) for i in inputs[LSTM_BIASES]])
            cell = _cell_of_bias(native, bias)
            held[cell] = {name: [weight(model, by_index[i], 0) for i in inputs[part]] for name, part in
                          (("kernel", LSTM_INPUT_WEIGHTS), ("recurrent_kernel", LSTM_RECURRENT_WEIGHTS))}
    for k, tensors in enumerate(details[1:], start=1):
        int8 = [d for d in tensors if d["dtype"] == np.int8 and len(d["shape"]) == 2]
        if not int8:
            continue
        rows = int8[0]["shape"][0]
        biases = [d for d in tensors if d["dtype"] == np.float32 and list(d["shape"]) == [rows]]
        found = {_cell_of_bias(native, model.get_tensor(d["index"], subgraph_index=k)) for d in biases}
        found.discard(None)
        if len(found) != 1 or len(int8) != 2:
            raise AssertionError(f"subgraph {k}: expected one cell's two int8 weights, got {found}, {len(int8)}")
        cell = found.pop()
        H = np.shape(native[f"{cell}.recurrent_kernel"])[0]
        for d in int8:
            name = "recurrent_kernel" if d["shape"][1] == H else "kernel"
            held.setdefault(cell, {})[name] = [weight(model, d, k)]
    return held


def _native_of(per_gate: list[np.ndarray]) -> np.ndarray:
    """Keras's (inputs, G*H) from the model's (rows, inputs) blocks: transposed and side by side."""
    return np.concatenate([block.T for block in per_gate], axis=1)


def dequantized_and_grid(flatbuffer: bytes, native: Native) -> tuple[Native, Native]:
    """(the native weights the model multiplies by, W~; each weight's bound |W~ - W|, half a grid step, in the same
    layout), the biases the native ones (float32 in the model, kept exactly: the cell's identity checks them)."""
    held = held_weights(flatbuffer, native)
    if sorted(held) != cells(native):
        raise AssertionError(f"int8 weights found for {sorted(held)}, expected every cell of {cells(native)}")
    dequantized, grid = dict(native), dict(native)
    for cell, tensors in held.items():
        for name, weights in tensors.items():
            dequantized[f"{cell}.{name}"] = _native_of([w.dequantized for w in weights])
            grid[f"{cell}.{name}"] = _native_of([half_steps(w.scales, w.q.shape) for w in weights])
    return ({k: np.asarray(v, np.float64) for k, v in dequantized.items()},
            {k: np.asarray(v, np.float64) for k, v in grid.items()})


# --- a quantizer bug made on purpose: a weight's scales rewritten in the flatbuffer ------------------


def with_scales(flatbuffer: bytes, subgraph: int, tensor: int, scales) -> bytes:
    """A copy of the model whose tensor ``tensor`` of ``subgraph`` declares ``scales`` (its int8 values kept)."""
    schema = import_framework("tensorflow.lite.python.schema_py_generated", "tflite")
    flatbuffers = import_framework("flatbuffers", "tflite")
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(flatbuffer, 0))
    model.subgraphs[subgraph].tensors[tensor].quantization.scale = [float(s) for s in scales]
    builder = flatbuffers.Builder(len(flatbuffer) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def one_gate_scale_doubled(flatbuffer: bytes, native: Native, cell: str, gate: int) -> bytes:
    """A quantizer bug: gate ``gate`` (Keras's order) of ``cell``'s kernel dequantized with twice its scale: the
    fused LSTM's gate tensor's one scale, or a WHILE body's per-row scales of that gate's rows."""
    held = held_weights(flatbuffer, native)[cell]["kernel"]
    target = held[gate] if len(held) > 1 else held[0]  # the fused LSTM's gate tensor, or the body's whole kernel
    model = interpreter(flatbuffer)
    for k, tensors in enumerate(subgraphs(model)):
        for d in tensors:
            if d["dtype"] != np.int8 or len(d["shape"]) != 2:
                continue
            w = weight(model, d, k)
            if w.q.shape == target.q.shape and np.array_equal(w.q, target.q) \
                    and np.array_equal(w.scales, target.scales):
                scales = np.asarray(d["quantization_parameters"]["scales"], np.float64).copy()
                if len(held) > 1:
                    scales *= 2
                else:
                    H = np.shape(native[f"{cell}.recurrent_kernel"])[0]
                    scales[gate * H:(gate + 1) * H] *= 2
                return with_scales(flatbuffer, k, d["index"], scales)
    raise AssertionError(f"{cell}'s kernel gate {gate} not found among the int8 tensors")
