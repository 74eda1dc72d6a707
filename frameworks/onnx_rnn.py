"""The ONNX ``RNN``, ``LSTM`` and ``GRU`` operators, built with ``onnx.helper`` as a graph of one
node and run by three implementations: ONNX Runtime, the ``onnx.reference`` evaluator, and OpenVINO
(its ONNX frontend and CPU plugin, float32 forced; what it drops and refuses: ``OPENVINO_LSTM_DROPS``
and tests/equivalence/test_openvino.py).

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

Options (rnn_equivalence.reference.params), mapped here both ways:

    canonical: peepholes (3H,) gates i, f, o     ONNX: P[d] (3H,) = [Pi, Po, Pf] (the spec's "P[iof]":
               (i, f read c_{t-1}, o reads c_t)        i, o, f, like W's gates), P (D, 3H), an input
    gate_clip (float)                            ONNX: the attribute ``clip``, one for all directions
    coupled_gates (bool)                         ONNX: the attribute ``input_forget=1`` (f = 1 - i)
    activation "f,g,h" (LSTM) / "f,g" (GRU) / g  ONNX: ``activations``, the same order, one list per
                                                 direction (``ONNX_ACTIVATION``)

``clip`` and ``input_forget`` are settings, not weights, but part of what a user ports: they travel
in the native dict as 0-d arrays in the weights' dtype, under ONNX's names. The spec applies ``clip``
"to the input of activations", h's included (the canonical gate_clip); ONNX Runtime's LSTM does not
clip c before h (microsoft/onnxruntime#27224), so it is compared without ``clip`` (its RNN and GRU
with it). ``onnx.reference`` ignores ``clip`` and ``input_forget`` (strict expected failures) and an
LSTM's or GRU's ``activations`` (its systems have the default ones only).
tests/equivalence/test_options_onnx.py measures what each computes instead.

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

Three roles, kept apart as for PyTorch and Keras: the mapping (``OnnxMapping``, NumPy only: what
``convert.mapping`` returns for every ONNX system), the runners (``OnnxNodeRunner``, ``OnnxGatedRunner``: the
node's model and outputs; the evaluations ``OnnxRuntimeEvaluation``, ``OpenVinoEvaluation`` and
``OnnxReferenceEvaluation``: running it), and the systems, each an evaluation, a node runner and the mapping,
with its test plan, on the base that declares its runtime (``OnnxRuntimeSystem``, ...).
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import (
    CELL, Adapter, LayerConfig, Mapping, Native, NativeSpec, gates_text, import_framework, reorder_gates, scaled,
    states_with_last_c,
)
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.params import GATED, activation_names
from rnn_equivalence.reference.stack import StackParams


# --- the mapping, NumPy only: one node, its directions stacked ----------------------

ONNX_ORDER = {"rnn": (0,), "lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}  # ONNX's gates as canonical indices
PEEPHOLE_ORDER = (0, 2, 1)  # ONNX's P blocks i, o, f as canonical indices (canonical i, f, o)
# Canonical option -> the native name that holds it (P an input, the others attributes).
ONNX_OPTIONS = {"peepholes": "P", "gate_clip": "clip", "coupled_gates": "input_forget"}


class OnnxMapping(Mapping):
    """The mapping above: the inputs ``W``, ``R``, ``B`` (and ``P``) of one ``RNN``/``LSTM``/``GRU`` node, one
    layer, its directions stacked on axis 0, and its attributes ``clip`` and ``input_forget`` as 0-d arrays."""

    kept_hidden_biases = ("h", "i", "f", "g", "o", "r", "z", "n")  # every gate: B = [Wb, Rb]
    state_names = {"h": "initial_h", "c": "initial_c"}

    def recurrent_kernel(self, config: LayerConfig) -> str:
        return "R"

    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int, options: tuple[str, ...] = (),
                    output_size: int | None = None) -> NativeSpec:
        D, G, I, H = config.num_directions, len(ONNX_ORDER[self.family]), input_size, hidden_size
        GH = gates_text(self.family, "hidden_size")
        spec = {"W": ((D, G * H, I), f"(num_directions, {GH}, input_size)"),
                "R": ((D, G * H, H), f"(num_directions, {GH}, hidden_size)")}
        if config.bias:
            spec["B"] = ((D, 2 * G * H), f"(num_directions, {2 * G}*hidden_size)")
        if "peepholes" in options:
            spec["P"] = ((D, 3 * H), "(num_directions, 3*hidden_size)")
        for option in ("gate_clip", "coupled_gates"):  # attributes: one value for the node
            if option in options:
                spec[ONNX_OPTIONS[option]] = ((), "()")
        return spec

    def read_options(self, native: Native, config: LayerConfig) -> tuple[tuple[str, ...], None]:
        return tuple(option for option, name in ONNX_OPTIONS.items() if name in native), None

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
        first = cells[0]  # the thresholds and the coupling are every direction's (StackParams checks)
        if first.peepholes is not None:
            native["P"] = np.stack([reorder_gates(p.peepholes, PEEPHOLE_ORDER) for p in cells])
        if first.gate_clip is not None:
            native["clip"] = np.asarray(first.gate_clip, first.dtype)
        if first.coupled_gates:
            native["input_forget"] = np.asarray(1, first.dtype)
        return native

    def from_native(self, native: Native, config: LayerConfig = CELL) -> StackParams:
        back = np.argsort(ONNX_ORDER[self.family])
        W, R, B = np.asarray(native["W"]), np.asarray(native["R"]), native.get("B")
        options = {"gate_clip": float(native["clip"]) if "clip" in native else None,
                   "coupled_gates": bool(native["input_forget"]) if "input_forget" in native else False}
        cells = []
        for d in range(W.shape[0]):
            b_x, b_h = (None, None) if B is None else np.split(np.asarray(B)[d], 2)
            peepholes = reorder_gates(np.asarray(native["P"])[d], np.argsort(PEEPHOLE_ORDER)) if "P" in native else None
            cells.append(self.params(reorder_gates(W[d], back), reorder_gates(R[d], back),
                                     None if B is None else reorder_gates(b_x, back),
                                     None if B is None else reorder_gates(b_h, back)
                                     ).replace(peepholes=peepholes, **options))
        return StackParams([cells])


# --- the runners: the node's model, and the runtimes that evaluate it ---------------

# Canonical activation names (rnn_equivalence.reference.activations) -> ONNX's name, with its (alpha, beta) where it
# takes them: identity is the spec's Affine(x) = alpha x + beta with alpha 1, beta 0; the two hard
# sigmoids are HardSigmoid(x) = clip(alpha x + beta, 0, 1), alpha 0.2 (its default) or 1/6, beta 0.5.
# The attributes are float32: 0.2 and 1/6 round, which the error model's hard sigmoid allows
# (reference/tolerance.py). The spec consumes activation_alpha and activation_beta in the order of the
# activations, skipping those that take none (ONNX Runtime does; onnx.reference's RNN indexes them
# by direction, the same lists here, since each direction has one activation that takes both).
ONNX_ACTIVATION = {"tanh": ("Tanh",), "relu": ("Relu",), "sigmoid": ("Sigmoid",), "identity": ("Affine", 1.0, 0.0),
                   "hard_sigmoid_0.2": ("HardSigmoid", 0.2, 0.5),
                   "hard_sigmoid_relu6": ("HardSigmoid", 1.0 / 6.0, 0.5)}
OPSET = 22
IR_VERSION = 10  # what opset 22 needs; ONNX Runtime 1.31 reads at most IR 13


def onnx_activations(family: str, g: str, directions: int, order=None) -> dict:
    """The node's ``activations`` (and ``activation_alpha``, ``activation_beta`` where one takes them)
    for the canonical spec ``g``: a vanilla cell's name, or a gated cell's "default" / "f,g,h" / "f,g",
    the order ONNX lists them in, repeated per direction. ``order``: a permutation of that list (the
    mutation "activations in the wrong order")."""
    names = activation_names(family, g)
    entries = [ONNX_ACTIVATION[name] for name in (names if order is None else [names[k] for k in order])]
    attributes = {"activations": [entry[0] for entry in entries] * directions}
    if any(len(entry) > 1 for entry in entries):
        attributes["activation_alpha"] = [entry[1] for entry in entries if len(entry) > 1] * directions
        attributes["activation_beta"] = [entry[2] for entry in entries if len(entry) > 1] * directions
    return attributes


class OnnxNodeRunner:
    """Running an ONNX system (the ``Runner`` methods), with the checks of ``Adapter`` it is mixed with: the
    model of one node, its weights as initializers, evaluated by the system's runtime (``evaluate``, an
    evaluation class below), its outputs as the node returns them."""

    runtime: str  # the evaluation's name of the runtime

    def start(self):
        self.onnx = import_framework("onnx", self.name)
        self.helper = import_framework("onnx.helper", self.name)

    def describe(self) -> str:
        extra = f", linear_before_reset={self.linear_before_reset}" if self.family == "gru" else ""
        return f"ONNX {self.family.upper()} operator (opset {OPSET}{extra}) in {self.runtime}"

    @property
    def linear_before_reset(self) -> int:
        return 1 if self.variant == "reset_after" else 0

    def layerwise(self, config: LayerConfig) -> bool:
        """True where the outputs are the node's own (Y, Y_h, Y_c): the RNN layer, and a gated
        operator in a configuration that names a direction."""
        return self.layer or config.option("direction") is not None

    @classmethod
    def reads_reversed(cls, config: LayerConfig) -> bool:
        return config.option("direction") == "reverse"

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
                  *(name if name in feeds else "" for name in ("sequence_lens", "initial_h", "initial_c")),
                  "P" if "P" in native else ""]
        while inputs[-1] == "":
            inputs.pop()
        outputs = ["Y", "Y_h"] + (["Y_c"] if self.family == "lstm" else [])  # Y_c: the final c
        attributes = {"hidden_size": H, "direction": self.direction(config), "layout": layout,
                      **onnx_activations(self.family, g, D, getattr(native, "order", None))}
        if "clip" in native:
            attributes["clip"] = float(native["clip"])
        if "input_forget" in native:
            attributes["input_forget"] = int(native["input_forget"])
        if self.family == "gru":
            attributes["linear_before_reset"] = self.linear_before_reset
        node = helper.make_node(self.family.upper(), inputs, outputs, **attributes)
        Y_shape, state_shape = ((T, D, batch, H), (D, batch, H)) if layout == 0 else ((batch, T, D, H), (batch, D, H))
        graph = helper.make_graph(
            [node], self.family,
            [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
             for name, value in feeds.items()],
            [helper.make_tensor_value_info(name, elem, Y_shape if name == "Y" else state_shape) for name in outputs],
            [onnx.numpy_helper.from_array(np.ascontiguousarray(native[n]), n)
             for n in ("W", "R", "B", "P") if n in native])
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


class OnnxGatedRunner(OnnxNodeRunner):
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


# The evaluations: each runs the node's model in one runtime (its start, after the node runner's, imports it).
class OnnxRuntimeEvaluation:
    runtime = "ONNX Runtime"

    def start(self):
        super().start()
        self.ort = import_framework("onnxruntime", self.name)

    def evaluate(self, model, feeds, outputs):
        session = self.ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(outputs, feeds)


class OnnxReferenceEvaluation:
    runtime = "onnx.reference"

    def start(self):
        super().start()
        self.reference = import_framework("onnx.reference", self.name)

    def evaluate(self, model, feeds, outputs):
        return self.reference.ReferenceEvaluator(model).run(outputs, feeds)


class OpenVinoEvaluation:
    """OpenVINO on the CPU, the model read from the ONNX bytes (``Core.read_model``), compiled with
    float32 inference forced (``INFERENCE_PRECISION_HINT: f32``): the equivalence check. OpenVINO's
    CPU plugin may compute in bf16 or f16 by default where the processor has them (AMX, AVX512-FP16);
    ``default_precision`` says what the default is on this machine, and
    tests/equivalence/test_openvino.py compares the default run with the forced one."""

    runtime = "OpenVINO"
    precision_hint = "f32"  # what the systems run with: OpenVinoSystem.runs_with says so

    def start(self):
        super().start()
        self.openvino = import_framework("openvino", self.name)
        self.core = self.openvino.Core()

    def describe(self) -> str:
        return f"{super().describe()} (CPU, INFERENCE_PRECISION_HINT={self.precision_hint})"

    def default_precision(self) -> str:
        """The CPU plugin's default inference precision on this machine (e.g. "f32", "bf16")."""
        return self.core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()

    def compile(self, model, hint: str | None):
        settings = {} if hint is None else {"INFERENCE_PRECISION_HINT": hint}
        return self.core.compile_model(self.core.read_model(model.SerializeToString(), b""), "CPU", settings)

    def evaluate(self, model, feeds, outputs):
        """The node's outputs at ``precision_hint`` (None: OpenVINO's default settings)."""
        compiled = self.compile(model, self.precision_hint)
        results = compiled(feeds)
        return [results[compiled.output(name)] for name in outputs]


