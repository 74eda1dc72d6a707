"""ExecuTorch: ``torch.export`` of ``torch.nn.LSTM``, ``nn.GRU`` and ``nn.RNN``, lowered to an ExecuTorch program
(``executorch.exir.to_edge(...).to_executorch()``, the .pte's bytes) and run by ExecuTorch's Python runtime
(``executorch.runtime.Runtime``) on its portable CPU kernels.

The weights are PyTorch's: each system is the PyTorch layer system (``TorchLSTM``, ``TorchGRU``, ``TorchRNN``) with
its mapping (``TorchLayerMapping``) unchanged, the loaded layer wrapped as a user exports it
(``frameworks/torch_converted.py``: ``forward(x, h0[, c0])`` returning ``output, h_n[, c_n]``). The program is made
for the run's shapes (a dynamic sequence length is refused by the export: executorch#8468, below).

What ExecuTorch 1.5.1 (torch 2.13.0) does with a recurrent layer (measured, tests/equivalence/test_executorch.py):

- the layers export and lower, stacked, bidirectional, batch first or not, with or without biases and initial
  states, and the LSTM's projection; the program holds no recurrent operator: ``torch.export``'s decomposition
  unrolls every step of every layer and direction into ``aten::addmm``, ``aten::sigmoid``, ``aten::tanh``,
  ``aten::mul``, ``aten::add`` kernel calls (an LSTM: 3 sigmoid and 2 tanh calls per step, layer and direction).
  ``kernel_calls`` counts the last program's kernel calls by operator; ``recurrent_operators()`` lists its
  recurrent operators (``aten::lstm``, ``aten::gru``, ``aten::rnn_*``: none);
- pytorch#151200 (an exported LSTM's h_n and c_n get an extra dimension): the .pte's outputs are
  (L*D, batch, H), its declared output shapes too;
- executorch#8468 (a dynamic sequence length blocks the export): reproduced ("Constraints violated (steps)"); with
  PyTorch's private ``register_lstm_while_loop_decomposition`` the LSTM exports, but ``to_executorch()`` refuses it
  ("_ViewSpec is incompatible with its base on creation", executorch#20008), and a GRU or RNN is still refused;
- executorch#10104 (a GRU fails under static quantization, XNNPACK quantizer, pt2e): no failure, but the quantizer
  annotates nothing in the exported ``aten.gru.input`` node: no quantize node, and the lowered program is the float
  GRU, within the float32 bound.

Not taken: a packed sequence (``torch.export`` cannot trace ``pack_padded_sequence``), so no padded batches.
Chunked runs: each call's h_n (c_n) fed as the next call's h0 (c0), a program per chunk length. float32 only (the
systems' declared dtype; the portable kernels take float64 too, not checked here); no gradients. The unrolled
lowering costs some 10 to 30 s per program here, growing with the steps: ``max_steps`` as the dynamo exporter's (12).

ExecuTorch pins its own stack (coremltools, torchao, pandas): its systems run in their own environment, made by the
nox session ``executorch`` (noxfile.py), and are left out of a run that does not name them; their full-depth report
is docs/environments/executorch/.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections import Counter

from rnn_equivalence.frameworks.base import LayerConfig, Native, distribution_version, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once
from rnn_equivalence.frameworks.pytorch import TorchGRU, TorchLayer, TorchLSTM, TorchRNN
from rnn_equivalence.frameworks.torch_converted import TorchConverted, output_keys

ENVIRONMENT = "executorch"  # the nox session whose environment holds executorch
RECURRENT_OPS = frozenset({"aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu", "aten::_thnn_fused_lstm_cell",
                           "aten::_thnn_fused_gru_cell"})
# The elementwise nonlinearities of one step of one layer and direction, unrolled (as litert_torch_export's).
STEP_CALLS = {"lstm": {"aten::sigmoid": 3, "aten::tanh": 2}, "gru": {"aten::sigmoid": 2, "aten::tanh": 1},
              "rnn": {"tanh": {"aten::tanh": 1}, "relu": {"aten::relu": 1}}}


def step_calls(family: str, g: str) -> dict[str, int]:
    return STEP_CALLS["rnn"][g] if family == "rnn" else STEP_CALLS[family]


def kernel_calls(program) -> Counter:
    """The kernel calls of an ExecuTorch program's first plan (``executorch_program``, the schema's
    ``Program``), by operator name (overload left out), delegate calls as ``delegate:<backend id>``."""
    plan = program.execution_plan[0]
    counts = Counter()
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if hasattr(args, "op_index"):
                counts[plan.operators[args.op_index].name] += 1
            elif hasattr(args, "delegate_index"):
                counts[f"delegate:{plan.delegates[args.delegate_index].id}"] += 1
    return counts


class ExecuTorchConverted(TorchConverted):
    """The module ``TorchLayer.module`` builds, exported, lowered to an ExecuTorch program and run by its runtime."""

    environment = ENVIRONMENT
    converter = "executorch.exir.to_edge"  # a converted system: the depth rules of rnn_equivalence.harness.depth
    distributions = ("executorch", "torch")
    requires = ("executorch", "torch")
    dtypes = ("float32",)
    autodiff, optimizers = "", {}
    padded_configs: tuple[LayerConfig, ...] = ()  # a packed sequence is refused (the module's docstring)
    chunked_configs = TorchLayer.chunked_configs
    max_steps = 12  # the unrolled lowering's cost grows with the steps (the module's docstring)
    operators: frozenset = frozenset()  # the recurrent operators a program holds: none, it is unrolled
    last_kernel_calls: Counter = Counter()

    def start(self):
        super().start()
        with contextlib.redirect_stderr(io.StringIO()):
            self.exir = import_framework("executorch.exir", self.name)
            self.runtime = import_framework("executorch.runtime", self.name).Runtime.get()
        self.schema = import_framework("executorch.exir._serialize._program", self.name)
        self.last_program = None  # the runtime's Program of the last run

    def describe(self) -> str:
        return (f"executorch.exir.to_edge({self.cell}).to_executorch() {distribution_version('executorch')}, "
                "its runtime's portable kernels")

    def recurrent_operators(self) -> set[str]:
        """The recurrent operators among the last program's kernel calls (none: it is unrolled)."""
        return {name for name in self.last_kernel_calls if name in RECURRENT_OPS}

    def lower(self, module, flat, partitioner=None) -> bytes:
        """The .pte's bytes of ``module`` exported on ``flat``: ``to_edge(...).to_executorch()``, or with
        ``partitioner`` ``to_edge_transform_and_lower``."""
        torch, exir = self.torch, self.exir
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            exported = torch.export.export(module, tuple(flat))
            if partitioner is None:
                edge = exir.to_edge(exported)
            else:
                edge = exir.to_edge_transform_and_lower(exported, partitioner=[partitioner])
            return bytes(edge.to_executorch().buffer)

    def run_program(self, pte: bytes, flat) -> list:
        """The program's outputs (its method ``forward``), and its kernel calls counted (``last_kernel_calls``)."""
        self.last_kernel_calls = kernel_calls(self.schema.deserialize_pte_binary(pte).program)
        self.last_program = self.runtime.load_program(pte)
        outputs = self.last_program.load_method("forward").execute(list(flat))
        return [output.numpy() for output in outputs]

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        if padding is not None:
            self.check_padding(padding, xs)  # no padded configurations: refused, naming why
        module, flat = self.flat_program(native, xs, state, config, g)
        pte = converted_once(self, self.structure(native, flat, config, g), lambda: self.lower(module, flat),
                             suffix=".pte")
        return dict(zip(output_keys(self.family), self.run_program(pte, flat), strict=True))


def _executorch_system(name: str, torch_class: type) -> type:
    if name != "executorch-" + torch_class.name.removeprefix("torch-").removesuffix("-rnn"):
        raise TypeError(f"ExecuTorch system {name!r}: its row describes {torch_class.name!r}")
    qualname = name.replace("-", "_")
    return type(qualname, (ExecuTorchConverted, torch_class), {
        "name": name, "cell": torch_class.cell, "__module__": __name__, "__qualname__": qualname,
    })


# The ExecuTorch systems: the PyTorch layer each converts, by its literal name (each registers itself).
for _row in (("executorch-lstm", TorchLSTM), ("executorch-gru", TorchGRU), ("executorch-rnn", TorchRNN)):
    _executorch_system(*_row)
