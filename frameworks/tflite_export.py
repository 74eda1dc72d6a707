"""TFLite: Keras 2 (``tf_keras``) and Keras 3 (tensorflow backend) ``SimpleRNN``, ``LSTM`` and ``GRU``
layers, stacked and bidirectional, converted by ``tf.lite.TFLiteConverter`` with TFLite's builtin ops
only, and run in LiteRT's interpreter (``ai_edge_litert``) with its default delegate (XNNPACK).

The weights are Keras's: the mapping is ``rnn_equivalence.frameworks.keras_mapping``'s layer mapping
(``KerasLayerMapping``), unchanged, in the functional model a user writes around the layers
(``rnn_equivalence.frameworks.keras_model``).

What a user calls, and what it takes (measured with TensorFlow 2.21, tests/equivalence/test_converters.py
holds each):

- The batch size is fixed in the model: with a free batch dimension the builtin-ops converter refuses
  every recurrent layer ("Lowering tensor list ops is failed"; the way out it proposes, Select TF ops,
  needs the Flex delegate, which ``ai_edge_litert``'s interpreter does not link). A test checks the refusal.
- Keras 3: ``TFLiteConverter.from_keras_model(model)``; every layer becomes a ``WHILE`` loop.
- Keras 2: ``TFLiteConverter.from_concrete_functions([model's call], holder)`` with the weights in a
  ``tf.Module`` (``holder``), which is what ``from_keras_model`` does, minus saving every function of
  the whole ``tf_keras`` object graph first (6 s a layer and direction here, against under 1 s); the same
  ops come out and compute the same outputs (a test compares the two paths). Keras 2's LSTM becomes
  TFLite's fused ``UNIDIRECTIONAL_SEQUENCE_LSTM`` kernel with its default activations (other activations,
  ``go_backwards`` or ``return_state``: a ``WHILE`` loop), its GRU and SimpleRNN a ``WHILE`` loop.

``recurrent_operators()`` lists the recurrent op types of the last converted model's main graph; the fused
op or ``WHILE`` each system declares (``fused``) is checked there. Padded batches: the Keras layers'
``Masking`` configuration (``rnn_equivalence.frameworks.keras_model``), a ``WHILE`` loop whatever the layer.
Chunked runs: the returned states fed back as the next call's initial states, a model per chunk length (the
sequence length is fixed in the converted model too). float32 only (the interpreter's kernels); no gradients
(no autodiff in the interpreter).
"""

from __future__ import annotations

import contextlib
import io

from rnn_equivalence.frameworks.base import LayerConfig, Native, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once
from rnn_equivalence.frameworks.keras_adapters import (
    GRU, GRU_BEFORE, KERAS_TF, LSTM, RNN, TF_KERAS, KerasLayer, system_attributes,
)
from rnn_equivalence.frameworks.keras_model import KerasModelExport, carried_state_configs, masking_configs
from rnn_equivalence.reference.params import GATED

FUSED_LSTM = "UNIDIRECTIONAL_SEQUENCE_LSTM"