# --- the systems: each an evaluation, a node runner, the mapping and its test plan ---


class OnnxOperator(Adapter):
    """An ONNX system: the padded and chunked runs of every one's plan."""

    # Padded batches: sequence_lens, post-padding only (the operator reads each element's first
    # steps), one and two directions, from a given initial state. The reverse direction is checked in
    # tests/equivalence/test_padded_onnx.py: a system that reads reversed is compared on a reversed
    # batch, whose padding is then in front. Chunked: no initial state in the first call.
    padded_configs = (LayerConfig(1, False, options=(("direction", "forward"),)),
                      LayerConfig(1, True, options=(("direction", "bidirectional"),)))
    chunked_configs = (LayerConfig(1, False, initial_state=False, options=(("direction", "forward"),)),)
    lengths_name = "sequence_lens"


class OnnxRuntimeSystem(OnnxOperator):
    """A system run by ONNX Runtime (``OnnxRuntimeEvaluation``)."""

    distributions = ("onnx", "onnxruntime")
    requires = ("onnx", "onnxruntime")
    dtypes = ("float32",)  # ONNX Runtime's CPU RNN, LSTM and GRU kernels are registered for float only


class OnnxReferenceSystem(OnnxOperator):
    """A system run by the ``onnx.reference`` evaluator (``OnnxReferenceEvaluation``)."""

    distributions = ("onnx",)
    requires = ("onnx",)
    # It ignores sequence_lens, and accepts clip, input_forget and the gated cells' activations and computes
    # without them (onnx 1.23.2, onnx/reference/ops/op_rnn.py, op_lstm.py, op_gru.py: "clip=None,  # noqa:
    # ARG002", ...; its gated f, g, h are fixed methods: sigmoid, tanh, tanh, which is why its gated systems
    # have the default activations only): rows of rnn_equivalence.harness.known_issues, measured in
    # tests/equivalence/test_padded_onnx.py and test_options_onnx.py.


