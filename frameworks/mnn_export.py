"""MNN: the ONNX ``RNN``, ``LSTM`` and ``GRU`` nodes the ONNX systems build (``rnn_equivalence.frameworks.onnx_rnn``,
the same mapping), converted by MNN's converter (MNNConvert, what the PyPI package ``MNN``'s ``mnnconvert``
command runs) and run in MNN's Python runtime (``MNN.nn.load_module_from_file``, the CPU backend, its default
precision mode).

Users export a PyTorch or Keras layer to ONNX and convert that with ``mnnconvert -f ONNX``: the ONNX node is
where every such route meets, so the systems convert the suite's own nodes, built from the canonical weights
(tests/equivalence/test_mnn.py converts ``torch.onnx.export``'s models too, for the threads' reproductions).
The package's ``mnnconvert`` command is not what runs here: its Python wrapper (``MNN/tools/mnnconvert.py``)
imports a usage logger (``MNN/tools/utils/log.py``) that runs ``pip install -U aliyun-log-python-sdk`` through
``os.system`` (into whatever ``pip`` is first on the PATH, not the environment's) and then sends each
conversion's arguments and sizes to an Alibaba Cloud log service. The converter itself is the C++ extension
``_tools.mnnconvert(argv)``, which the wrapper calls and the systems call directly, in a child process (a
converter crash must not take the test process with it).

What the converter makes of a node (MNN 3.6.1, measured: tests/equivalence/test_mnn.py checks it on every
converted model of the design, ``last_operators``, read back from the model's JSON dump, ``--JsonFile``): an RNN
node MNN's fused ``RNN`` op; an LSTM or GRU node, by default, a ``While`` op whose body graph is one step of the
cell, with the input projection of every step a ``Convolution`` before it (the converter says so: "Use While to
compute LSTM, if don't want it, add --useOriginRNNImpl"; a node of one step may be unrolled instead). With
``--useOriginRNNImpl`` an LSTM node becomes MNN's fused ``LSTM`` op (measured on ``torch.onnx.export``'s models in
the threads' tests). The systems convert as a user does, by default.

What MNN refuses, or computes differently, is below (each measured in tests/equivalence/test_mnn.py), and
refused by the systems by name. float32 only: what MNN's CPU backend computes in (float64 nodes are not
tried).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import CELL, LayerConfig, distribution_version, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once
from rnn_equivalence.frameworks.onnx_rnn import OnnxGated, OnnxOperator, OnnxRNN, _gated_mutations
from rnn_equivalence.reference.params import GATED

ENVIRONMENT = "mnn"  # the nox session whose environment holds MNN
CONVERT_TIMEOUT = 300  # seconds; a conversion takes well under one

# MNNConvert in a child process, from the C++ extension (never MNN.tools.mnnconvert: the module's docstring).
# argv: the arguments after the program's name.
# ``_tools.mnnconvert`` returns True whether or not it wrote a model: a model written is the only sign of success.
_CONVERT = "import sys, _tools; _tools.mnnconvert(['MNNConvert', *sys.argv[1:]])"


def mnnconvert(*arguments: str) -> subprocess.CompletedProcess:
    """MNNConvert with ``arguments`` (its command line), in a child process of this Python; its output kept."""
    return subprocess.run([sys.executable, "-c", _CONVERT, *arguments], capture_output=True, text=True,
                          timeout=CONVERT_TIMEOUT, env={**os.environ, "PYTHONWARNINGS": "ignore"})


class ConversionRefused(RuntimeError):
    """MNNConvert made no model (it failed, or exited without writing one)."""


def convert_onnx(onnx_bytes: bytes, *options: str) -> bytes:
    """The .mnn model MNNConvert makes of an ONNX model's bytes, with the converter's ``options``."""
    with tempfile.TemporaryDirectory(prefix="rnn-eq-mnn-") as folder:
        source, target = Path(folder) / "model.onnx", Path(folder) / "model.mnn"
        source.write_bytes(onnx_bytes)
        done = mnnconvert("-f", "ONNX", "--modelFile", str(source), "--MNNModel", str(target),
                          "--bizCode", "rnn-equivalence", *options)
        if not target.exists() or not target.stat().st_size:
            said = (done.stdout + done.stderr).strip().splitlines()
            raise ConversionRefused(f"MNNConvert exited with {done.returncode} and no model: "
                                    + " | ".join(said[-6:]))
        return target.read_bytes()


def operator_dump(mnn_bytes: bytes) -> dict:
    """The .mnn model's JSON dump (``MNNConvert -f MNN --JsonFile``): its ops and its subgraphs'."""
    with tempfile.TemporaryDirectory(prefix="rnn-eq-mnn-") as folder:
        source, target = Path(folder) / "model.mnn", Path(folder) / "model.json"
        source.write_bytes(mnn_bytes)
        done = mnnconvert("-f", "MNN", "--modelFile", str(source), "--JsonFile", str(target))
        if done.returncode != 0 or not target.exists():
            raise RuntimeError(f"MNNConvert could not dump the model to JSON: {(done.stdout + done.stderr)[-500:]}")
        return json.loads(target.read_text())


def operator_types(dump: dict) -> dict[str, list[str]]:
    """{graph: its op types, in order}: "main" the model's own, then each subgraph (a While's body) by name."""
    graphs = {"main": [op["type"] for op in dump["oplists"]]}
    for graph in dump.get("subgraphs", []):
        graphs[graph["name"]] = [node["type"] for node in graph.get("nodes", [])]
    return graphs


def run_module(mnn, mnn_bytes: bytes, feeds: dict, outputs: list[str]) -> list[np.ndarray]:
    """The model run in MNN's Module API (CPU, its default precision and one thread), the inputs by name."""
    expr, nn = mnn.expr, mnn.nn
    with tempfile.TemporaryDirectory(prefix="rnn-eq-mnn-") as folder:
        path = Path(folder) / "model.mnn"
        path.write_bytes(mnn_bytes)
        module = nn.load_module_from_file(str(path), list(feeds), list(outputs))
        if module is None:
            raise RuntimeError(f"MNN could not load the converted model (inputs {list(feeds)}, outputs {outputs})")
        values = [expr.const(np.ascontiguousarray(value), list(value.shape), expr.NCHW,
                             expr.int if value.dtype.kind in "iu" else expr.float)
                  for value in feeds.values()]
        results = module.forward(values)
        if len(results) != len(outputs):
            raise RuntimeError(f"MNN returned {len(results)} outputs, expected {outputs}")
        return [np.array(expr.convert(r, expr.NCHW).read(), copy=True) for r in results]


