"""PyTorch's layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) made into a program as users deploy them, saved, loaded
back and run: ``torch.jit.trace``, ``torch.jit.script`` (TorchScript) and ``torch.export.export``.

The weights are PyTorch's, the mapping is ``rnn_equivalence.frameworks.pytorch``'s (``TorchLayerMapping``, and
``TorchProjectedMapping`` for ``nn.LSTM``), unchanged: what is checked is that the program computes what the
module it was made from and the reference compute, after the round trip through its file format
(``torch.jit.save`` / ``torch.jit.load``, ``torch.export.save`` / ``torch.export.load``), on inputs other than
the example it was made with.

The program is the module a user writes around the layer (``programs``): its inputs are the sequence, the
lengths of a padded batch (packed inside: ``pack_padded_sequence``, the layer, ``pad_packed_sequence``), and the
initial states where given; made from an example of zeros with every sequence at full length, then run on
the case, so that a program that froze its example's values or lengths shows. Gradients and one optimizer
step go through the loaded program, by ``torch.autograd`` on its own parameters (a program keeps them as
parameters: ``layer.weight_ih_l0``, ...). Chunked runs feed each call's h_n (c_n) to the next, as for the
module.

What each refuses, measured (tests/equivalence/test_torch_programs.py):
- ``torch.jit.script`` of a bare ``nn.RNN`` / ``nn.LSTM`` / ``nn.GRU`` makes a module without ``forward``
  (their ``forward`` is overloaded for packed and padded inputs, which only a calling module resolves); so the
  systems script the calling module, as the PyTorch documentation's examples do.
- ``torch.export`` refuses a packed batch (it cannot guard on the data-dependent ``batch_sizes``, as its ONNX
  exporter, ``torch-onnx-dynamo``): the export systems have no padded configurations.

Where they run: in a nox session of their own, ``nox -s torch-programs`` (``ENVIRONMENT``), at full depth, their
report in docs/environments/torch-programs; a run of the main environment leaves them out (the committed report
lists them under ``elsewhere``). Not for a conflict of pins (they need PyTorch alone) but for the default run's
budget (issue 34): the nine systems cost about 125 s of test time at default depth (measured,
``pytest -o addopts="" --systems=<the nine>``), which the default run, already over its target, cannot carry.

A program is made in milliseconds (a trace, a script) to tenths of a second (an export): no conversion cache;
its file holds pickled data that only ``torch.jit.load`` / ``torch.export.load`` read, in the process that
saved it.
"""

from __future__ import annotations

import io
import types
import warnings

from rnn_equivalence.frameworks.base import LayerConfig, Native
from rnn_equivalence.frameworks.pytorch import TorchGRU, TorchLayerRunner, TorchLSTM, TorchRNN


def programs(torch):
    """The modules a user writes around the layer, by (padded, initial state given, LSTM): plain calls that
    ``torch.jit.script`` compiles (no variadic arguments) and ``torch.jit.trace`` / ``torch.export`` record."""
    nn, rnn = torch.nn, torch.nn.utils.rnn

    class Program(nn.Module):
        def __init__(self, layer, batch_first: bool, enforce_sorted: bool, steps: int):
            super().__init__()
            self.layer, self.batch_first, self.enforce_sorted, self.steps = layer, batch_first, enforce_sorted, steps

    class Call(Program):
        def forward(self, x):
            return self.layer(x)

    class CallFrom(Program):
        def forward(self, x, h0):
            return self.layer(x, h0)

    class CallLSTMFrom(Program):
        def forward(self, x, h0, c0):
            return self.layer(x, (h0, c0))

    class Packed(Program):
        def forward(self, x, lengths):
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first,
                                              enforce_sorted=self.enforce_sorted)
            output, final = self.layer(packed)
            output, _ = rnn.pad_packed_sequence(output, batch_first=self.batch_first, total_length=self.steps)
            return output, final

    class PackedFrom(Program):
        def forward(self, x, lengths, h0):
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first,
                                              enforce_sorted=self.enforce_sorted)
            output, final = self.layer(packed, h0)
            output, _ = rnn.pad_packed_sequence(output, batch_first=self.batch_first, total_length=self.steps)
            return output, final

    class PackedLSTMFrom(Program):
        def forward(self, x, lengths, h0, c0):
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first,
                                              enforce_sorted=self.enforce_sorted)
            output, final = self.layer(packed, (h0, c0))
            output, _ = rnn.pad_packed_sequence(output, batch_first=self.batch_first, total_length=self.steps)
            return output, final

    return {(False, False, False): Call, (False, False, True): Call,
            (False, True, False): CallFrom, (False, True, True): CallLSTMFrom,
            (True, False, False): Packed, (True, False, True): Packed,
            (True, True, False): PackedFrom, (True, True, True): PackedLSTMFrom}


# PyTorch's fused recurrent kernels: what a program holds where the recurrence was not unrolled.
RECURRENT_OPERATORS = ("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")


