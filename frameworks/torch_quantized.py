"""PyTorch's int8 dynamically quantized ``nn.LSTM`` and ``nn.GRU`` (issue 37, int8): the mapping of the quantized
model's weights (NumPy only) and the runner (torch), kept apart as in frameworks/pytorch.py.

``torch.ao.quantization.quantize_dynamic(model, {nn.LSTM, nn.GRU}, dtype=torch.qint8)`` swaps a *child* module
(a module passed itself is returned unchanged: the runner quantizes it inside an ``nn.Sequential``) for
``torch.ao.nn.quantized.dynamic.LSTM`` / ``GRU``, whose ``_all_weight_values[i].param`` (i = layer * D + direction)
holds, per layer and direction, two packed linears (``__getstate__()[0][4]``: weight_ih's, weight_hh's), each
unpacked by ``torch.ops.quantized.linear_unpack`` into an int8 quantized weight and its float bias, and
``reduce_range`` (``__getstate__()[0][3]``: [1] in torch 2.13.0; a model of version < 2: [0]).

The layout, both sides (the canonical one is rnn_equivalence.reference.params'):

    quantized: weight_ih_l{k}[_reverse] int8 q (G*H, I or D*H), scales (G*H,) and zero points (G*H,) per row
               (one scale repeated for a per-tensor weight), weight_hh likewise (G*H, H), bias_ih / bias_hh float
               (G*H,); gates i f g o (LSTM), r z n (GRU): nn.LSTM's and nn.GRU's order and names
    canonical: W~_x = (q_ih - zp) * scale per row, W~_h likewise, b_x = bias_ih, b_h = bias_hh

so the mapping is the float layers' (``TorchLayerMapping``: a renaming) after dequantizing, and each weight's
bound |W~ - W| (half a grid step, ``rnn_equivalence.reference.quantized.half_steps``) maps the same way, into a
stack of the same structure (the ``grid`` of ``quantized_reference_and_bound``).

Measured with torch 2.13.0 on this CPU (engine "x86", fbgemm's kernels for a dynamic linear): the weights are
per tensor (``default_dynamic_qconfig``: MinMaxObserver, qint8, per_tensor_symmetric, zero point 0); a
dynamic linear's input quantization is per tensor with 127 levels (reduce_range): an emulation so agrees with
``torch.ops.quantized.linear_dynamic`` to 7e-7, with 255 levels it is 0.07 off; a layer without biases is
refused by ``from_float`` ("mod.bias must be True").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from rnn_equivalence.frameworks.base import import_framework
from rnn_equivalence.reference.quantized import half_steps
from rnn_equivalence.reference.stack import StackParams

GATES = {"lstm": 4, "gru": 3}


@dataclass(frozen=True)
class QuantizedWeight:
    """An int8 weight as stored: q (rows, columns) int8, and per row its scale and zero point."""

    q: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray

    @property
    def dequantized(self) -> np.ndarray:
        return (self.q.astype(np.float64) - self.zero_points[:, None]) * self.scales[:, None]

    def rows(self, order) -> "QuantizedWeight":
        return QuantizedWeight(self.q[order], self.scales[order], self.zero_points[order])


# --- the mapping: NumPy only -----------------------------------------------------------------------


class TorchQuantizedMapping:
    """The quantized model's weights (``{name: QuantizedWeight or float bias}``, torch's names) to the canonical
    parameters, through ``layers``, the float layer's mapping (a ``TorchLayerMapping``: torch-lstm-rnn's,
    torch-gru-rnn's)."""

    def __init__(self, layers):
        self.layers = layers

    def dequantized(self, quantized: dict) -> dict:
        """The native float weights the quantized model multiplies by: W~ = (q - zp) * scale, biases as stored."""
        return {name: value.dequantized if isinstance(value, QuantizedWeight) else np.asarray(value, np.float64)
                for name, value in quantized.items()}

    def from_quantized(self, quantized: dict, config) -> tuple[StackParams, StackParams]:
        """(the canonical parameters the model computes with, W~; its grid: each weight's bound |W~ - W| in
        the same layout), both from the float layer's mapping."""
        grid = {name: half_steps(value.scales, value.q.shape) if isinstance(value, QuantizedWeight)
                else np.asarray(value, np.float64) for name, value in quantized.items()}
        return self.layers.from_native(self.dequantized(quantized), config), self.layers.from_native(grid, config)


def gate_rows(family: str, rows: int, gate: int) -> slice:
    H = rows // GATES[family]
    return slice(gate * H, (gate + 1) * H)


def scale_doubled(family: str, name: str, gate: int):
    """A quantizer bug: gate ``gate`` of weight ``name`` dequantized with twice its scale (per-row scales)."""
    def mutate(quantized: dict) -> dict:
        w = quantized[name]
        scales = w.scales.copy()
        scales[gate_rows(family, len(scales), gate)] *= 2
        return {**quantized, name: QuantizedWeight(w.q, scales, w.zero_points)}
    return mutate


