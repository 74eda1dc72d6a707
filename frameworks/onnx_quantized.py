"""ONNX Runtime's int8 dynamically quantized LSTM node (issue 37, int8): the mapping of the quantized model's weights
(NumPy only) and the quantizing runner (onnx, onnxruntime), kept apart as in frameworks/torch_quantized.py. No
system: the quantized node computes another function, judged by the derived bound of
rnn_equivalence.reference.quantized (``scheme=ORT_ACTIVATIONS``).

``onnxruntime.quantization.quantize_dynamic`` (onnxruntime 1.32.0, its python/tools/quantization/operators/lstm.py,
``LSTMQuant``) replaces an ``LSTM`` node whose W and R are initializers by a ``com.microsoft`` ``DynamicQuantizeLSTM``
node: W and R quantized to int8 (``quantize_weight_per_channel`` on axis 0, i.e. a scale per direction, or per row
of (D*4H, ...) with ``per_channel=True``; symmetric, zero point 0), stored *transposed*, with their scales and zero
points as inputs 8 to 11; B, sequence_lens, the initial states and P kept float; every attribute kept but ``layout``,
which the fix of microsoft/onnxruntime#15465 (PR #20160) drops. It leaves a ``GRU`` node float: its registry
(``IntegerOpsRegistry``) has no GRU (measured: tests/equivalence/test_quantized_onnx.py).

The layout, both sides (the float node's is frameworks/onnx_rnn.py's ``OnnxMapping``):

    quantized: W_quantized (D, I, 4H) int8, R_quantized (D, H, 4H) int8, each column a row of the float node's W[d]
               (4H, I) / R[d] (4H, H), gates i o f c; W_scale, R_scale (D,) per direction or (D, 4H) per row,
               W_zero_point, R_zero_point likewise (int8, 0); B (D, 8H) float as the float node's
    float:     W[d] = (W_quantized[d] - zero point)^T * scale per row, R[d] likewise, B as stored

so the mapping is the float node's after dequantizing, and each weight's bound |W~ - W| (half a grid step,
``half_steps``) maps the same way into a stack of the same structure (the ``grid`` of
``quantized_reference_and_bound``).
"""

from __future__ import annotations

import logging
import os
import tempfile

import numpy as np

from rnn_equivalence.frameworks.base import import_framework
from rnn_equivalence.frameworks.torch_quantized import QuantizedWeight
from rnn_equivalence.reference.quantized import half_steps

QUANTIZED_OP = "DynamicQuantizeLSTM"
GATES = 4  # ONNX's LSTM: i o f c
KERNELS = ("W", "R")


# --- the mapping: NumPy only -----------------------------------------------------------------------


def held_weights(initializers: dict) -> dict:
    """The quantized node's weights from its initializers (``{name: array}``, the quantizer's names): {"W": [one
    ``QuantizedWeight`` (4H, I) per direction], "R": [...], "B": float (D, 8H) or absent}."""
    held = {}
    for kernel in KERNELS:
        q = np.asarray(initializers[f"{kernel}_quantized"])
        D, rows = q.shape[0], q.shape[2]
        scales = np.broadcast_to(np.asarray(initializers[f"{kernel}_scale"], np.float64).reshape(D, -1), (D, rows))
        zero_points = np.broadcast_to(np.asarray(initializers[f"{kernel}_zero_point"], np.int64).reshape(D, -1),
                                      (D, rows))
        held[kernel] = [QuantizedWeight(q[d].T.copy(), scales[d].copy(), zero_points[d].copy()) for d in range(D)]
    if "B" in initializers:
        held["B"] = np.asarray(initializers["B"])
    return held


def stored_initializers(held: dict) -> dict:
    """``held_weights``' inverse, scales and zero points per row (D, 4H): what a quantizer that made them so stores."""
    stored = {}
    for kernel in KERNELS:
        weights = held[kernel]
        dtype = weights[0].q.dtype  # int8 (quantize_dynamic's default) or uint8, its zero points likewise
        stored[f"{kernel}_quantized"] = np.stack([w.q.T for w in weights]).astype(dtype)
        stored[f"{kernel}_scale"] = np.stack([w.scales for w in weights]).astype(np.float32)
        stored[f"{kernel}_zero_point"] = np.stack([w.zero_points for w in weights]).astype(dtype)
    return stored