class ProgramRunner(TorchLayerRunner):
    """The layer's module (``TorchLayerRunner.build``) inside the user's program, made, saved, loaded, run."""

    def start(self):
        super().start()
        self.programs = programs(self.torch)
        self.last_program = None  # the loaded program of the last run (tests read what it holds)

    def make(self, program, example: tuple):
        """The program, made by this system's tool from ``example``, saved to bytes and loaded back."""
        raise NotImplementedError

    def operators(self) -> set[str]:
        """Every operator of the last program, as ``aten::name``."""
        raise NotImplementedError

    def recurrent_operators(self) -> set[str]:
        """The fused recurrent kernels of the last program; none where the tool unrolled the recurrence."""
        return self.operators() & set(RECURRENT_OPERATORS)

    def expected_operator(self, config: LayerConfig, g: str) -> str:
        """The one kernel the layer runs: each tool keeps it whole (tests/equivalence/test_torch_programs.py)."""
        return {"rnn": f"aten::rnn_{g}", "lstm": "aten::lstm", "gru": "aten::gru"}[self.family]

    def forward(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None,
                requires_grad: bool = False):
        torch = self.torch
        if padding is not None:
            self.check_padding(padding, xs)
        layer, _, leaves = self.build(native, xs, state, config, g, None, requires_grad)
        batch_first = bool(config.option("batch_first"))
        x = leaves["inputs"].transpose(0, 1).contiguous() if batch_first else leaves["inputs"]
        lengths = () if padding is None else (torch.tensor(padding.lengths, dtype=torch.int64),)
        args = (x, *lengths, *leaves["state"].values())
        kind = self.programs[(padding is not None, state is not None, self.family == "lstm")]
        program = kind(layer, batch_first, bool(config.option("enforce_sorted")), xs.shape[0])
        full = (torch.full_like(lengths[0], xs.shape[0]),) if lengths else ()  # every sequence at full length
        example = (torch.zeros_like(x), *full, *(torch.zeros_like(s) for s in leaves["state"].values()))
        loaded = self.make(program, example)
        self.last_program = loaded
        output, final = loaded(*args)
        # The loaded program's parameters by native name (the module's, under "layer."), for autograd and the step.
        parameters = types.SimpleNamespace(**{name.removeprefix("layer."): value
                                              for name, value in loaded.named_parameters()})
        if self.family == "lstm":
            return {"output": output, "h_n": final[0], "c_n": final[1]}, parameters, leaves
        return {"output": output, "h_n": final}, parameters, leaves


class TorchScriptRunner(ProgramRunner):
    def operators(self) -> set[str]:
        return {node.kind() for node in self.last_program.inlined_graph.nodes() if node.kind().startswith("aten::")}


class TracedRunner(TorchScriptRunner):
    def make(self, program, example: tuple):
        torch = self.torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation notice; the trace's on packing
            traced = torch.jit.trace(program, example, check_trace=False)
            return load_script(torch, traced)


class ScriptedRunner(TorchScriptRunner):
    def make(self, program, example: tuple):
        torch = self.torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load_script(torch, torch.jit.script(program))


def load_script(torch, module):
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    buffer.seek(0)
    return torch.jit.load(buffer)


class ExportedRunner(ProgramRunner):
    def make(self, program, example: tuple):
        torch = self.torch
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = torch.export.export(program, example)
            buffer = io.BytesIO()
            torch.export.save(exported, buffer)
            buffer.seek(0)
            self.last_exported = torch.export.load(buffer)
        return self.last_exported.module()

    def operators(self) -> set[str]:
        # An ATen target prints as aten.lstm.input (name, overload).
        return {"aten::" + str(node.target).split(".")[1] for node in self.last_exported.graph.nodes
                if node.op == "call_function" and str(node.target).startswith("aten.")}


# --- the systems: each PyTorch layer, through each tool -------------------------------------------------

TOOLS = {
    "trace": (TracedRunner, "torch.jit.trace", "TorchScript: torch.jit.trace, saved and loaded"),
    "script": (ScriptedRunner, "torch.jit.script", "TorchScript: torch.jit.script, saved and loaded"),
    "export": (ExportedRunner, "torch.export.export", "torch.export.export, saved and loaded"),
}
ENVIRONMENT = "torch-programs"  # the nox session that runs them (noxfile.py); see the docstring
LAYERS = {"rnn": TorchRNN, "lstm": TorchLSTM, "gru": TorchGRU}


def _system(name: str, tool: str, family: str) -> type:
    prefix = "torch-export" if tool == "export" else f"torchscript-{tool}"
    said = f"{prefix}-{family}-rnn" if family != "rnn" else f"{prefix}-rnn"
    if name != said:  # a typo in the table cannot register a misnamed system
        raise TypeError(f"program system {name!r}: its row describes {said!r}")
    runner, converter, how = TOOLS[tool]
    source = LAYERS[family]
    qualname = f"Torch_{tool}_{family}"
    return type(qualname, (runner, source), {
        "name": name, "converter": converter, "compare_with": source.name, "environment": ENVIRONMENT,
        "cell": f"{how}: {source.cell}",
        # torch.export cannot pack (see the module's docstring); TorchScript takes the layer's packed batches.
        "padded_configs": () if tool == "export" else source.padded_configs,
        # torch.export infers the shapes of an LSTM or GRU by running its decomposition step by step
        # (torch/_decomp: one_layer_lstm): an export of two bidirectional layers over 50 steps takes 5 s here,
        # over 12 steps 1 s. The program holds the fused kernel whatever the length (``recurrent_operators``), so
        # the long sequence's rounding is PyTorch's, which torch-lstm-rnn's 50 steps measure.
        "max_steps": 12 if tool == "export" else None,
        "__module__": __name__, "__qualname__": qualname,
    })


# Every program system, one row each, by its literal name (each registers itself).
for _row in (("torchscript-trace-rnn", "trace", "rnn"), ("torchscript-trace-lstm-rnn", "trace", "lstm"),
             ("torchscript-trace-gru-rnn", "trace", "gru"),
             ("torchscript-script-rnn", "script", "rnn"), ("torchscript-script-lstm-rnn", "script", "lstm"),
             ("torchscript-script-gru-rnn", "script", "gru"),
             ("torch-export-rnn", "export", "rnn"), ("torch-export-lstm-rnn", "export", "lstm"),
             ("torch-export-gru-rnn", "export", "gru")):
    _system(*_row)
