"""litert-torch (formerly ai-edge-torch): ``litert_torch.convert`` of ``torch.nn.LSTM``, ``nn.GRU`` and ``nn.RNN``
to a TFLite flatbuffer, run in LiteRT's interpreter (``ai_edge_litert``, its default delegate, XNNPACK).

The weights are PyTorch's: each system is the PyTorch layer system (``TorchLSTM``, ``TorchGRU``, ``TorchRNN``) with
its mapping (``TorchLayerMapping``) unchanged, the loaded layer wrapped as a user exports it
(``frameworks/torch_converted.py``: ``forward(x, h0[, c0])`` returning ``output, h_n[, c_n]``). litert-torch traces
the module with ``torch.export`` on the run's arguments, so the model is made for their shapes (batch and sequence
length fixed); its signature takes ``args_0`` (x), ``args_1`` (h0), ``args_2`` (c0) and returns ``output_0``,
``output_1``, ``output_2`` in the module's order.

What litert-torch 0.10.0 does with a recurrent layer (measured, tests/equivalence/test_litert_torch.py):

- it converts ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN``, stacked, bidirectional, batch first or not, with or without
  biases and initial states, and the LSTM's projection (``proj_size``);
- it never emits a recurrent op: no fused ``UNIDIRECTIONAL_SEQUENCE_LSTM`` / ``_RNN``, no ``BIDIRECTIONAL_SEQUENCE_*``,
  no ``WHILE`` loop. ``torch.export``'s decomposition unrolls every step of every layer and direction into
  ``FULLY_CONNECTED``, ``LOGISTIC``, ``TANH``, ``MUL``, ``ADD``, ``SLICE`` ops (litert-torch#53, reproduced): the model
  grows with the sequence length, and an LSTM's model holds 3 ``LOGISTIC`` and 2 ``TANH`` ops per step, layer and
  direction. ``recurrent_operators()`` lists the recurrent op types of the last converted model (none, declared by
  ``operators = frozenset()``), ``operator_counts`` every op type's count;
- the unrolled model computes PyTorch's layer within the float32 bound (the reference tests);
- litert-torch#808 ("failed to convert a LSTM module", an unbatched ``nn.LSTM(20, 100)`` on a (1, 20) input):
  refuted, it converts and is within the float32 bound, unbatched and batched.

Not taken: a packed sequence (``torch.export`` cannot trace ``pack_padded_sequence``'s data-dependent batch sizes:
``TypeError: zeros(): argument 'size' ... got FakeTensor``), so no padded batches. Chunked runs: each call's
h_n (c_n) fed as the next call's h0 (c0), a model per chunk length. float32 only (the interpreter's kernels);
no gradients. The unrolled conversion costs some 20 s per model here, growing with the steps: ``max_steps`` as the
dynamo exporter's (12).

litert-torch pins its own stack (ai-edge-litert, litert-converter, jax, transformers): its systems run in their own
environment, made by the nox session ``litert-torch`` (noxfile.py), and are left out of a run that does not name
them; their full-depth report is docs/environments/litert-torch/.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections import Counter

from rnn_equivalence.frameworks.base import LayerConfig, Native, distribution_version, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once
from rnn_equivalence.frameworks.pytorch import TorchGRU, TorchLayer, TorchLSTM, TorchRNN
from rnn_equivalence.frameworks.torch_converted import TorchConverted, output_keys

ENVIRONMENT = "litert-torch"  # the nox session whose environment holds litert-torch
# The TFLite op types that are a recurrence in one op: the fused kernels and the loop (frameworks/tflite_export.py's).
RECURRENT_OPS = frozenset({"WHILE", "UNIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN",
                           "BIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_RNN"})
# The elementwise nonlinearities one step of one layer and direction holds once unrolled (litert-torch#53):
# an LSTM's 3 sigmoid gates and 2 tanh (the cell gate, the output), a GRU's 2 sigmoid gates and 1 tanh, a vanilla
# cell's activation: tanh its own op; relu fused into the recurrent product's FULLY_CONNECTED (its fused activation,
# measured: no RELU op), so for relu the FULLY_CONNECTED ops are counted, at least one per step (the input
# projections may add more).
STEP_OPS = {"lstm": {"LOGISTIC": 3, "TANH": 2}, "gru": {"LOGISTIC": 2, "TANH": 1},
            "rnn": {"tanh": {"TANH": 1}, "relu": {"FULLY_CONNECTED": 1}}}
AT_LEAST = frozenset({"FULLY_CONNECTED"})  # counted ops that other parts of the model hold too


def step_ops(family: str, g: str) -> dict[str, int]:
    return STEP_OPS["rnn"][g] if family == "rnn" else STEP_OPS[family]


class LiteRTTorchConverted(TorchConverted):
    """The module ``TorchLayer.module`` builds, converted by ``litert_torch.convert`` and run in LiteRT."""

    environment = ENVIRONMENT
    converter = "litert_torch.convert"  # a converted system: the depth rules of rnn_equivalence.harness.depth
    converter_distributions = ("litert-converter",)
    distributions = ("litert-torch", "torch", "ai-edge-litert")
    requires = ("litert_torch", "torch", "ai_edge_litert")
    dtypes = ("float32",)  # LiteRT's float kernels
    autodiff, optimizers = "", {}
    padded_configs: tuple[LayerConfig, ...] = ()  # a packed sequence is refused (the module's docstring)
    chunked_configs = TorchLayer.chunked_configs
    max_steps = 12  # the unrolled conversion's cost grows with the steps (the module's docstring)
    operators: frozenset = frozenset()  # the recurrent ops a converted model holds: none, it is unrolled
    last_operator_counts: Counter = Counter()

    def start(self):
        super().start()
        with contextlib.redirect_stderr(io.StringIO()):  # torchao's notices of CUDA libraries it cannot load
            self.litert_torch = import_framework("litert_torch", self.name)
        self.litert = import_framework("ai_edge_litert.interpreter", self.name)

    def describe(self) -> str:
        return f"litert_torch.convert({self.cell}) {distribution_version('litert-torch')} in LiteRT"

    def recurrent_operators(self) -> set[str]:
        """The recurrent op types of the last converted model: a fused kernel or WHILE (none: it is unrolled)."""
        return set(self.last_operator_counts) & RECURRENT_OPS

    def convert(self, module, flat) -> bytes:
        """The TFLite flatbuffer ``litert_torch.convert`` makes of ``module`` called on ``flat`` (its progress
        log and the converters' warnings kept out)."""
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            level = logging.root.level
            try:
                model = self.litert_torch.convert(module, flat)
            finally:
                logging.root.setLevel(level)
            return bytes(model.model_content())

    op_resolver = "AUTO"  # LiteRT's default: the builtin kernels with the XNNPACK delegate

    def run_flatbuffer(self, flatbuffer: bytes, flat) -> list:
        """The model's outputs, in the module's order, and its op types counted (``last_operator_counts``)."""
        interpreter = self.litert.Interpreter(
            model_content=flatbuffer, experimental_op_resolver_type=self.litert.OpResolverType[self.op_resolver])
        self.last_operator_counts = Counter(op["op_name"] for op in interpreter._get_ops_details())
        results = interpreter.get_signature_runner()(**{f"args_{i}": a.numpy() for i, a in enumerate(flat)})
        return [results[f"output_{i}"] for i in range(len(results))]

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        if padding is not None:
            self.check_padding(padding, xs)  # no padded configurations: refused, naming why
        module, flat = self.flat_program(native, xs, state, config, g)
        flatbuffer = converted_once(self, self.structure(native, flat, config, g), lambda: self.convert(module, flat),
                                    suffix=".tflite")
        return dict(zip(output_keys(self.family), self.run_flatbuffer(flatbuffer, flat), strict=True))


def _litert_torch_system(name: str, torch_class: type) -> type:
    if name != "litert-" + (torch_class.name if torch_class.family == "rnn" else
                            torch_class.name.removesuffix("-rnn")):
        raise TypeError(f"litert-torch system {name!r}: its row describes {torch_class.name!r}")
    qualname = name.replace("-", "_")
    return type(qualname, (LiteRTTorchConverted, torch_class), {
        "name": name, "cell": torch_class.cell, "__module__": __name__, "__qualname__": qualname,
    })


# The litert-torch systems: the PyTorch layer each converts, by its literal name (each registers itself).
for _row in (("litert-torch-lstm", TorchLSTM), ("litert-torch-gru", TorchGRU), ("litert-torch-rnn", TorchRNN)):
    _litert_torch_system(*_row)