class MnnEvaluation:
    """An evaluation, as ``rnn_equivalence.frameworks.onnx_rnn``'s: the node ``OnnxNodeRunner`` builds, converted by
    MNNConvert (once per model: ``rnn_equivalence.frameworks.conversion_cache``) and run in MNN's runtime."""

    runtime = "MNNConvert, MNN"
    converter_options: tuple[str, ...] = ()  # MNNConvert's options beyond the model's paths: a user's defaults

    def start(self):
        super().start()
        self.mnn = import_framework("MNN", self.name)
        self.last_operators: dict[str, list[str]] = {}

    def describe(self) -> str:
        options = f" {' '.join(self.converter_options)}" if self.converter_options else ""
        return f"MNNConvert -f ONNX{options} ({self.cell}) in MNN {distribution_version('MNN')} (CPU)"

    def convert(self, model) -> bytes:
        """The .mnn model of the ONNX ``model``, and its op types read back into ``last_operators``."""
        onnx_bytes = model.SerializeToString()
        parts = (hashlib.sha256(onnx_bytes).hexdigest(), self.converter_options)
        data = converted_once(self, parts, lambda: convert_onnx(onnx_bytes, *self.converter_options), ".mnn")
        listed = converted_once(self, (*parts, "operators"),
                                lambda: json.dumps(operator_types(operator_dump(data))).encode(), ".json")
        self.last_operators = json.loads(listed)
        return data

    def evaluate(self, model, feeds, outputs):
        return run_module(self.mnn, self.convert(model), feeds, outputs)

    def operator_set(self) -> set[str]:
        """Every op type of the last converted model, its subgraphs' included."""
        return {op for ops in self.last_operators.values() for op in ops}


class MnnSystem(OnnxOperator):
    """An MNN system: what every one declares (the ONNX systems' mapping, run after MNN's conversion)."""

    distributions = ("MNN", "onnx")
    requires = ("MNN", "_tools", "onnx")
    converter_distributions = ("onnx", "protobuf")
    dtypes = ("float32",)
    environment = ENVIRONMENT
    converter = "MNNConvert"  # a converted system: the depth rules of rnn_equivalence.harness.depth


# What MNN 3.6.1 does with what the ONNX systems declare (measured: tests/equivalence/test_mnn.py). Refused loudly
# by the converter (no model written): an LSTM's P (peepholes) and its HardSigmoid activations. Computed
# differently, silently (a model is written and runs, far outside the bound of the node it was converted from):
# the rest below. Each is refused by the systems, by name, with the reason.
REVERSE = ("MNN 3.6.1 runs a direction='reverse' node as another function, far outside its bound (measured: "
           "tests/equivalence/test_mnn.py)")
LAYOUT = ("MNN 3.6.1 reads a layout=1 (batch-first) node as layout=0: its outputs have the time-major shape, or the "
          "run fails in shape computation (measured: tests/equivalence/test_mnn.py)")
SEQUENCE_LENS = ("MNNConvert 3.6.1 warns 'MNN LSTM not support sequence_lens, all batch must be seq_length, the "
                 "result may has error' and converts the node without its sequence_lens: every element runs all "
                 "steps (measured: tests/equivalence/test_mnn.py)")