class TfLiteConverted(KerasModelExport):
    """The Keras layers of ``KerasLayer``, in a functional model of the run's batch size, converted to a
    TFLite flatbuffer and run in LiteRT's interpreter."""

    dtypes = ("float32",)  # TFLite's float kernels
    converter = "tf.lite.TFLiteConverter"
    converter_distributions = ("flatbuffers",)  # TensorFlow's converter writes the flatbuffer with it

    def start(self):
        super().start()
        self.litert = import_framework("ai_edge_litert.interpreter", self.name)
        self.last_operators: set[str] = set()

    def describe(self) -> str:
        how = "from_keras_model" if self.module == "keras" else "from_concrete_functions"
        return f"TFLiteConverter.{how}({self.cell}) in LiteRT"

    fused = "WHILE"  # the op the layer becomes with its default activations: WHILE, or TFLite's fused kernel

    def expected_operator(self, config: LayerConfig, g: str) -> str:
        """The op the layers of ``config`` with activations ``g`` become: the declared one for the default
        activations; other activations, ``go_backwards``, ``return_state`` or a Masking layer in front, a
        WHILE loop (measured: tf_keras marks its LSTM's loop as fusable only then)."""
        fusable = g == GATED and not any(config.option(o) for o in ("go_backwards", "return_state", "mask"))
        return self.fused if fusable else "WHILE"

    def recurrent_operators(self) -> set[str]:
        """The recurrent op types of the last converted model's main graph: the fused kernel or WHILE."""
        return self.last_operators & {"WHILE", FUSED_LSTM, "UNIDIRECTIONAL_SEQUENCE_RNN",
                                      "BIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_RNN"}

    def tflite_converter(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None):
        """TFLite's converter of the model around the layers holding ``native``, builtin ops only, and the
        model's output names."""
        tf = self.tf
        model, specs, output_names = self.functional_model(native, xs, state, config, g, batch=batch)
        if self.module == "keras":
            converter = tf.lite.TFLiteConverter.from_keras_model(model)
        else:
            # The call traced once per model (its variables are read when the converter freezes them).
            traced = self.built_model(native, xs, state, config, g, batch).traced
            if "call" not in traced:
                traced["call"] = tf.function(lambda *tensors: model(list(tensors))).get_concrete_function(*specs)
            holder = tf.Module()
            holder.weights = list(model.weights)  # what from_keras_model saves, without the layers' functions
            converter = tf.lite.TFLiteConverter.from_concrete_functions([traced["call"]], holder)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        return converter, output_names

    # LiteRT's kernels: "AUTO", its default (the builtin kernels with the XNNPACK delegate); the others a test
    # runs too: "BUILTIN_WITHOUT_DEFAULT_DELEGATES" (the builtin kernels alone) and "BUILTIN_REF" (the reference ones).
    op_resolver = "AUTO"

    def run_flatbuffer(self, flatbuffer: bytes, feeds: dict, output_names: list[str],
                       signature_outputs: list[str] | None = None) -> dict:
        """Run a converted model in LiteRT's interpreter (``op_resolver``) by its signature's names:
        ``signature_outputs`` in the model's order (output_0, output_1, ... unless given)."""
        resolver = self.litert.OpResolverType[self.op_resolver]
        interpreter = self.litert.Interpreter(model_content=flatbuffer, experimental_op_resolver_type=resolver)
        self.last_operators = {op["op_name"] for op in interpreter._get_ops_details()}
        results = interpreter.get_signature_runner()(**feeds)
        signature_outputs = signature_outputs or [f"output_{i}" for i in range(len(output_names))]
        return {name: results[key] for name, key in zip(output_names, signature_outputs, strict=True)}

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        self.check_call(native, xs, state, config, g)
        batch = xs.shape[1]

        def convert() -> bytes:
            converter, _ = self.tflite_converter(native, xs, state, config, g, batch=batch)
            with contextlib.redirect_stdout(io.StringIO()):  # Keras 3's export prints its endpoints
                return converter.convert()

        flatbuffer = converted_once(self, self.conversion_key(native, xs, state, config, g, batch), convert,
                                    suffix=".tflite")
        return self.run_flatbuffer(flatbuffer, self.feeds(xs, state, config, padding), self.output_names(config))


# Every TFLite system: (name, the Keras it converts, the layer), each name written once.
TFLITE_SYSTEMS = (
    ("tflite-keras2-rnn", TF_KERAS, RNN), ("tflite-keras2-lstm-rnn", TF_KERAS, LSTM),
    ("tflite-keras2-gru-rnn", TF_KERAS, GRU), ("tflite-keras2-gru-reset-before-rnn", TF_KERAS, GRU_BEFORE),
    ("tflite-keras-tf-rnn", KERAS_TF, RNN), ("tflite-keras-tf-lstm-rnn", KERAS_TF, LSTM),
    ("tflite-keras-tf-gru-rnn", KERAS_TF, GRU), ("tflite-keras-tf-gru-reset-before-rnn", KERAS_TF, GRU_BEFORE),
)


def _tflite_system(name: str, implementation: tuple, member: tuple) -> type:
    family, variant = member
    keras2 = implementation == TF_KERAS
    source = name.replace("tflite-keras2", "tf-keras") if keras2 else name.replace("tflite-", "")
    attributes = system_attributes(source, KerasLayer, implementation, member)  # checks the name's layer
    attributes.update({
        "name": name, "__module__": __name__,
        "distributions": attributes["distributions"] + ("ai-edge-litert",),
        "requires": attributes["requires"] + ("ai_edge_litert",),
        "compare_with": source if family == "rnn" else None,
        "fused": FUSED_LSTM if (keras2 and family == "lstm") else "WHILE",
        "padded_configs": masking_configs(attributes["padded_configs"]),
        "chunked_configs": carried_state_configs(attributes["chunked_configs"]),
        "autodiff": "", "optimizers": {}, "compiles": False,  # no autodiff (the module's docstring)
    })
    return type(name.replace("-", "_"), (TfLiteConverted,), attributes)


for _row in TFLITE_SYSTEMS:
    _tflite_system(*_row)
