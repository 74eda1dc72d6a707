"""The ONNX ``RNN`` operator, built with ``onnx.helper`` and run by two implementations:
ONNX Runtime and the ``onnx.reference`` evaluator.

The mapping, written once here (``W``, ``R``, ``B`` are the operator's inputs):

    canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H), per direction d
    ONNX:      W[d] = W_hx (H, I), R[d] = W_hh (H, H), B[d] = [b_x, b_h] (2H) = [Wb, Rb]

ONNX computes H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), the canonical formula
in the same orientation with both biases kept, so the round trip is exact.
Direction 0 is forward, direction 1 (``bidirectional``) or the only one
(``reverse``) runs from the last step; its outputs Y are in input time order.
Shapes: X (T, batch, I), Y (T, D, batch, H), Y_h (D, batch, H) with
``layout=0``; X (batch, T, I), Y (batch, T, D, H), Y_h (batch, D, H) with
``layout=1``. Without ``B`` the operator has no bias.
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    GatedAdapter, LayerAdapter, LayerConfig, Native, NativeSpec, import_framework, reorder_gates, scaled, transposed,
)
from reference.params import RNNParams
from reference.stack import StackedRNNParams

# identity is the spec's Affine(x) = alpha x + beta with alpha = 1, beta = 0.
ONNX_ACTIVATION = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid", "identity": "Affine"}
OPSET = 22
IR_VERSION = 10  # what opset 22 needs; ONNX Runtime 1.31 reads at most IR 13


def _swap_directions(native: Native) -> Native:
    return {name: value[::-1].copy() for name, value in native.items()}


class OnnxRNN(LayerAdapter):
    cell = "ONNX RNN operator"
    sums_biases = False
    activations = ("tanh", "relu", "identity")  # identity: the Affine activation, worth its own check
    bias_names = ("B",)
    configs = (
        LayerConfig(1, False, options=(("direction", "forward"), ("layout", 0))),
        LayerConfig(1, False, initial_state=False, options=(("direction", "reverse"), ("layout", 0))),
        LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0))),
        LayerConfig(1, True, bias=False, options=(("direction", "bidirectional"), ("layout", 1))),
        LayerConfig(1, False, bias=False, initial_state=False, options=(("direction", "forward"), ("layout", 1))),
        LayerConfig(1, False, options=(("direction", "reverse"), ("layout", 1))),
    )
    mutation_config = LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0)))
    mutations = {
        "R transposed": lambda n: {**n, "R": n["R"].transpose(0, 2, 1).copy()},
        "directions swapped": _swap_directions,
        "W and R swapped": lambda n: {**n, "W": n["R"], "R": n["W"]},
        "B dropped": scaled("B", 0.0),
    }

    def __init__(self):
        self.onnx = import_framework("onnx", self.name)
        self.helper = import_framework("onnx.helper", self.name)

    def describe(self) -> str:
        return f"{self.cell} (opset {OPSET}) in {self.runtime}"

    def reads_reversed(self, config: LayerConfig) -> bool:
        return config.option("direction") == "reverse"

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "R"

    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int) -> NativeSpec:
        D, I, H = 2 if config.bidirectional else 1, input_size, hidden_size
        spec = {"W": ((D, H, I), "(num_directions, hidden_size, input_size)"),
                "R": ((D, H, H), "(num_directions, hidden_size, hidden_size)")}
        if config.bias:
            spec["B"] = ((D, 2 * H), "(num_directions, 2*hidden_size)")
        return spec

    def to_native(self, stack: StackedRNNParams, config: LayerConfig) -> Native:
        cells = stack.layers[0]
        native = {"W": np.stack([p.W_hx for p in cells]), "R": np.stack([p.W_hh for p in cells])}
        if stack.has_bias:
            native["B"] = np.stack([np.concatenate([p.b_x, p.b_h]) for p in cells])
        return native

    def from_native(self, native: Native, config: LayerConfig) -> StackedRNNParams:
        H = native["R"].shape[-1]
        B = native.get("B")
        return StackedRNNParams([[RNNParams(native["W"][d], native["R"][d],
                                            None if B is None else B[d, :H], None if B is None else B[d, H:])
                                  for d in range(native["W"].shape[0])]])

    def arrange(self, outputs, h_n, config: LayerConfig):
        D = 2 if config.bidirectional else 1
        T, batch = outputs.shape[:2]
        if self.reads_reversed(config):  # the reference read reversed; ONNX reports in time order
            outputs = outputs[::-1]
        Y = outputs.reshape(T, batch, D, -1).transpose(0, 2, 1, 3)  # (T, D, batch, H)
        if config.option("layout") == 1:
            return {"Y": Y.transpose(2, 0, 1, 3), "Y_h": h_n.transpose(1, 0, 2)}
        return {"Y": Y, "Y_h": h_n}

    def model(self, native: Native, xs, h0, g: str, config: LayerConfig):
        """The ONNX model of one RNN node, weights as initializers; returns (model, feeds)."""
        helper, onnx = self.helper, self.onnx
        dtype = self.check_layer_call(native, xs, h0, g, config)
        elem = helper.np_dtype_to_tensor_dtype(dtype)
        D, H = native["R"].shape[0], native["R"].shape[-1]
        layout = config.option("layout", 0)
        X = xs if layout == 0 else xs.transpose(1, 0, 2)
        inputs = ["X", "W", "R", "B" if "B" in native else "", "", "initial_h" if h0 is not None else ""]
        while inputs[-1] == "":
            inputs.pop()
        affine = {"activation_alpha": [1.0] * D, "activation_beta": [0.0] * D} if g == "identity" else {}
        node = helper.make_node("RNN", inputs, ["Y", "Y_h"], hidden_size=H, layout=layout,
                                direction=config.option("direction"), activations=[ONNX_ACTIVATION[g]] * D, **affine)
        initializers = [onnx.numpy_helper.from_array(np.ascontiguousarray(native[n]), n) for n in ("W", "R", "B")
                        if n in native]
        graph_inputs = [helper.make_tensor_value_info("X", elem, X.shape)]
        feeds = {"X": np.ascontiguousarray(X)}
        if h0 is not None:
            initial_h = h0 if layout == 0 else h0.transpose(1, 0, 2)
            graph_inputs.append(helper.make_tensor_value_info("initial_h", elem, initial_h.shape))
            feeds["initial_h"] = np.ascontiguousarray(initial_h)
        T, batch = xs.shape[:2]
        Y_shape, Y_h_shape = ((T, D, batch, H), (D, batch, H)) if layout == 0 else ((batch, T, D, H), (batch, D, H))
        graph = helper.make_graph([node], "rnn", graph_inputs,
                                  [helper.make_tensor_value_info("Y", elem, Y_shape),
                                   helper.make_tensor_value_info("Y_h", elem, Y_h_shape)], initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        onnx.checker.check_model(model, full_check=True)
        return model, feeds

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig):
        model, feeds = self.model(native, xs, h0, g, config)
        Y, Y_h = self.evaluate(model, feeds)
        return {"Y": np.asarray(Y), "Y_h": np.asarray(Y_h)}


class OnnxRuntimeRNN(OnnxRNN):
    name = "onnx-ort"
    runtime = "ONNX Runtime"
    distributions = ("onnx", "onnxruntime")
    requires = ("onnx", "onnxruntime")
    dtypes = ("float32",)  # ONNX Runtime's CPU RNN kernel is registered for float only
    # Its CPU kernel refuses layout=1 ("Batchwise recurrent operations (layout == 1) are not
    # supported", rnn.h); tests/equivalence/test_limitations.py keeps that refusal checked.
    configs = tuple(c for c in OnnxRNN.configs if c.option("layout") == 0)

    def __init__(self):
        super().__init__()
        self.ort = import_framework("onnxruntime", self.name)

    def evaluate(self, model, feeds):
        session = self.ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(["Y", "Y_h"], feeds)


class OnnxReferenceRNN(OnnxRNN):
    name = "onnx-reference"
    runtime = "onnx.reference"
    distributions = ("onnx",)
    requires = ("onnx",)
    # onnx/reference/ops/op_rnn.py implements only the Tanh and Affine activations.
    activations = ("tanh", "identity")

    def evaluate(self, model, feeds):
        reference = import_framework("onnx.reference", self.name)
        return reference.ReferenceEvaluator(model).run(["Y", "Y_h"], feeds)


# --- gated operators ----------------------------------------------------------------
#
#   canonical LSTM gates i f g o: W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
#   ONNX LSTM, gates i o f c:     W[0] (4H, I), R[0] (4H, H), B[0] (8H) = [Wb, Rb], reordered
#   canonical GRU gates r z n:    W_x (3H, I), W_h (3H, H), b_x, b_h (3H)
#   ONNX GRU, gates z r h:        W[0] (3H, I), R[0] (3H, H), B[0] (6H) = [Wb, Rb], reordered;
#       linear_before_reset=1 is the reset-after GRU (PyTorch's), 0 (the default) reset before.
#   Both biases are kept: the round trip is exact.
ONNX_ORDER = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}  # ONNX's gates as canonical indices


class OnnxGated(GatedAdapter):
    """One forward ONNX LSTM or GRU node over the sequence; h_t for every step, and the
    final c for an LSTM (the operator returns only Y_c)."""

    bias_names = ("B",)

    def __init__(self):
        self.onnx = import_framework("onnx", self.name)
        self.helper = import_framework("onnx.helper", self.name)

    def describe(self) -> str:
        extra = "" if self.cell_type == "lstm" else f", linear_before_reset={self.linear_before_reset}"
        return f"ONNX {self.cell_type.upper()} operator (opset {OPSET}{extra}) in {self.runtime}"

    @property
    def linear_before_reset(self) -> int:
        return 1 if self.gru_variant == "reset_after" else 0

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        G, I, H = (4 if self.cell_type == "lstm" else 3), input_size, hidden_size
        return {"W": ((1, G * H, I), f"(num_directions, {G}*hidden_size, input_size)"),
                "R": ((1, G * H, H), f"(num_directions, {G}*hidden_size, hidden_size)"),
                "B": ((1, 2 * G * H), f"(num_directions, {2 * G}*hidden_size)")}

    def to_native(self, params) -> Native:
        order = ONNX_ORDER[self.cell_type]
        return {"W": reorder_gates(params.W_x, order)[None], "R": reorder_gates(params.W_h, order)[None],
                "B": np.concatenate([reorder_gates(params.b_x, order), reorder_gates(params.b_h, order)])[None]}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        back = np.argsort(ONNX_ORDER[self.cell_type])
        b_x, b_h = np.split(np.asarray(native["B"])[0], 2)
        return GatedParams(self.cell_type, reorder_gates(native["W"][0], back), reorder_gates(native["R"][0], back),
                           reorder_gates(b_x, back), reorder_gates(b_h, back))

    def run_native(self, native: Native, xs, h0, c0):
        helper, onnx = self.helper, self.onnx
        dtype = self.check_gated_call(native, xs, h0, c0)
        elem = helper.np_dtype_to_tensor_dtype(dtype)
        T, batch, H = xs.shape[0], xs.shape[1], h0.shape[1]
        lstm = self.cell_type == "lstm"
        inputs = ["X", "W", "R", "B", "", "initial_h"] + (["initial_c"] if lstm else [])
        outputs = ["Y", "Y_h"] + (["Y_c"] if lstm else [])
        attributes = {} if lstm else {"linear_before_reset": self.linear_before_reset}
        node = helper.make_node(self.cell_type.upper(), inputs, outputs, hidden_size=H, **attributes)
        feeds = {"X": xs, "initial_h": h0[None]} | ({"initial_c": c0[None]} if lstm else {})
        graph = helper.make_graph(
            [node], self.cell_type,
            [helper.make_tensor_value_info(name, elem, value.shape) for name, value in feeds.items()],
            [helper.make_tensor_value_info("Y", elem, (T, 1, batch, H)),
             helper.make_tensor_value_info("Y_h", elem, (1, batch, H))]
            + ([helper.make_tensor_value_info("Y_c", elem, (1, batch, H))] if lstm else []),
            [onnx.numpy_helper.from_array(np.ascontiguousarray(native[n]), n) for n in ("W", "R", "B")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        onnx.checker.check_model(model, full_check=True)
        results = self.evaluate(model, {k: np.ascontiguousarray(v) for k, v in feeds.items()}, outputs)
        out = {"h": np.asarray(results[0])[:, 0]}
        if lstm:
            out["c_last"] = np.asarray(results[2])[0]
        return out


class _OrtGated(OnnxGated):
    runtime = "ONNX Runtime"
    distributions = ("onnx", "onnxruntime")
    requires = ("onnx", "onnxruntime")
    dtypes = ("float32",)

    def evaluate(self, model, feeds, outputs):
        ort = import_framework("onnxruntime", self.name)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(outputs, feeds)


class _ReferenceGated(OnnxGated):
    runtime = "onnx.reference"
    distributions = ("onnx",)
    requires = ("onnx",)

    def evaluate(self, model, feeds, outputs):
        return import_framework("onnx.reference", self.name).ReferenceEvaluator(model).run(outputs, feeds)


def _onnx_gated(base, runtime_label, cell_type, variant):
    suffix = "-reset-before" if variant == "reset_before" else ""
    back = tuple(np.argsort(ONNX_ORDER[cell_type]))
    mutations = {
        "W and R left in PyTorch's gate order": lambda n: {
            **n, "W": reorder_gates(n["W"][0], back)[None], "R": reorder_gates(n["R"][0], back)[None]},
        "R transposed blockwise": lambda n: {**n, "R": np.concatenate(
            [b.T for b in np.split(n["R"][0], len(back))])[None]},
        "B dropped": scaled("B", 0.0),
    }
    return type(f"Onnx_{runtime_label}_{cell_type}{suffix}".replace("-", "_"), (base,), {
        "name": f"onnx-{runtime_label}-{cell_type}{suffix}", "cell": f"ONNX {cell_type.upper()}",
        "cell_type": cell_type, "gru_variant": variant, "mutations": mutations, "__module__": __name__})


ONNX_GATED = {
    cls.name: cls
    for base, label in ((_OrtGated, "ort"), (_ReferenceGated, "reference"))
    for cls in (_onnx_gated(base, label, "lstm", "reset_after"), _onnx_gated(base, label, "gru", "reset_after"),
                _onnx_gated(base, label, "gru", "reset_before"))
}
