"""nobuco: ``nobuco.pytorch_to_keras`` of ``torch.nn.LSTM`` and ``torch.nn.GRU``, the Keras model it writes run
in Keras (Keras 2, TensorFlow 2.15's).

The weights are PyTorch's: the mapping is ``rnn_equivalence.frameworks.pytorch``'s layer mapping
(``TorchLayer``), unchanged. nobuco converts the loaded module by tracing one call with the run's arguments,
and writes a functional Keras model with one input per tensor argument (``x``, then ``h0``, then ``c0``) and
one output per tensor returned (``output``, ``h_n``, ``c_n``); ``ChannelOrder.PYTORCH`` on both sides keeps
PyTorch's layouts, ``batch_first`` included. What is checked is that the Keras model computes what PyTorch
and the reference compute: nobuco transposes the kernels, sums an LSTM's two biases and reorders a GRU's
gates (r, z, n to Keras's z, r, h, its two biases stacked in Keras's two rows), all inside the tool.

nobuco imports Keras 2 as ``keras`` (TensorFlow 2.15, NumPy < 2) and imports torchvision: it cannot live in
the suite's main environment. Its systems run in their own, made by the nox session ``nobuco`` (noxfile.py),
and are left out of a run that does not name them (``elsewhere``); their full-depth report, with their
versions, is committed beside the main one: docs/environments/nobuco/.

What nobuco 0.17.0 converts (measured, tests/equivalence/test_nobuco.py): ``nn.LSTM`` and ``nn.GRU``,
stacked, bidirectional, batch first or not, with or without biases and initial states. Refused loudly:
``nn.RNN`` and the cells (no converter), a packed sequence (``pack_padded_sequence``: so no padded batches),
``nn.LSTM(proj_size=P)`` (``PROJECTION``). Computed differently: a float64 module becomes a float32 Keras
model, silently, so the systems are float32 only. No gradients (the Keras model's would be TensorFlow's of
another graph, not checked here). Chunked runs: each call's ``h_n`` (``c_n``) given as the next call's
``h0`` (``c0``). The PyTorch module itself is compared with the Keras model too (test_nobuco.py): the
torch systems are not in nobuco's environment's run.
"""

from __future__ import annotations

import contextlib
import io

from rnn_equivalence.frameworks.base import LayerConfig, Native, distribution_version, import_framework
from rnn_equivalence.frameworks.pytorch import TorchGRU, TorchLayer, TorchLSTM

ENVIRONMENT = "nobuco"  # the nox session whose environment holds nobuco


def flattened(values) -> list:
    """Tensors in the order nobuco flattens a call's arguments and results: depth first."""
    if isinstance(values, (tuple, list)):
        return [item for value in values for item in flattened(value)]
    return [values]


class NobucoConverted:
    """The module ``TorchLayer.module`` builds, converted by nobuco into a Keras model, run in Keras."""

    environment = ENVIRONMENT
    converter = "nobuco.pytorch_to_keras"  # a converted system: the depth rules of rnn_equivalence.harness.depth
    dtypes = ("float32",)  # the Keras model's (nobuco builds its layers in Keras's floatx)
    distributions = ("nobuco", "torch", "tensorflow")
    requires = ("nobuco", "torch", "tensorflow")
    autodiff, optimizers = "", {}
    padded_configs: tuple[LayerConfig, ...] = ()  # a packed sequence is refused (the module's docstring)

    def start(self):
        super().start()
        self.nobuco = import_framework("nobuco", self.name)
        self.tf = import_framework("tensorflow", self.name)

    def describe(self) -> str:
        return f"nobuco.pytorch_to_keras({self.cell}) in Keras {distribution_version('tensorflow')}"

    def keras_model(self, module, args):
        """The Keras model nobuco writes of ``module`` called on ``args`` (its report, printed, kept out)."""
        channels = self.nobuco.ChannelOrder.PYTORCH
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return self.nobuco.pytorch_to_keras(module, args=list(args), inputs_channel_order=channels,
                                                outputs_channel_order=channels)

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        if padding is not None:
            self.check_padding(padding, xs)  # no padded configurations: refused, naming why
        module, args = self.module(native, xs, state, config, g)
        model = self.keras_model(module, args)
        inputs = [tensor.numpy() for tensor in flattened(args)]
        results = [result.numpy() for result in flattened(model(inputs if len(inputs) > 1 else inputs[0]))]
        return dict(zip(["output", "h_n", "c_n"][:3 if self.family == "lstm" else 2], results, strict=True))


# What nobuco 0.17.0 does with what PyTorch's layers hold (measured: tests/equivalence/test_nobuco.py).
PROJECTION = ("nobuco 0.17.0 builds a Keras LSTM of hidden size H without the projection, and Keras refuses "
              "weight_hr's shape, or an initial state of size P (\"... is not compatible with ...\")")


def _nobuco_system(name: str, torch_class: type) -> type:
    if name != torch_class.name.replace("torch-", "nobuco-").removesuffix("-rnn"):
        raise TypeError(f"nobuco system {name!r}: its row describes {torch_class.name!r}")
    qualname = name.replace("-", "_")
    return type(qualname, (NobucoConverted, torch_class), {
        "name": name, "cell": torch_class.cell, "__module__": __name__, "__qualname__": qualname,
        # The projection refused (PROJECTION), so the mutation case has none and no weight_hr to break.
        "options": ("",), "mutation_options": "",
        "refused_options": {"projection": PROJECTION} if torch_class.family == "lstm" else {},
        "mutations": {k: m for k, m in torch_class.mutations.items() if "weight_hr" not in k},
        "chunked_configs": TorchLayer.chunked_configs,
    })


# The nobuco systems: the PyTorch layer each converts, by its literal name (each registers itself).
for _row in (("nobuco-lstm", TorchLSTM), ("nobuco-gru", TorchGRU)):
    _nobuco_system(*_row)