def gates_exchanged(family: str, name: str, a: int, b: int):
    """A quantizer bug: the stored rows of gates ``a`` and ``b`` of weight ``name`` exchanged."""
    def mutate(quantized: dict) -> dict:
        w = quantized[name]
        order = np.arange(len(w.scales))
        ra, rb = gate_rows(family, len(order), a), gate_rows(family, len(order), b)
        order[ra], order[rb] = order[rb].copy(), order[ra].copy()
        return {**quantized, name: w.rows(order)}
    return mutate


# --- the runner: torch -------------------------------------------------------------------------------


class TorchQuantizedRunner:
    """Builds a system's float layer (torch-lstm-rnn, torch-gru-rnn: ``adapter``) on its native weights,
    quantizes it dynamically to int8 and runs it; reads and rewrites its packed weights."""

    def __init__(self, adapter):
        self.adapter = adapter
        adapter.start()
        self.torch = import_framework("torch", adapter.name)

    @property
    def engine(self) -> str:
        return self.torch.backends.quantized.engine

    def quantize(self, native: dict, xs, state, config, g: str):
        """(the quantized module, its arguments): the float module ``adapter.module`` builds, quantized."""
        torch = self.torch
        module, args = self.adapter.module(native, xs, state, config, g)
        with warnings.catch_warnings():
            # torch 2.13.0's notices: torch.ao.quantization is deprecated (pytorch/ao#2259), and so is creating
            # qint8 tensors (pytorch#184982); both still work, and this is what they compute
            warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated",
                                    category=DeprecationWarning)
            warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*deprecated",
                                    category=UserWarning)
            wrapped = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(module),
                                                             {torch.nn.LSTM, torch.nn.GRU}, dtype=torch.qint8)
        return wrapped[0], args

    def _names(self, quantized_module):
        D = 2 if quantized_module.bidirectional else 1
        return [self.adapter.tag(k, d) for k in range(quantized_module.num_layers) for d in range(D)]

    def unpack(self, quantized_module) -> dict:
        """The packed weights as NumPy: {"weight_ih_l0": QuantizedWeight, ..., "bias_ih_l0": float32, ...}."""
        torch, result = self.torch, {}
        for tag, packed in zip(self._names(quantized_module), quantized_module._all_weight_values):
            kind, _, _, ints, linears = packed.param.__getstate__()[0]
            if kind != "quantized_dynamic" or list(ints) != [1]:
                raise AssertionError(f"{tag}: expected int8 cell parameters with reduce_range, got {kind} {ints}")
            for side, linear in zip(("ih", "hh"), linears):
                weight, bias = torch.ops.quantized.linear_unpack(linear)
                rows = weight.shape[0]
                if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                    scales, zero_points = np.full(rows, weight.q_scale()), np.full(rows, weight.q_zero_point())
                else:
                    scales = weight.q_per_channel_scales().numpy().astype(np.float64)
                    zero_points = weight.q_per_channel_zero_points().numpy()
                result[f"weight_{side}{tag}"] = QuantizedWeight(weight.int_repr().numpy().copy(), scales,
                                                                zero_points.astype(np.int64))
                result[f"bias_{side}{tag}"] = bias.detach().numpy().copy()
        return result

    def load(self, quantized_module, quantized: dict) -> None:
        """Rewrite the module's packed weights from ``quantized`` (per-row scales): what a quantizer that made
        them so would have stored, packed as ``from_float`` packs them (reduce_range)."""
        torch = self.torch
        for tag, packed in zip(self._names(quantized_module), quantized_module._all_weight_values):
            linears, biases = [], []
            for side in ("ih", "hh"):
                w = quantized[f"weight_{side}{tag}"]
                q = torch._make_per_channel_quantized_tensor(
                    torch.from_numpy(np.ascontiguousarray(w.q)), torch.from_numpy(w.scales.astype(np.float64)),
                    torch.from_numpy(w.zero_points.astype(np.int64)), 0)
                bias = torch.from_numpy(np.asarray(quantized[f"bias_{side}{tag}"], np.float32))
                linears.append(torch.ops.quantized.linear_prepack(q, bias))
                biases.append(bias)
            packed.param = torch.ops.quantized.make_quantized_cell_params_dynamic(*linears, *biases, True)

    def run(self, quantized_module, args, config) -> dict:
        """The quantized module on its arguments: the float layer's outputs, as ``adapter.run`` gives them."""
        with self.torch.no_grad():
            output, final = quantized_module(*args)
        if self.adapter.family == "lstm":
            outputs = {"output": output, "h_n": final[0], "c_n": final[1]}
        else:
            outputs = {"output": output, "h_n": final}
        return {key: value.detach().numpy() for key, value in outputs.items()}
