"""``tf2onnx.convert.from_keras`` of Keras 2 (``tf_keras``) ``SimpleRNN``, ``LSTM`` and ``GRU`` layers,
stacked and bidirectional, run in ONNX Runtime.

The weights are Keras's: the mapping is ``rnn_equivalence.frameworks.keras_mapping``'s layer mapping
(``KerasLayerMapping``), unchanged, named ``layer{k}.{forward,backward}.kernel`` and so on. What is checked is that
the converted model computes what the Keras layers and the reference compute. The model converted is the
functional ``tf_keras.Model`` a user writes around the layers (``rnn_equivalence.frameworks.keras_model``),
with any batch size.

tf2onnx turns a Keras recurrent layer into one ONNX ``RNN``, ``LSTM`` or ``GRU`` node where it
recognises the layer's loop (its rewriters), else into a ``Loop``: ``recurrent_operators()`` lists the node types of
the last conversion, and tests/equivalence/test_converters.py records which. tf2onnx 1.17 cannot convert
a Keras 3 model (it reads Keras 2's internals): that refusal is a test there too. ``from_function`` on the
model wrapped in a ``tf.function`` (how some users call it) gives the same nodes and outputs: a test there.

Padded batches: the Keras layers' ``Masking`` configuration (``rnn_equivalence.frameworks.keras_model``);
with the mask in the graph tf2onnx converts every layer into a ``Loop``, the LSTM too (measured, a test
holds it). Chunked runs: the returned states fed back as the next call's initial states
(``rnn_equivalence.frameworks.keras_model``). float64 where the layer becomes a ``Loop`` (the SimpleRNN and
the reset-before GRU: elementwise ops and matrix products, which ONNX Runtime runs in double); float32 only
where it becomes a fused node, whose CPU kernels refuse double (a test). No gradients (an ONNX graph run in
ONNX Runtime has no autodiff here).
"""

from __future__ import annotations

from rnn_equivalence.frameworks.base import LayerConfig, Native, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once
from rnn_equivalence.frameworks.keras_adapters import TF_KERAS, KerasLayer, system_attributes
from rnn_equivalence.frameworks.keras_model import KerasModelExport, carried_state_configs, masking_configs
from rnn_equivalence.reference.params import GATED

OPSET = 17  # tf2onnx 1.17's default opset is 15; 17 is within ONNX Runtime's and tf2onnx's ranges


class Tf2OnnxConverted(KerasModelExport):
    """The Keras 2 layers of ``KerasLayer``, in a functional model converted by tf2onnx and run in
    ONNX Runtime."""

    # ONNX Runtime's CPU RNN, LSTM and GRU kernels are float32 only ("does not support double yet": a test). A
    # Loop of elementwise ops and matrix products runs float64: the systems that never fuse declare it
    # (``_tf2onnx_system``).
    dtypes = ("float32",)
    converter = "tf2onnx.convert.from_keras"
    converter_distributions = ("onnx", "protobuf")  # tf2onnx builds the ModelProto with them

    def start(self):
        super().start()
        self.tf2onnx = import_framework("tf2onnx", self.name)
        self.ort = import_framework("onnxruntime", self.name)
        self.onnx = import_framework("onnx", self.name)
        self.last_model = None  # the ONNX model of the last run (a ModelProto)

    def describe(self) -> str:
        return f"tf2onnx.convert.from_keras({self.cell}) in ONNX Runtime"

    fused: dict[str, str] = {}  # activation spec ("*": every one) -> the fused ONNX node; else a Loop

    def recurrent_operators(self) -> set[str]:
        """The recurrent node types of the last converted model: RNN, LSTM, GRU, or Loop (or Scan)."""
        return {node.op_type for node in self.last_model.graph.node} & {"RNN", "LSTM", "GRU", "Loop", "Scan"}

    def expected_operator(self, config: LayerConfig, g: str) -> str:
        """The node the layers of ``config`` with activations ``g`` become: the declared fused node, unless
        the model computes a mask (a Masking layer or a mask_zero Embedding in front): then a Loop, the mask
        in it (measured with tf2onnx 1.17)."""
        if config.option("mask"):
            return "Loop"
        return self.fused.get(g, self.fused.get("*", "Loop"))

    def convert(self, native: Native, xs, state, config: LayerConfig, g: str) -> bytes:
        """The serialized ONNX model tf2onnx converts of the functional model around the layers holding
        ``native`` (any batch size), once per model (``rnn_equivalence.frameworks.conversion_cache``)."""
        def convert() -> bytes:
            model, specs, _ = self.functional_model(native, xs, state, config, g)
            proto, _ = self.tf2onnx.convert.from_keras(model, input_signature=specs, opset=OPSET)
            return proto.SerializeToString()

        self.check_call(native, xs, state, config, g)
        data = converted_once(self, self.conversion_key(native, xs, state, config, g, None), convert)
        self.last_model = self.onnx.load_from_string(data)
        return data

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        data = self.convert(native, xs, state, config, g)
        feeds = self.feeds(xs, state, config, padding)
        session = self.ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        results = session.run(None, {name: feeds[name] for name in self.input_names(state, config)})
        return dict(zip(self.output_names(config), results, strict=True))


# What tf2onnx 1.17 makes of each layer (measured, tests/equivalence/test_converters.py checks it on every
# activation the system has): one fused node for an LSTM whatever its activations; for a reset-after GRU
# with the default activations; a Loop (the layer's while loop, converted op by op) otherwise.
FUSED = {("rnn", ""): {}, ("lstm", ""): {"*": "LSTM"}, ("gru", "reset_after"): {GATED: "GRU"},
         ("gru", "reset_before"): {}}

TF2ONNX_SYSTEMS = (("tf2onnx-keras2-rnn", ("rnn", "")), ("tf2onnx-keras2-lstm-rnn", ("lstm", "")),
                   ("tf2onnx-keras2-gru-rnn", ("gru", "reset_after")),
                   ("tf2onnx-keras2-gru-reset-before-rnn", ("gru", "reset_before")))


def _tf2onnx_system(name: str, member: tuple) -> type:
    family, variant = member
    source = name.replace("tf2onnx-keras2", "tf-keras")  # the Keras 2 layer it is converted from
    said = "tf2onnx-keras2" + ("" if family == "rnn" else f"-{family}") + (
        "-reset-before" if variant == "reset_before" else "") + "-rnn"
    if name != said:
        raise TypeError(f"tf2onnx system {name!r}: its row describes {said!r}")
    attributes = system_attributes(source, KerasLayer, TF_KERAS, member)
    attributes.update({
        "name": name, "__module__": __name__,
        "distributions": ("tf2onnx", "tf_keras", "tensorflow", "onnxruntime"),
        "requires": ("tf2onnx", "tf_keras", "onnxruntime"),
        "compare_with": source if family == "rnn" else None,
        "fused": FUSED[member],
        # never fused (a Loop whatever the activations): float64 too, as the Keras layer computes it
        "dtypes": ("float32",) if FUSED[member] else ("float32", "float64"),
        "padded_configs": masking_configs(attributes["padded_configs"]),
        "chunked_configs": carried_state_configs(attributes["chunked_configs"]),
        "autodiff": "", "optimizers": {}, "compiles": False,  # no autodiff (the module's docstring)
    })
    return type(name.replace("-", "_"), (Tf2OnnxConverted,), attributes)


for _row in TF2ONNX_SYSTEMS:
    _tf2onnx_system(*_row)