class OpenVinoSystem(OnnxOperator):
    """A system run by OpenVINO (``OpenVinoEvaluation``), float32 forced."""

    distributions = ("onnx", "openvino")
    requires = ("onnx", "openvino")
    dtypes = ("float32",)  # OpenVINO's CPU plugin computes in float32 at most (an f64 model is converted)
    runs_with = ("OpenVINO compiles the model with INFERENCE_PRECISION_HINT=f32: at its default, on a CPU with bf16 "
                 "or f16 arithmetic, it computes in that precision (a proved difference where measured)")


# --- the RNN operator, a layer ------------------------------------------------------


def _swap_directions(native: Native) -> Native:
    return {name: value[::-1].copy() for name, value in native.items()}


class OnnxRNN(OnnxNodeRunner, OnnxMapping, OnnxOperator):
    """The RNN operator's plan; each system below adds its evaluation and its runtime's declarations."""

    cell = "ONNX RNN operator"
    family = "rnn"
    layer = True
    # identity: the Affine activation, worth its own check; the hard sigmoids: HardSigmoid, both alphas.
    activations = ("tanh", "relu", "identity", "hard_sigmoid_0.2", "hard_sigmoid_relu6")
    options = ("", "gate_clip")
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


class OnnxRuntimeRNN(OnnxRuntimeEvaluation, OnnxRNN, OnnxRuntimeSystem):
    name = "onnx-ort"
    # Its CPU kernel refuses layout=1 ("Batchwise recurrent operations (layout == 1) are not
    # supported", rnn.h); tests/equivalence/test_limitations.py keeps that refusal checked.
    configs = tuple(c for c in OnnxRNN.configs if c.option("layout") == 0)