class OnnxQuantizedMapping:
    """The quantized node's weights (``held_weights``) to the canonical parameters, through ``layers``, the float
    node's mapping (onnx-ort-lstm's ``OnnxMapping``)."""

    def __init__(self, layers):
        self.layers = layers

    def dequantized(self, held: dict) -> dict:
        """The float node's native weights the quantized one multiplies by: W~ = (q - zp) * scale per row."""
        native = {kernel: np.stack([w.dequantized for w in held[kernel]]) for kernel in KERNELS}
        return {**native, **({"B": np.asarray(held["B"], np.float64)} if "B" in held else {})}

    def from_quantized(self, held: dict, config):
        """(the canonical parameters the node computes with, W~; its grid, each weight's bound |W~ - W|, in the
        same layout), both through the float node's mapping (the grid's biases 0: stored float, not rounded)."""
        grid = {kernel: np.stack([half_steps(w.scales, w.q.shape) for w in held[kernel]]) for kernel in KERNELS}
        if "B" in held:
            grid["B"] = np.zeros(np.shape(held["B"]))  # kept float, exactly as stored
        return self.layers.from_native(self.dequantized(held), config), self.layers.from_native(grid, config)


def gate_columns(rows: int, gate: int) -> slice:
    """Gate ``gate`` (ONNX's order i o f c) of a kernel's 4H rows."""
    H = rows // GATES
    return slice(gate * H, (gate + 1) * H)


def scale_doubled(kernel: str, gate: int, direction: int = 0):
    """A quantizer bug: gate ``gate`` (ONNX's order) of ``kernel`` ("W", "R") dequantized with twice its scale."""
    def mutate(held: dict) -> dict:
        weights = list(held[kernel])
        w = weights[direction]
        scales = w.scales.copy()
        scales[gate_columns(len(scales), gate)] *= 2
        weights[direction] = QuantizedWeight(w.q, scales, w.zero_points)
        return {**held, kernel: weights}
    return mutate


def gates_exchanged(kernel: str, a: int, b: int, direction: int = 0):
    """A quantizer bug: the stored rows of gates ``a`` and ``b`` (ONNX's order) of ``kernel`` exchanged."""
    def mutate(held: dict) -> dict:
        weights = list(held[kernel])
        w = weights[direction]
        order = np.arange(len(w.scales))
        ra, rb = gate_columns(len(order), a), gate_columns(len(order), b)
        order[ra], order[rb] = order[rb].copy(), order[ra].copy()
        weights[direction] = w.rows(order)
        return {**held, kernel: weights}
    return mutate


# --- the runner: onnx, onnxruntime ---------------------------------------------------------------


# What MLAS's uint8 x int8 GEMM computes depends on the CPU (onnxruntime's mlas/lib/platform.cpp picks the kernel).
# With AVX-512 VNNI, AVX-VNNI or AMX, the products are summed exactly in int32 (vpdpbusd, AMX tiles). On an x86-64
# CPU with AVX2 (or AVX-512 without VNNI) and none of them, the kernel is vpmaddubsw: each pair of adjacent products
# u8 * s8 is summed in int16 with saturation, at +-32767, before the pairs are summed in int32; a pair reaches
# 2 * 255 * 127 = 64770, so full-range activations and weights saturate. ONNX Runtime documents it (its quantization
# page: "When and why do I need to try U8U8?", and ``reduce_range``: 7-bit weights, at most 2 * 255 * 64 = 32640,
# never saturate). Measured on an AMD EPYC with AVX2 alone (onnxruntime 1.32.0): the node agrees with an emulation
# of the saturating pairs to 4.5e-8 and is 9e-3 off the exact sums (tests/equivalence/test_quantized_onnx.py).
ORT_SATURATION_LINK = "https://onnxruntime.ai/docs/performance/model-optimizations/quantization.html"
EXACT_INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's feature flags as Linux lists them, or None where they cannot be read (another OS)."""
    try:
        with open(cpuinfo) as text:
            for line in text:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


