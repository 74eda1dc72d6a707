"""PyTorch ``torch.nn.RNNCell``: two kernels and two biases, canonical layout as is."""

from __future__ import annotations

import numpy as np

from frameworks.base import Adapter, Native, NativeSpec, import_framework, scaled, swapped, transposed
from reference.params import RNNParams


class TorchRNNCell(Adapter):
    name = "torch"
    cell = "torch.nn.RNNCell"
    distributions = ("torch",)
    requires = ("torch",)
    bias_names = ("bias_ih", "bias_hh")
    activations = ("tanh", "relu")  # RNNCell's `nonlinearity` accepts only these
    mutations = {
        "weight_ih transposed": transposed("weight_ih"),
        "weight_hh transposed": transposed("weight_hh"),
        "weight_ih and weight_hh swapped": swapped("weight_ih", "weight_hh"),
        "bias_hh dropped": scaled("bias_hh", 0.0),
        "bias_ih doubled": scaled("bias_ih", 2.0),
    }

    def __init__(self):
        self.torch = import_framework("torch", self.name)

    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {
            "weight_ih": ((H, I), "(hidden_size, input_size)"),
            "weight_hh": ((H, H), "(hidden_size, hidden_size)"),
        }
        if has_bias:
            spec.update(bias_ih=((H,), "(hidden_size,)"), bias_hh=((H,), "(hidden_size,)"))
        return spec

    # canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    # torch:     weight_ih (H, I), weight_hh (H, H), bias_ih (H), bias_hh (H)
    # Same shapes, same orientation (h = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)):
    # the mapping is a renaming, so the round trip is exact.
    def to_native(self, params: RNNParams) -> Native:
        native = {"weight_ih": params.W_hx, "weight_hh": params.W_hh}
        if params.has_bias:
            native.update(bias_ih=params.b_x, bias_hh=params.b_h)
        return native

    def from_native(self, native: Native) -> RNNParams:
        return RNNParams(native["weight_ih"], native["weight_hh"], native.get("bias_ih"), native.get("bias_hh"))

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.torch.nn.RNNCell(input_size, hidden_size)
        return {name: tuple(p.shape) for name, p in cell.named_parameters()}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        torch = self.torch
        dtype = self.check_call(native, xs, h0, g)
        cell = torch.nn.RNNCell(
            xs.shape[2], h0.shape[1], bias="bias_ih" in native, nonlinearity=g,
            dtype=getattr(torch, dtype.name),
        )
        with torch.no_grad():
            for name, value in native.items():
                getattr(cell, name).copy_(torch.from_numpy(np.ascontiguousarray(value)))
            h, outputs = torch.from_numpy(h0), []
            for x in torch.from_numpy(xs):
                h = cell(x, h)
                outputs.append(h)
            return torch.stack(outputs).numpy()