class OpenVinoRNN(OpenVinoEvaluation, OnnxRNN, OpenVinoSystem):
    name = "onnx-openvino"
    # Affine and HardSigmoid are refused (its RNN cell takes tanh, sigmoid and relu); layout=1 is read as
    # layout=0, silently (openvinotoolkit/openvino#37820): tests/equivalence/test_openvino.py keeps both checked.
    activations = ("tanh", "relu")
    configs = tuple(c for c in OnnxRNN.configs if c.option("layout") == 0)


class OnnxReferenceRNN(OnnxReferenceEvaluation, OnnxRNN, OnnxReferenceSystem):
    name = "onnx-reference"
    # onnx/reference/ops/op_rnn.py implements only the Tanh and Affine activations (HardSigmoid
    # refused too: tests/equivalence/test_options_onnx.py).
    activations = ("tanh", "identity")


# --- the LSTM and GRU operators, cells ----------------------------------------------


class OnnxGated(OnnxGatedRunner, OnnxMapping, OnnxOperator):
    """The LSTM and GRU operators' systems: each row below adds its evaluation, its runtime's declarations and
    its plan (``_onnx_gated``)."""


class ActivationsReordered(dict):
    """Native weights whose node lists its activations in another order (``order``): the mutation
    "activations in the wrong order", carried with the weights since ONNX keeps the list on the node."""

    def __init__(self, native, order):
        super().__init__(native)
        self.order = order


