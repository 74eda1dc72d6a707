"""PyTorch ``torch.nn.RNNCell`` and ``torch.nn.RNN``: two kernels and two biases per cell.

Canonical layout is PyTorch's own, so the mapping is a renaming:

    canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    torch:     weight_ih (H, I), weight_hh (H, H), bias_ih (H), bias_hh (H)

PyTorch computes h' = g(x W_ih^T + b_ih + h W_hh^T + b_hh) on batch rows, which
is the canonical formula with the same orientation; the round trip is exact.
``nn.RNN`` suffixes each name with ``_l{layer}`` and, for the backward
direction, ``_reverse``; layer k > 0 has ``weight_ih`` of shape (H, D*H).
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    Adapter, GatedAdapter, GatedLayerAdapter, LayerConfig, Native, NativeSpec, StackOfCells, import_framework, reorder_gates, scaled,
    swapped, swapped_gates, transposed,
)
from reference.params import RNNParams


def cell_to_native(params: RNNParams, suffix: str = "") -> Native:
    native = {f"weight_ih{suffix}": params.W_hx, f"weight_hh{suffix}": params.W_hh}
    if params.has_bias:
        native.update({f"bias_ih{suffix}": params.b_x, f"bias_hh{suffix}": params.b_h})
    return native


def cell_from_native(native: Native, suffix: str = "") -> RNNParams:
    return RNNParams(native[f"weight_ih{suffix}"], native[f"weight_hh{suffix}"],
                     native.get(f"bias_ih{suffix}"), native.get(f"bias_hh{suffix}"))


def cell_spec(input_size: int, hidden_size: int, has_bias: bool, suffix: str = "") -> NativeSpec:
    I, H = input_size, hidden_size
    spec = {f"weight_ih{suffix}": ((H, I), "(hidden_size, input_size)"),
            f"weight_hh{suffix}": ((H, H), "(hidden_size, hidden_size)")}
    if has_bias:
        spec.update({f"bias_ih{suffix}": ((H,), "(hidden_size,)"), f"bias_hh{suffix}": ((H,), "(hidden_size,)")})
    return spec


def layer_suffix(layer: int, direction: int) -> str:
    return f"_l{layer}" + ("_reverse" if direction else "")


class TorchRNNCell(Adapter):
    name = "torch"
    cell = "torch.nn.RNNCell"
    distributions = ("torch",)
    requires = ("torch",)
    bias_names = ("bias_ih", "bias_hh")
    activations = ("tanh", "relu")  # `nonlinearity` accepts only these
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
        return cell_spec(input_size, hidden_size, has_bias)

    def to_native(self, params: RNNParams) -> Native:
        return cell_to_native(params)

    def from_native(self, native: Native) -> RNNParams:
        return cell_from_native(native)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.torch.nn.RNNCell(input_size, hidden_size)
        return {name: tuple(p.shape) for name, p in cell.named_parameters()}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        torch = self.torch
        dtype = self.check_call(native, xs, h0, g)
        cell = torch.nn.RNNCell(xs.shape[2], h0.shape[1], bias="bias_ih" in native, nonlinearity=g,
                                dtype=getattr(torch, dtype.name))
        load_parameters(torch, cell, native)
        with torch.no_grad():
            h, outputs = torch.from_numpy(h0), []
            for x in torch.from_numpy(xs):
                h = cell(x, h)
                outputs.append(h)
            return torch.stack(outputs).numpy()


def load_parameters(torch, module, native: Native) -> None:
    with torch.no_grad():
        for name, value in native.items():
            getattr(module, name).copy_(torch.from_numpy(np.ascontiguousarray(value)))


def _swap_names(native: Native, a: str, b: str) -> Native:
    """Exchange every weight whose name ends in suffix a with its twin ending in b."""
    out = dict(native)
    for name in native:
        if name.endswith(a):
            twin = name[: -len(a)] + b
            out[name], out[twin] = native[twin], native[name]
    return out


class TorchRNN(StackOfCells):
    name = "torch-rnn"
    cell = "torch.nn.RNN"
    sums_biases = False
    distributions = ("torch",)
    requires = ("torch",)
    bias_names = ("bias_ih_l0", "bias_hh_l0")
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(1, True, initial_state=False, options=(("batch_first", True),)),
        LayerConfig(2, False, bias=False, options=(("batch_first", True),)),
        LayerConfig(2, True, options=(("batch_first", False),)),
        LayerConfig(3, True, options=(("batch_first", True),)),
        LayerConfig(3, False, bias=False, initial_state=False, options=(("batch_first", False),)),
    )
    mutation_config = LayerConfig(3, True, options=(("batch_first", False),))
    mutations = {
        "weight_hh_l0 transposed": transposed("weight_hh_l0"),
        "forward and reverse swapped in layer 0": lambda n: _swap_names(n, "_l0", "_l0_reverse"),
        "layers 1 and 2 swapped": lambda n: _swap_names(_swap_names(n, "_l1", "_l2"), "_l1_reverse", "_l2_reverse"),
        "bias_hh_l2_reverse dropped": scaled("bias_hh_l2_reverse", 0.0),
    }

    def __init__(self):
        self.torch = import_framework("torch", self.name)

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "weight_hh_l0"

    cell_to_native, cell_from_native, cell_spec = (staticmethod(cell_to_native),
                                                   staticmethod(cell_from_native), staticmethod(cell_spec))

    def tag(self, layer: int, direction: int) -> str:
        return layer_suffix(layer, direction)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        rnn = self.torch.nn.RNN(input_size, hidden_size, num_layers=2, bidirectional=True)
        return {name: tuple(p.shape) for name, p in rnn.named_parameters()}

    def arrange(self, outputs, h_n, config: LayerConfig):
        # batch_first applies to the input and output, not to h_n.
        return {"output": outputs.transpose(1, 0, 2) if config.option("batch_first") else outputs, "h_n": h_n}

    def module(self, native: Native, xs, h0, g: str, config: LayerConfig):
        """The loaded ``nn.RNN`` and its arguments, in the layout ``config`` asks for."""
        torch = self.torch
        dtype = self.check_layer_call(native, xs, h0, g, config)
        hidden_size = self._hidden_size(native, h0, config, xs.shape[2])
        batch_first = bool(config.option("batch_first"))
        rnn = torch.nn.RNN(xs.shape[2], hidden_size, num_layers=config.num_layers, nonlinearity=g,
                           bias=config.bias, batch_first=batch_first, bidirectional=config.bidirectional,
                           dtype=getattr(torch, dtype.name))
        load_parameters(torch, rnn, native)
        inputs = torch.from_numpy(np.ascontiguousarray(xs.transpose(1, 0, 2) if batch_first else xs))
        return rnn, (inputs,) if h0 is None else (inputs, torch.from_numpy(h0))

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig):
        rnn, args = self.module(native, xs, h0, g, config)
        with self.torch.no_grad():
            output, h_n = rnn(*args)
        return {"output": output.numpy(), "h_n": h_n.numpy()}


class TorchGatedCell(GatedAdapter):
    """``torch.nn.LSTMCell`` (gates i f g o) and ``torch.nn.GRUCell`` (gates r z n, reset after).

    Canonical layout is PyTorch's own: weight_ih (G*H, I) = W_x, weight_hh (G*H, H) = W_h,
    bias_ih = b_x, bias_hh = b_h, same gate order. A renaming; the round trip is exact.
    """

    distributions = ("torch",)
    requires = ("torch",)
    bias_names = ("bias_ih", "bias_hh")

    def __init__(self):
        self.torch = import_framework("torch", self.name)

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        G, I, H = self.gates, input_size, hidden_size
        return {"weight_ih": ((G * H, I), f"({G}*hidden_size, input_size)"),
                "weight_hh": ((G * H, H), f"({G}*hidden_size, hidden_size)"),
                "bias_ih": ((G * H,), f"({G}*hidden_size,)"), "bias_hh": ((G * H,), f"({G}*hidden_size,)")}

    def to_native(self, params) -> Native:
        return {"weight_ih": params.W_x, "weight_hh": params.W_h, "bias_ih": params.b_x, "bias_hh": params.b_h}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        return GatedParams(self.cell_type, native["weight_ih"], native["weight_hh"],
                           native["bias_ih"], native["bias_hh"])

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = getattr(self.torch.nn, self.cell.split(".")[-1])(input_size, hidden_size)
        return {name: tuple(p.shape) for name, p in cell.named_parameters()}

    def run_native(self, native: Native, xs, h0, c0):
        torch = self.torch
        dtype = self.check_gated_call(native, xs, h0, c0)
        cell = getattr(torch.nn, self.cell.split(".")[-1])(xs.shape[2], h0.shape[1], dtype=getattr(torch, dtype.name))
        load_parameters(torch, cell, native)
        h, c, hs, cs = torch.from_numpy(h0), torch.from_numpy(c0), [], []
        with torch.no_grad():
            for x in torch.from_numpy(xs):
                if self.cell_type == "lstm":
                    h, c = cell(x, (h, c))
                    cs.append(c.numpy())
                else:
                    h = cell(x, h)
                hs.append(h.numpy())
        return {"h": np.stack(hs), "c": np.stack(cs)} if cs else {"h": np.stack(hs)}


class TorchLSTMCell(TorchGatedCell):
    name = "torch-lstm"
    cell = "torch.nn.LSTMCell"
    cell_type, gates = "lstm", 4
    mutations = {
        "gates i and f swapped": swapped_gates("weight_ih", 0, 1, 4, axis=0),
        "gates g and o swapped in weight_hh": swapped_gates("weight_hh", 2, 3, 4, axis=0),
        "bias_hh dropped": scaled("bias_hh", 0.0),
        "weight_hh transposed blockwise": lambda n: {**n, "weight_hh": np.concatenate(
            [b.T for b in np.split(n["weight_hh"], 4)])},
    }


class TorchGRUCell(TorchGatedCell):
    name = "torch-gru"
    cell = "torch.nn.GRUCell"
    cell_type, gates = "gru", 3
    mutations = {
        "gates r and z swapped (the Keras order)": lambda n: {
            **n, **{k: reorder_gates(n[k], (1, 0, 2)) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}},
        "b_hn dropped": lambda n: {**n, "bias_hh": np.concatenate([n["bias_hh"][: 2 * n["bias_hh"].size // 3],
                                                                    np.zeros(n["bias_hh"].size // 3, n["bias_hh"].dtype)])},
        "b_hn moved into b_in": lambda n: {**n, **_fold_b_hn(n["bias_ih"], n["bias_hh"])},
    }


def _fold_b_hn(bias_ih, bias_hh):
    """What a converter to a one-bias GRU does: b_in + b_hn, b_hn = 0. Right for reset
    before, wrong for PyTorch's reset after, where r multiplies b_hn."""
    H = bias_hh.size // 3
    ih, hh = bias_ih.copy(), bias_hh.copy()
    ih[2 * H:] += hh[2 * H:]
    hh[2 * H:] = 0
    return {"bias_ih": ih, "bias_hh": hh}