CLIP = "MNNConvert 3.6.1 drops the node's clip, silently (measured: tests/equivalence/test_mnn.py)"
INPUT_FORGET = "MNNConvert 3.6.1 drops the LSTM node's input_forget, silently (measured: tests/equivalence/test_mnn.py)"
PEEPHOLES = "MNNConvert 3.6.1 refuses the LSTM node's P: 'MNN LSTM not support 8th input (peepholes)'"
RESET_BEFORE = ("MNN 3.6.1 runs a GRU node with linear_before_reset=0 as another function (bidirectional: its "
                "run fails, 'Reshape error'); it computes the reset-after GRU only (measured: "
                "tests/equivalence/test_mnn.py)")
# The activations each family computes as the node lists them (measured); others are refused or ignored:
# an LSTM's HardSigmoid refused by MNNConvert ("MNN LSTM Don't support activation: HardSigmoid"); a GRU's
# activations other than the default and an RNN's other than tanh converted and ignored, silently (an RNN with
# Relu computes tanh: tests/equivalence/test_mnn.py).
ACTIVATIONS = {"rnn": ("tanh",), "lstm": (GATED, "sigmoid,relu,relu", "sigmoid,tanh,relu"), "gru": (GATED,)}
# The recurrent op each family's node becomes (the main graph's and the While body's op types are read back):
# an RNN node MNN's fused RNN op; an LSTM or GRU node a While loop over one step, its input projection one
# Convolution before it (a GRU of one step: no loop, the step's ops only).
OPERATORS = {"rnn": "RNN", "lstm": "While", "gru": "While"}
RECURRENT = ("RNN", "LSTM", "GRU", "While", "Loop")


class MnnRefusals:
    """The runner's refusals of what MNN computes differently (above), by name, before a conversion."""

    def check_padding(self, padding, xs) -> None:
        raise ValueError(f"{self.name}: padded batches are not supported by this system (sequence_lens refused: "
                         f"{SEQUENCE_LENS})")

    def run_native(self, native, xs, state, config, g, padding=None):
        self.check_call(native, xs, state, config, g)  # a malformed call is named as such first
        if padding is not None:
            raise ValueError(f"{self.name}: padded batches are not supported by this system (sequence_lens refused: "
                             f"{SEQUENCE_LENS})")
        if config.option("direction") == "reverse":
            raise ValueError(f"{self.name}: direction='reverse' refused: {REVERSE}")
        if config.option("layout", 0) == 1:
            raise ValueError(f"{self.name}: layout=1 refused: {LAYOUT}")
        if self.family == "gru" and self.variant == "reset_before":
            raise ValueError(f"{self.name}: linear_before_reset=0 refused: {RESET_BEFORE}")
        return super().run_native(native, xs, state, config, g, padding)


class MnnRunner(MnnRefusals, MnnEvaluation):
    """The refusals, then the conversion and the run."""


def _swap_directions(native):
    return {name: value[::-1].copy() for name, value in native.items()}


# Layout 0 (layout=1 refused), forward and bidirectional (reverse refused), with and without biases and an
# initial state; the gated systems' one forward node (CELL, its h at every step and its last c) too.
LAYER_CONFIGS = (
    LayerConfig(1, False, options=(("direction", "forward"), ("layout", 0))),
    LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0))),
    LayerConfig(1, True, bias=False, initial_state=False, options=(("direction", "bidirectional"), ("layout", 0))),
    LayerConfig(1, False, bias=False, initial_state=False, options=(("direction", "forward"), ("layout", 0))),
)
MUTATION_CONFIG = LayerConfig(1, True, options=(("direction", "bidirectional"), ("layout", 0)))


class MnnRNN(MnnRunner, OnnxRNN, MnnSystem):
    name = "mnn-rnn"
    activations = ACTIVATIONS["rnn"]
    options = ("",)
    refused_options = {"gate_clip": CLIP}
    configs = LAYER_CONFIGS
    mutation_config = MUTATION_CONFIG
    padded_configs = ()  # SEQUENCE_LENS


def _mnn_gated(name: str, family: str, variant: str = "") -> type:
    if name != f"mnn-{family}":  # a typo in the table cannot register a misnamed system
        raise TypeError(f"MNN system {name!r}: its row describes {f'mnn-{family}'!r}")
    qualname = f"Mnn_{family}"
    refused = ({"gate_clip": CLIP, "coupled_gates": INPUT_FORGET, "peepholes": PEEPHOLES} if family == "lstm"
               else {"gate_clip": CLIP})
    mutations = {**_gated_mutations(family, honours_activations=family == "lstm", peepholes=False),
                 "directions swapped": _swap_directions}
    return type(qualname, (MnnRunner, OnnxGated, MnnSystem), {
        "name": name, "cell": f"ONNX {family.upper()}", "family": family, "variant": variant,
        "options": ("",), "refused_options": refused, "activations": ACTIVATIONS[family],
        "configs": (CELL, *LAYER_CONFIGS), "mutation_config": MUTATION_CONFIG,
        "padded_configs": (),  # SEQUENCE_LENS
        "mutations": mutations, "__module__": __name__, "__qualname__": qualname})


# The systems, one row each (no reset-before GRU: RESET_BEFORE).
for _row in (("mnn-lstm", "lstm"), ("mnn-gru", "gru", "reset_after")):
    _mnn_gated(*_row)
