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

from frameworks.base import LayerAdapter, LayerConfig, Native, NativeSpec, import_framework, scaled, transposed
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