def u8s8_saturates(flags: set[str] | None = None, machine: str | None = None) -> bool:
    """Whether ONNX Runtime's uint8 x int8 GEMM sums pairs of products in int16 with saturation on this CPU (an
    x86-64 CPU with AVX2 and no VNNI or AMX: see above). False where the flags cannot be read: the tests that
    depend on it then say so when the node disagrees (an exceeded bound), never pass in silence."""
    import platform

    machine = (machine or platform.machine()).lower()
    flags = cpu_flags() if flags is None else flags
    if machine not in ("x86_64", "amd64") or flags is None:
        return False
    return "avx2" in flags and not flags & set(EXACT_INT8_FLAGS)


def quantize(model, per_channel: bool = False, reduce_range: bool = False):
    """``quantize_dynamic`` of ``model`` (int8 weights, 7-bit with ``reduce_range``, its defaults otherwise), the
    quantized ModelProto."""
    onnx = import_framework("onnx", "onnx-ort-lstm")
    quantization = import_framework("onnxruntime.quantization", "onnx-ort-lstm")
    root = logging.getLogger()
    level = root.level
    with tempfile.TemporaryDirectory() as directory:  # quantize_dynamic writes a file, nothing else
        path = os.path.join(directory, "quantized.onnx")
        root.setLevel(logging.ERROR)  # its advice to pre-process a model (shape inference), on the root logger
        try:
            quantization.quantize_dynamic(model, path, per_channel=per_channel, reduce_range=reduce_range)
        finally:
            root.setLevel(level)
        return onnx.load(path)


def initializers(model) -> dict:
    numpy_helper = import_framework("onnx.numpy_helper", "onnx-ort-lstm")
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}


def with_initializers(model, arrays: dict):
    """A copy of ``model`` whose initializers named in ``arrays`` hold those arrays instead."""
    onnx = import_framework("onnx", "onnx-ort-lstm")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        if tensor.name in arrays:
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.ascontiguousarray(arrays[tensor.name]), tensor.name))
    return copy


class QuantizedNode:
    """An ONNX Runtime system's node (``adapter``: onnx-ort-lstm) built as the system builds it, then quantized
    (``per_channel``, ``reduce_range``), its stored weights rewritten by ``mutate`` (a quantizer's bug made on purpose): ``model``
    is the adapter's with that in between, every other attribute the adapter's, so the helpers that build and run
    the adapter's node (``rnn_equivalence.frameworks.onnx_nodes.node_outputs``) run the quantized one.
    ``quantized``: the last model built."""

    def __init__(self, adapter, per_channel: bool = False, mutate=None, reduce_range: bool = False):
        self.adapter, self.per_channel, self.mutate, self.quantized = adapter, per_channel, mutate, None
        self.reduce_range = reduce_range

    def __getattr__(self, name):
        return getattr(self.adapter, name)

    def model(self, native, xs, state, config, g, padding=None):
        model, feeds, outputs = self.adapter.model(native, xs, state, config, g, padding)
        quantized = quantize(model, self.per_channel, self.reduce_range)
        if self.mutate is not None:
            quantized = with_initializers(quantized, stored_initializers(self.mutate(self.held(quantized))))
        self.quantized = quantized
        return quantized, feeds, outputs

    @staticmethod
    def held(model) -> dict:
        """The quantized node's weights (``held_weights``), checked to be one ``DynamicQuantizeLSTM``."""
        ops = [(node.domain, node.op_type) for node in model.graph.node]
        if ops != [("com.microsoft", QUANTIZED_OP)]:
            raise AssertionError(f"expected one com.microsoft {QUANTIZED_OP} node, got {ops}")
        return held_weights(initializers(model))