def _gated_mutations(family: str, honours_activations: bool, peepholes: bool) -> dict:
    G, back = len(ONNX_ORDER[family]), tuple(np.argsort(ONNX_ORDER[family]))
    mutations = {
        "W and R left in PyTorch's gate order": lambda n: {
            **n, "W": reorder_gates(n["W"], back, axis=1), "R": reorder_gates(n["R"], back, axis=1)},
        "R transposed blockwise": lambda n: {**n, "R": np.concatenate(
            [b.transpose(0, 2, 1) for b in np.split(n["R"], G, axis=1)], axis=1)},
        "B dropped": scaled("B", 0.0),
    }
    if peepholes:  # the mutation case has peepholes (mutation_options)
        # P written in the canonical order i, f, o instead of ONNX's i, o, f: Po and Pf swapped.
        mutations["P left in the canonical order i, f, o"] = lambda n: {
            **n, "P": reorder_gates(n["P"], PEEPHOLE_ORDER, axis=1)}
    if honours_activations:  # onnx.reference ignores the list, so no order of it can be caught there
        # Keras's order, (activation, recurrent_activation) = (g, f): on the default activations
        # sigmoid and tanh trade places (g and h are both tanh, so their swap is the same function).
        keras_order = (1, 0, 2) if family == "lstm" else (1, 0)
        mutations["activations in Keras's order (g, f)"] = lambda n: ActivationsReordered(n, keras_order)
    return mutations


# The activation specs (rnn_equivalence.reference.params) of the gated cells: "sigmoid,tanh,relu" tells g from h.
GATED_ACTIVATIONS = {
    "lstm": (GATED, "hard_sigmoid_0.2,tanh,tanh", "hard_sigmoid_relu6,tanh,tanh", "sigmoid,relu,relu",
             "sigmoid,tanh,relu"),
    "gru": (GATED, "hard_sigmoid_0.2,tanh", "hard_sigmoid_relu6,tanh", "sigmoid,relu"),
}
GATED_OPTIONS = {"lstm": ("", "peepholes", "gate_clip", "coupled_gates", "peepholes+gate_clip"),
                 "gru": ("", "gate_clip")}
# ONNX Runtime's LSTM does not clip c' on its way into h(c'), which the spec's clip ("applied to the
# input of activations") and the canonical gate_clip do: microsoft/onnxruntime#27224 (closed as stale),
# fix proposed in microsoft/onnxruntime#27239. Not a known issue of the clip sets but no clip sets at
# all: the difference shows only where |c'| passes the threshold, which c' = f c + i g reaches only
# after some steps (never in one step from c = 0, never with coupled gates and g in [-clip, clip]), so a
# strict expected failure would pass on the designs' short cases. tests/equivalence/test_options_onnx.py
# measures what it computes, and runs the spec's comparison as a strict expected failure.
ORT_LSTM_OPTIONS = ("", "peepholes", "coupled_gates")
ORT_LSTM_CLIP = ("ONNX Runtime's LSTM clips the arguments of f and g but not c' on its way into h(c'), as the "
                 "spec's clip ('applied to the input of activations') does: microsoft/onnxruntime#27224, fix "
                 "proposed in microsoft/onnxruntime#27239 (measured: tests/equivalence/test_options_onnx.py)")