def gated_cell_to_native(params, suffix: str = "") -> Native:
    return {f"weight_ih{suffix}": params.W_x, f"weight_hh{suffix}": params.W_h,
            f"bias_ih{suffix}": params.b_x, f"bias_hh{suffix}": params.b_h}


def gated_cell_from_native(native: Native, cell_type: str, suffix: str = ""):
    from reference.gated import GatedParams

    return GatedParams(cell_type, native[f"weight_ih{suffix}"], native[f"weight_hh{suffix}"],
                       native[f"bias_ih{suffix}"], native[f"bias_hh{suffix}"])


def gated_cell_spec(gates: int, input_size: int, hidden_size: int, suffix: str = "") -> NativeSpec:
    G, I, H = gates, input_size, hidden_size
    return {f"weight_ih{suffix}": ((G * H, I), f"({G}*hidden_size, input_size)"),
            f"weight_hh{suffix}": ((G * H, H), f"({G}*hidden_size, hidden_size)"),
            f"bias_ih{suffix}": ((G * H,), f"({G}*hidden_size,)"), f"bias_hh{suffix}": ((G * H,), f"({G}*hidden_size,)")}


class TorchGatedRNN(GatedLayerAdapter):
    """``torch.nn.LSTM`` and ``torch.nn.GRU``: the gated cells' layout per layer and direction,
    names suffixed ``_l{k}`` and ``_reverse`` as in ``nn.RNN``."""

    distributions = ("torch",)
    requires = ("torch",)
    sums_biases = False
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(2, True, options=(("batch_first", True),)),
        LayerConfig(3, False, initial_state=False, options=(("batch_first", False),)),
        LayerConfig(2, True, initial_state=False, options=(("batch_first", False),)),
    )
    mutation_config = LayerConfig(3, True, options=(("batch_first", False),))
    mutations = {
        "forward and reverse swapped in layer 0": lambda n: _swap_names(n, "_l0", "_l0_reverse"),
        "layers 1 and 2 swapped": lambda n: _swap_names(_swap_names(n, "_l1", "_l2"), "_l1_reverse", "_l2_reverse"),
        "gates 0 and 1 swapped in weight_hh_l1": lambda n: swapped_gates(
            "weight_hh_l1", 0, 1, n["weight_hh_l1"].shape[0] // n["weight_hh_l1"].shape[1], axis=0)(n),
    }

    def __init__(self):
        self.torch = import_framework("torch", self.name)

    def tag(self, layer: int, direction: int) -> str:
        return layer_suffix(layer, direction)

    def cell_spec(self, input_size, hidden_size, has_bias, tag):
        return gated_cell_spec(4 if self.cell_type == "lstm" else 3, input_size, hidden_size, tag)

    def cell_to_native(self, params, tag):
        return gated_cell_to_native(params, tag)

    def cell_from_native(self, native, tag):
        return gated_cell_from_native(native, self.cell_type, tag)

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "weight_hh_l0"

    def arrange(self, outputs, h_n, c_n, config: LayerConfig):
        arranged = {"output": outputs.transpose(1, 0, 2) if config.option("batch_first") else outputs, "h_n": h_n}
        if c_n is not None:
            arranged["c_n"] = c_n
        return arranged

    def run_native(self, native: Native, xs, h0, c0, config: LayerConfig):
        torch = self.torch
        dtype = self.check_gated_layer_call(native, xs, h0, c0, config)
        H = self._hidden_size(native, h0, config, xs.shape[2])
        batch_first = bool(config.option("batch_first"))
        module = (torch.nn.LSTM if self.cell_type == "lstm" else torch.nn.GRU)(
            xs.shape[2], H, num_layers=config.num_layers, batch_first=batch_first,
            bidirectional=config.bidirectional, dtype=getattr(torch, dtype.name))
        load_parameters(torch, module, native)
        inputs = torch.from_numpy(np.ascontiguousarray(xs.transpose(1, 0, 2) if batch_first else xs))
        state = None
        if h0 is not None:
            state = (torch.from_numpy(h0), torch.from_numpy(c0)) if self.cell_type == "lstm" else torch.from_numpy(h0)
        with torch.no_grad():
            output, final = module(inputs, state)
        if self.cell_type == "lstm":
            return {"output": output.numpy(), "h_n": final[0].numpy(), "c_n": final[1].numpy()}
        return {"output": output.numpy(), "h_n": final.numpy()}


class TorchLSTM(TorchGatedRNN):
    name = "torch-lstm-rnn"
    cell = "torch.nn.LSTM"
    cell_type = "lstm"


class TorchGRU(TorchGatedRNN):
    name = "torch-gru-rnn"
    cell = "torch.nn.GRU"
    cell_type = "gru"
