"""The ONNX ``RNN``, ``LSTM`` and ``GRU`` operators, built with ``onnx.helper`` as a graph of one
node and run by two implementations: ONNX Runtime and the ``onnx.reference`` evaluator.

The mapping, written once here for the three operators (``W``, ``R``, ``B`` are the operator's
inputs; G = 1, 4, 3 gates):

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H), per direction d;
               gates h (RNN), i f g o (LSTM), r z n (GRU)
    ONNX:      W[d] = W_x (G*H, I), R[d] = W_h (G*H, H), B[d] = [b_x, b_h] (2*G*H) = [Wb, Rb],
               gate blocks reordered to ONNX's: h (RNN), i o f c (LSTM), z r h (GRU);
               directions stacked on axis 0: W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H)

ONNX computes H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), the canonical formula in the same
orientation with both biases kept (the gates alike), so the round trip is exact. The GRU's
``linear_before_reset=1`` is the reset-after GRU (PyTorch's), 0 (the default) reset before.
Without ``B`` the operator has no bias.

The RNN operator is tested as a layer: direction 0 is forward, direction 1
(``bidirectional``) or the only one (``reverse``) runs from the last step; its outputs Y
are in input time order. Shapes: X (T, batch, I), Y (T, D, batch, H), Y_h (D, batch, H)
with ``layout=0``; X (batch, T, I), Y (batch, T, D, H), Y_h (batch, D, H) with ``layout=1``.
The LSTM and GRU operators are tested as cells: one forward node over the sequence, h_t
for every step (Y), and for an LSTM the final c (Y_c, the operator returns no c_t), as "c_last";
in a configuration that names a ``direction`` (their padded and chunked runs) they are layers
like the RNN operator, Y, Y_h and Y_c as the node returns them.

Padded batches: the optional input ``sequence_lens`` (int32, (batch,)) gives each element's real
steps, the first ones (the spec has no other padding). ONNX Runtime runs each element over them,
writes zeros to Y on the padded steps (not in the spec's text, which leaves them open: onnx/onnx#2089;
ORT zero-fills since microsoft/onnxruntime#1193), returns the state after the last real step as
Y_h / Y_c, and starts the reverse direction at each element's own last real step.
``onnx.reference`` takes the input and ignores it (its ``_run`` marks it unused, ``noqa: ARG002``;
onnx/onnx#7935 left it so: "it's not supported anyway"): every element runs all T steps
(tests/equivalence/test_padded_onnx.py measures it). A chunked run feeds each call's Y_h (and Y_c)
as the next call's initial_h (initial_c).
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    CELL, Adapter, LayerConfig, Native, NativeSpec, gates_text, import_framework, reorder_gates, scaled,
    states_with_last_c,
)
from reference.cells import state_keys
from reference.padding import Padding
from reference.stack import StackParams

# identity is the spec's Affine(x) = alpha x + beta with alpha = 1, beta = 0.
ONNX_ACTIVATION = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid", "identity": "Affine"}
OPSET = 22
IR_VERSION = 10  # what opset 22 needs; ONNX Runtime 1.31 reads at most IR 13
ONNX_ORDER = {"rnn": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}  # ONNX's gates as canonical indices


class OnnxOperator(Adapter):
    """The mapping above, and the model of one ``RNN``/``LSTM``/``GRU`` node."""

    kept_hidden_biases = ("h", "i", "f", "g", "o", "r", "z", "n")  # every gate: B = [Wb, Rb]
    state_names = {"h": "initial_h", "c": "initial_c"}
    runtime: str
    # Padded batches: sequence_lens, post-padding only (the operator reads each element's first
    # steps), one and two directions, from a given initial state. The reverse direction is checked in
    # tests/equivalence/test_padded_onnx.py: a system that reads reversed is compared on a reversed
    # batch, whose padding is then in front. Chunked: no initial state in the first call.
    padded_configs = (LayerConfig(1, False, options=(("direction", "forward"),)),
                      LayerConfig(1, True, options=(("direction", "bidirectional"),)))
    chunked_configs = (LayerConfig(1, False, initial_state=False, options=(("direction", "forward"),)),)
    lengths_name = "sequence_lens"

    def __init__(self):
        self.onnx = import_framework("onnx", self.name)
        self.helper = import_framework("onnx.helper", self.name)

    def describe(self) -> str:
        extra = f", linear_before_reset={self.linear_before_reset}" if self.family == "gru" else ""
        return f"ONNX {self.family.upper()} operator (opset {OPSET}{extra}) in {self.runtime}"

    @property
    def linear_before_reset(self) -> int:
        return 1 if self.variant == "reset_after" else 0

    def recurrent_kernel(self, config: LayerConfig) -> str:
        return "R"

    def layerwise(self, config: LayerConfig) -> bool:
        """True where the outputs are the node's own (Y, Y_h, Y_c): the RNN layer, and a gated
        operator in a configuration that names a direction."""
        return self.layer or config.option("direction") is not None

    @classmethod
    def reads_reversed(cls, config: LayerConfig) -> bool:
        return config.option("direction") == "reverse"

    # --- the mapping: one layer, its directions stacked ---------------------------
    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int) -> NativeSpec:
        D, G, I, H = config.num_directions, len(ONNX_ORDER[self.family]), input_size, hidden_size
        GH = gates_text(self.family, "hidden_size")
        spec = {"W": ((D, G * H, I), f"(num_directions, {GH}, input_size)"),
                "R": ((D, G * H, H), f"(num_directions, {GH}, hidden_size)")}
        if config.bias:
            spec["B"] = ((D, 2 * G * H), f"(num_directions, {2 * G}*hidden_size)")
        return spec

    def to_native(self, params, config: LayerConfig = CELL) -> Native:
        stack = StackParams.of(params)
        if stack.num_layers != 1:
            raise ValueError(f"{self.cell}: one node is one layer; got parameters of {stack.num_layers} layers")
        order, cells = ONNX_ORDER[self.family], stack.layers[0]
        native = {"W": np.stack([reorder_gates(p.W_x, order) for p in cells]),
                  "R": np.stack([reorder_gates(p.W_h, order) for p in cells])}
        if stack.has_bias:
            native["B"] = np.stack([np.concatenate([reorder_gates(p.b_x, order), reorder_gates(p.b_h, order)])
                                    for p in cells])
        return native

    def from_native(self, native: Native, config: LayerConfig = CELL) -> StackParams:
        back = np.argsort(ONNX_ORDER[self.family])
        W, R, B = np.asarray(native["W"]), np.asarray(native["R"]), native.get("B")
        cells = []
        for d in range(W.shape[0]):
            b_x, b_h = (None, None) if B is None else np.split(np.asarray(B)[d], 2)
            cells.append(self.params(reorder_gates(W[d], back), reorder_gates(R[d], back),
                                     None if B is None else reorder_gates(b_x, back),
                                     None if B is None else reorder_gates(b_h, back)))
        return StackParams([cells])

    # --- running ------------------------------------------------------------------
    def direction(self, config: LayerConfig) -> str:
        return config.option("direction") or ("bidirectional" if config.bidirectional else "forward")

    def model(self, native: Native, xs, state, config: LayerConfig, g: str, padding: Padding | None = None):
        """The ONNX model of one node, weights as initializers; returns (model, feeds, output names).

        ``state``: {"h": (D, batch, H), "c": ...} or None (no initial state fed); ``padding``: fed
        as ``sequence_lens`` (int32, (batch,), in either layout), or None (not fed)."""
        helper, onnx = self.helper, self.onnx
        elem = helper.np_dtype_to_tensor_dtype(xs.dtype)
        D, H = native["R"].shape[0], native["R"].shape[-1]
        T, batch = xs.shape[:2]
        layout = config.option("layout", 0)

        def batchwise(array):  # layout=1: X (batch, T, I), initial states (batch, D, H)
            return np.ascontiguousarray(array if layout == 0 else array.transpose(1, 0, 2))

        feeds = {"X": batchwise(xs)}
        if padding is not None:
            feeds["sequence_lens"] = np.asarray(padding.lengths, np.int32)
        for key in state_keys(self.family) if state is not None else ():
            feeds[self.state_names[key]] = batchwise(np.asarray(state[key]))
        inputs = ["X", "W", "R", "B" if "B" in native else "",
                  *(name if name in feeds else "" for name in ("sequence_lens", "initial_h", "initial_c"))]
        while inputs[-1] == "":
            inputs.pop()
        outputs = ["Y", "Y_h"] + (["Y_c"] if self.family == "lstm" else [])  # Y_c: the final c
        attributes = {"hidden_size": H, "direction": self.direction(config), "layout": layout}
        if self.family == "rnn":
            attributes["activations"] = [ONNX_ACTIVATION[g]] * D
            if g == "identity":
                attributes.update(activation_alpha=[1.0] * D, activation_beta=[0.0] * D)
        if self.family == "gru":
            attributes["linear_before_reset"] = self.linear_before_reset
        node = helper.make_node(self.family.upper(), inputs, outputs, **attributes)
        Y_shape, state_shape = ((T, D, batch, H), (D, batch, H)) if layout == 0 else ((batch, T, D, H), (batch, D, H))
        graph = helper.make_graph(
            [node], self.family,
            [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
             for name, value in feeds.items()],
            [helper.make_tensor_value_info(name, elem, Y_shape if name == "Y" else state_shape) for name in outputs],
            [onnx.numpy_helper.from_array(np.ascontiguousarray(native[n]), n) for n in ("W", "R", "B") if n in native])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
        onnx.checker.check_model(model, full_check=True)
        return model, feeds, outputs

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding: Padding | None = None
                   ) -> dict:
        dtype, H = self.check_call(native, xs, state, config, g)
        if not self.layerwise(config):  # the gated cells always feed their initial states: zeros where not given
            state = {key: value[None] for key, value in self.cell_state(state, xs.shape[1], H, dtype).items()}
        model, feeds, outputs = self.model(native, xs, state, config, g, padding)
        results = {name: np.asarray(value) for name, value in zip(outputs, self.evaluate(model, feeds, outputs))}
        return self.outputs(results, config)

    def evaluate(self, model, feeds, outputs):
        raise NotImplementedError

    def outputs(self, results: dict, config: LayerConfig) -> dict:
        """The system's outputs from the node's (Y, Y_h, Y_c): the node's own where ``layerwise``."""
        return {name: results[name] for name in ("Y", "Y_h", "Y_c") if name in results}

    def arrange(self, result: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """The reference's results as the node returns them: Y (T, D, batch, H), Y_h and Y_c
        (D, batch, H), batch first where ``layout=1``."""
        outputs = result["output"]
        T, batch = outputs.shape[:2]
        if self.reads_reversed(config):  # the reference read reversed; ONNX reports in time order
            outputs = outputs[::-1]
        Y = outputs.reshape(T, batch, config.num_directions, -1).transpose(0, 2, 1, 3)  # (T, D, batch, H)
        arranged = {"Y": Y, "Y_h": result["h_n"], **({"Y_c": result["c_n"]} if "c_n" in result else {})}
        if config.option("layout") == 1:
            return {name: value.transpose(2, 0, 1, 3) if name == "Y" else value.transpose(1, 0, 2)
                    for name, value in arranged.items()}
        return arranged

    def returned_state(self, outputs: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """Y_h (and Y_c), in the (D, batch, H) of initial_h (initial_c) whatever the layout."""
        state = {"h": outputs["Y_h"], **({"c": outputs["Y_c"]} if "Y_c" in outputs else {})}
        return {key: value.transpose(1, 0, 2) if config.option("layout") == 1 else value
                for key, value in state.items()}


class OnnxRuntimeEvaluation:
    runtime = "ONNX Runtime"
    distributions = ("onnx", "onnxruntime")
    requires = ("onnx", "onnxruntime")
    dtypes = ("float32",)  # ONNX Runtime's CPU RNN, LSTM and GRU kernels are registered for float only

    def __init__(self):
        super().__init__()
        self.ort = import_framework("onnxruntime", self.name)

    def evaluate(self, model, feeds, outputs):
        session = self.ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(outputs, feeds)


class OnnxReferenceEvaluation:
    runtime = "onnx.reference"
    distributions = ("onnx",)
    requires = ("onnx",)
    padded_known_issue = (
        "onnx.reference ignores sequence_lens (onnx/reference/ops/op_rnn.py, op_lstm.py, op_gru.py: "
        "'sequence_lens=None,  # noqa: ARG002'; onnx/onnx#7935: 'it's not supported anyway'): every element "
        "runs all T steps, Y is not zero on padded steps and Y_h is the state after step T "
        "(tests/equivalence/test_padded_onnx.py)")

    def __init__(self):
        super().__init__()
        self.reference = import_framework("onnx.reference", self.name)

    def evaluate(self, model, feeds, outputs):
        return self.reference.ReferenceEvaluator(model).run(outputs, feeds)


# --- the RNN operator, a layer ------------------------------------------------------


def _swap_directions(native: Native) -> Native:
    return {name: value[::-1].copy() for name, value in native.items()}


class OnnxRNN(OnnxOperator):
    cell = "ONNX RNN operator"
    family = "rnn"
    layer = True
    activations = ("tanh", "relu", "identity")  # identity: the Affine activation, worth its own check
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


class OnnxRuntimeRNN(OnnxRuntimeEvaluation, OnnxRNN):
    name = "onnx-ort"
    # Its CPU kernel refuses layout=1 ("Batchwise recurrent operations (layout == 1) are not
    # supported", rnn.h); tests/equivalence/test_limitations.py keeps that refusal checked.
    configs = tuple(c for c in OnnxRNN.configs if c.option("layout") == 0)


class OnnxReferenceRNN(OnnxReferenceEvaluation, OnnxRNN):
    name = "onnx-reference"
    # onnx/reference/ops/op_rnn.py implements only the Tanh and Affine activations.
    activations = ("tanh", "identity")


# --- the LSTM and GRU operators, cells ----------------------------------------------


class OnnxGated(OnnxOperator):
    """One forward ONNX LSTM or GRU node over the sequence: {"h": (T, batch, H)}, and for an
    LSTM the final c, {"c_last": (batch, H)} (the operator returns only Y_c). In a configuration
    that names a direction (padded and chunked runs), the node's own Y, Y_h and Y_c."""

    def arrange(self, result: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        if self.layerwise(config):
            return super().arrange(result, config)
        return states_with_last_c(result, self.family)

    def outputs(self, results: dict, config: LayerConfig) -> dict:
        if self.layerwise(config):
            return super().outputs(results, config)
        out = {"h": results["Y"][:, 0]}
        if self.family == "lstm":
            out["c_last"] = results["Y_c"][0]
        return out


def _gated_mutations(family: str) -> dict:
    G, back = len(ONNX_ORDER[family]), tuple(np.argsort(ONNX_ORDER[family]))
    return {
        "W and R left in PyTorch's gate order": lambda n: {
            **n, "W": reorder_gates(n["W"], back, axis=1), "R": reorder_gates(n["R"], back, axis=1)},
        "R transposed blockwise": lambda n: {**n, "R": np.concatenate(
            [b.transpose(0, 2, 1) for b in np.split(n["R"], G, axis=1)], axis=1)},
        "B dropped": scaled("B", 0.0),
    }


def _onnx_gated(evaluation, label: str, family: str, variant: str = "") -> type:
    suffix = "-reset-before" if variant == "reset_before" else ""
    qualname = f"Onnx_{label}_{family}{suffix}".replace("-", "_")
    return type(qualname, (evaluation, OnnxGated), {
        "name": f"onnx-{label}-{family}{suffix}", "cell": f"ONNX {family.upper()}", "family": family,
        "variant": variant, "mutations": _gated_mutations(family), "__module__": __name__, "__qualname__": qualname})


for _evaluation, _label in ((OnnxRuntimeEvaluation, "ort"), (OnnxReferenceEvaluation, "reference")):
    for _family, _variant in (("lstm", ""), ("gru", "reset_after"), ("gru", "reset_before")):
        _onnx_gated(_evaluation, _label, _family, _variant)  # registers itself (frameworks.base.REGISTRY)