# OpenVINO (2026.4, its ONNX frontend, measured in tests/equivalence/test_openvino.py): the hard sigmoids are
# refused (its cells take sigmoid, tanh and relu only), and an LSTM node's P and input_forget are read and
# dropped, without an error: the node computes the LSTM without peepholes, or with f computed, not 1 - i;
# its clip is ONNX Runtime's (c' unclipped into h). So its LSTM is compared without options, each refused
# with the reason; its RNN and GRU clip every activation's argument, the canonical gate_clip.
OPENVINO_ACTIVATIONS = {"lstm": (GATED, "sigmoid,relu,relu", "sigmoid,tanh,relu"), "gru": (GATED, "sigmoid,relu")}
OPENVINO_LSTM_DROPS = {
    "peepholes": "OpenVINO's ONNX frontend reads P and drops it: the node computes the LSTM without peepholes "
                 "(measured: tests/equivalence/test_openvino.py)",
    "coupled_gates": "OpenVINO's ONNX frontend reads input_forget=1 and drops it: the node computes f from its own "
                     "weights, not 1 - i (measured: tests/equivalence/test_openvino.py)",
    "gate_clip": "OpenVINO's LSTM clips the arguments of f and g but not c' on its way into h(c'), as ONNX "
                 "Runtime's does (measured: tests/equivalence/test_openvino.py)",
}

# Each evaluation's label in its systems' names, and the base declaring its runtime (distributions, dtypes).
RUNTIMES = {OnnxRuntimeEvaluation: ("ort", OnnxRuntimeSystem), OpenVinoEvaluation: ("openvino", OpenVinoSystem),
            OnnxReferenceEvaluation: ("reference", OnnxReferenceSystem)}


def _onnx_gated(name: str, evaluation, family: str, variant: str = "") -> type:
    label, declared = RUNTIMES[evaluation]
    openvino = evaluation is OpenVinoEvaluation
    suffix = "-reset-before" if variant == "reset_before" else ""
    if name != f"onnx-{label}-{family}{suffix}":  # a typo in the table cannot register a misnamed system
        raise TypeError(f"ONNX system {name!r}: its row describes {f'onnx-{label}-{family}{suffix}'!r}")
    qualname = f"Onnx_{label}_{family}{suffix}".replace("-", "_")
    reference, ort = evaluation is OnnxReferenceEvaluation, evaluation is OnnxRuntimeEvaluation
    options = (("",) if family == "lstm" and openvino else ORT_LSTM_OPTIONS if family == "lstm" and ort
               else GATED_OPTIONS[family])
    refused = (OPENVINO_LSTM_DROPS if family == "lstm" and openvino
               else {"gate_clip": ORT_LSTM_CLIP} if family == "lstm" and ort else {})
    return type(qualname, (evaluation, OnnxGated, declared), {
        "name": name, "cell": f"ONNX {family.upper()}", "family": family,
        "variant": variant, "options": options, "mutation_options": "peepholes" if "peepholes" in options else "",
        "refused_options": refused,
        # onnx.reference computes the default activations whatever the node lists: it is compared on them
        # alone (as known issues, the others would take the covering design's rows from the default).
        "activations": ((GATED,) if reference else OPENVINO_ACTIVATIONS[family] if openvino
                        else GATED_ACTIVATIONS[family]),
        "mutations": _gated_mutations(family, honours_activations=not reference, peepholes="peepholes" in options),
        "__module__": __name__, "__qualname__": qualname})


# The ONNX LSTM and GRU systems, one row each, by their literal names (each registers itself).
for _row in (("onnx-ort-lstm", OnnxRuntimeEvaluation, "lstm"),
             ("onnx-ort-gru", OnnxRuntimeEvaluation, "gru", "reset_after"),
             ("onnx-ort-gru-reset-before", OnnxRuntimeEvaluation, "gru", "reset_before"),
             ("onnx-openvino-lstm", OpenVinoEvaluation, "lstm"),
             ("onnx-openvino-gru", OpenVinoEvaluation, "gru", "reset_after"),
             ("onnx-openvino-gru-reset-before", OpenVinoEvaluation, "gru", "reset_before"),
             ("onnx-reference-lstm", OnnxReferenceEvaluation, "lstm"),
             ("onnx-reference-gru", OnnxReferenceEvaluation, "gru", "reset_after"),
             ("onnx-reference-gru-reset-before", OnnxReferenceEvaluation, "gru", "reset_before")):
    _onnx_gated(*_row)
