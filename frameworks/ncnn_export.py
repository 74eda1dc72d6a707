"""ncnn through pnnx: PyTorch's ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` traced (``torch.jit.trace``), converted by
pnnx into an ncnn model (``.param`` text, ``.bin`` weights), loaded by ncnn's Python API and run on the CPU (its
own environment: ``nox -s ncnn``; issue 36).

The weights are PyTorch's: the mapping is ``rnn_equivalence.frameworks.pytorch``'s layer mapping
(``TorchLayerMapping``, ``TorchProjectedMapping`` for the LSTM's ``proj_size``), unchanged, NumPy only. What
converts them into ncnn's layout (gate order, summed biases, directions) is pnnx, inside the tool: the systems
check that ncnn's run of what pnnx wrote computes what the reference computes on PyTorch's parameters.

What runs, per case (``PnnxNcnnRunner``): the PyTorch layer a user writes, holding the case's weights and called
as ``layer(x, h0)`` / ``layer(x, (h0, c0))`` (no state argument where none is given), wrapped to return
``output, h_n[, c_n]``; traced on **one** sequence (batch 1); converted by the pnnx executable the ``pnnx`` wheel
ships (``inputshape=...``, ``fp16=0``: float32 weights in the ``.bin``); the ``.param`` / ``.bin`` pair kept in
the conversion cache (``rnn_equivalence.frameworks.conversion_cache``, one entry holding both); loaded with
``ncnn.Net().load_param`` / ``load_model`` (from files: the Python API's ``load_model_mem`` takes a str) with fp16
and bf16 storage and arithmetic off (``runs_with``);
each sequence of the batch extracted by an extractor of its own, its ``(T, I)`` input and ``(L*D, H)`` states
fed as 2-D Mats, the batch stacked back afterwards.

What pnnx 20261020 writes and ncnn 1.0.20261020 runs (measured, tests/equivalence/test_ncnn.py):

- one fused ncnn layer per PyTorch layer (``LSTM``, ``GRU``, ``RNN``; both directions in one layer, ``2=2``), a
  ``Slice`` splitting a given state per layer, ``Concat`` joining the final states; ``OPERATORS``,
  ``read_param`` reads them back and checks each against the configuration;
- ``nn.LSTM(proj_size=P)``: ncnn's LSTM takes the projection (``3=H``, ``0=P``);
- no batch: ncnn's recurrent layers take one sequence, ``(T, I)``. pnnx squeezes a batch of 1 away; a model traced
  on a batch > 1 does not return the batch (``BATCH``; ncnn#3665's shapes, one step of a batch of 60, run as
  60 steps of one sequence): so the systems convert the
  batch-1 model and run the batch one sequence at a time, as ncnn is used;
- refused here, each by name (the plan's refusals): ``nn.RNN(nonlinearity="relu")`` (``RELU``: pnnx prints "RNN
  nonlinearity=relu not supported" and writes ncnn's tanh ``RNN`` all the same, exit status 0); padded batches
  (``PADDING``: ncnn's layers take no lengths); float64 (ncnn computes in float32).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import numpy as np

from rnn_equivalence.frameworks.base import Adapter, LayerConfig, Native, distribution_version, import_framework
from rnn_equivalence.frameworks.conversion_cache import converted_once, weights_digests
from rnn_equivalence.frameworks.pytorch import (
    GATED_LAYER_CONFIGS, TorchGRU, TorchLayer, TorchLayerMapping, TorchLayerRunner, TorchLSTM, TorchProjectedMapping,
    TorchRNN,
)

ENVIRONMENT = "ncnn"  # the nox session whose environment holds pnnx and ncnn
# The fused ncnn layer each family's conversion emits (pnnx 20261020), checked in test_ncnn.py.
OPERATORS = {"lstm": "LSTM", "gru": "GRU", "rnn": "RNN"}
RECURRENT_LAYERS = frozenset(OPERATORS.values())
DIRECTIONS = {0: "forward", 1: "reverse", 2: "bidirectional"}  # ncnn's recurrent layers' param 2

# What the systems refuse, each by name (the plan's refusals; tests/equivalence/test_ncnn.py measures each).
RELU = ("ncnn's RNN layer computes tanh only: pnnx 20261020 prints 'RNN nonlinearity=relu not supported' and "
        "writes a tanh RNN all the same (exit status 0), so the converted model computes another function")
PADDING = "ncnn's LSTM, GRU and RNN layers take no sequence lengths"
BATCH = ("ncnn's recurrent layers take one sequence (T, I): pnnx squeezes a batch of 1 away, and a model traced "
         "on a larger batch does not return PyTorch's batch (a two-layer LSTM of 6 steps, batch 3: output (3, H), "
         "not (6, 3, H))")
RUNS_WITH = ("pnnx fp16=0 (float32 weights; pnnx's default writes them in float16) and ncnn's "
             "opt.use_fp16_storage, use_fp16_packed, use_fp16_arithmetic, use_bf16_storage off")


def pack(param: str, weights: bytes) -> bytes:
    """One cache entry of a conversion: the ``.param`` text's length, a newline, the text, the ``.bin``."""
    text = param.encode()
    return f"{len(text)}\n".encode() + text + weights


def unpack(data: bytes) -> tuple[str, bytes]:
    """``pack``'s ``.param`` text and ``.bin`` bytes."""
    length, _, rest = data.partition(b"\n")
    n = int(length)
    return rest[:n].decode(), rest[n:]


def param_layers(param: str) -> list[dict]:
    """The layers of an ncnn ``.param`` text, in order: {"type", "name", "inputs", "outputs", "params"}, the
    params by their integer ids as written (arrays, ``-233xx=``, kept as text)."""
    lines = [line.split() for line in param.splitlines() if line.strip()]
    if not lines or lines[0] != ["7767517"]:
        raise ValueError(f"not an ncnn .param (magic 7767517): starts {lines[:1]}")
    layers = []
    for fields in lines[2:]:
        kind, name, n_in, n_out = fields[0], fields[1], int(fields[2]), int(fields[3])
        inputs, outputs = fields[4:4 + n_in], fields[4 + n_in:4 + n_in + n_out]
        params = dict(item.split("=", 1) for item in fields[4 + n_in + n_out:])
        layers.append({"type": kind, "name": name, "inputs": inputs, "outputs": outputs, "params": params})
    return layers


# --- the mapping: PyTorch's, NumPy only ------------------------------------------------------------


class NcnnMapping(TorchLayerMapping):
    """PyTorch's layer names and layout: pnnx converts the PyTorch layer itself (the module's docstring)."""


class NcnnProjectedMapping(TorchProjectedMapping):
    """PyTorch's LSTM layer with ``weight_hr_l{k}`` (``proj_size``), which ncnn's LSTM takes."""


# --- the runner: trace, convert with pnnx, run in ncnn ------------------------------------------------


class PnnxNcnnRunner(TorchLayerRunner):
    """The PyTorch layer ``TorchLayerRunner.build`` makes (on the batch's first sequence), traced and converted by
    pnnx, the ncnn model run on each sequence of the batch. ``last_param`` and ``last_log``: the ``.param`` text
    of the last model run and pnnx's output of the last conversion (None where it came from the cache)."""

    runtime = "ncnn (CPU, float32)"
    last_param: str = ""
    last_log: str | None = None

    def start(self):
        self.torch = import_framework("torch", self.name)
        self.pnnx = import_framework("pnnx", self.name)
        self.ncnn = import_framework("ncnn", self.name)

    def describe(self) -> str:
        return (f"pnnx {distribution_version('pnnx')} ({self.cell}) -> ncnn {distribution_version('ncnn')}, "
                f"CPU float32")

    # --- the conversion ---------------------------------------------------------------------------
    def traced_module(self, native: Native, xs, state, config: LayerConfig, g: str):
        """The layer holding ``native``'s weights, wrapped to take the states as tensors and return a flat tuple
        (output, h_n[, c_n]); and its example arguments, of the batch's first sequence (``BATCH``)."""
        torch = self.torch
        one = xs[:, :1]
        first = None if state is None else {key: value[:, :1] for key, value in state.items()}
        layer, args = self.module(native, one, first, config, g)
        lstm = self.family == "lstm"

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, x, *states):
                out, final = self.layer(x, (tuple(states) if lstm else states[0]) if states else None)
                return (out, *final) if lstm else (out, final)

        flat = [args[0]] + ([] if len(args) == 1 else list(args[1]) if lstm else [args[1]])
        return Wrapped().eval(), tuple(flat)

    def convert(self, module, args, fp16: bool = False) -> tuple[str, bytes, str]:
        """pnnx's conversion of ``module`` traced on ``args``: the ncnn ``.param`` text, the ``.bin`` bytes and
        pnnx's output. A failed conversion is an error quoting pnnx."""
        torch = self.torch
        with tempfile.TemporaryDirectory(prefix="pnnx-") as folder:
            path = os.path.join(folder, "model.pt")
            torch.jit.trace(module, args, check_trace=False).save(path)
            shapes = ",".join("[" + ",".join(map(str, a.shape)) + "]f32" for a in args)
            done = subprocess.run([self.pnnx.EXEC_PATH, path, f"inputshape={shapes}", f"fp16={int(fp16)}",
                                   "device=cpu"], cwd=folder, capture_output=True, text=True)
            log = done.stdout + done.stderr
            param_path, bin_path = os.path.join(folder, "model.ncnn.param"), os.path.join(folder, "model.ncnn.bin")
            if done.returncode or not os.path.exists(param_path):
                raise RuntimeError(f"{self.name}: pnnx failed (exit status {done.returncode}): {log[-2000:]}")
            with open(param_path) as param, open(bin_path, "rb") as weights:
                return param.read(), weights.read(), log

    def converted(self, native: Native, xs, state, config: LayerConfig, g: str) -> tuple[str, bytes]:
        """The ``.param`` text and ``.bin`` bytes of the case's batch-1 model, made once per model
        (``converted_once``: the structure, the steps and sizes, the weights' digests)."""
        module, args = self.traced_module(native, xs, state, config, g)
        parts = ("pnnx fp16=0", g, str(config), [(tuple(a.shape), str(a.dtype)) for a in args],
                 weights_digests(native))
        self.last_log = None

        def convert():
            param, weights, self.last_log = self.convert(module, args)
            return pack(param, weights)

        return unpack(converted_once(self, parts, convert, suffix=".ncnn"))

    # --- what the .param holds -----------------------------------------------------------------------
    def read_param(self, param: str, config: LayerConfig, H: int, P: int | None = None) -> list[dict]:
        """The recurrent layers of ``param``, after checking every attribute the run relies on: one fused layer
        of the family's type per PyTorch layer, in order, each with the configuration's direction, hidden size
        (and projection); anything else is an error naming the layer and what it holds."""
        layers = param_layers(param)
        recurrent = [layer for layer in layers if layer["type"] in RECURRENT_LAYERS]
        expected_type = OPERATORS[self.family]
        if len(recurrent) != config.num_layers or any(layer["type"] != expected_type for layer in recurrent):
            raise ValueError(f"{self.name}: expected {config.num_layers} ncnn '{expected_type}' layer(s), one per "
                             f"layer; the .param holds {[layer['type'] for layer in layers]}")
        direction = "bidirectional" if config.bidirectional else "forward"
        for layer in recurrent:
            params = layer["params"]
            held = {"direction": DIRECTIONS.get(int(params.get("2", 0))), "num_output": int(params.get("0", 0)),
                    "hidden_size": int(params.get("3", params.get("0", 0)))}
            wanted = {"direction": direction, "num_output": P or H, "hidden_size": H}
            if held != wanted:
                raise ValueError(f"{self.name}: ncnn layer {layer['name']!r} holds {held}; the run assumes {wanted}")
        return recurrent

    # --- the run -------------------------------------------------------------------------------------
    def net(self, param: str, weights: bytes, fp16: bool = False):
        """An ncnn Net of the model, fp16 / bf16 storage and arithmetic off (``RUNS_WITH``) unless ``fp16``."""
        net = self.ncnn.Net()
        if not fp16:
            for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
                setattr(net.opt, option, False)
        net.opt.num_threads = 1
        # From files: the Python API's load_model_mem takes a str, not the .bin's bytes.
        with tempfile.TemporaryDirectory(prefix="ncnn-") as folder:
            param_path, bin_path = os.path.join(folder, "model.param"), os.path.join(folder, "model.bin")
            with open(param_path, "w") as out:
                out.write(param)
            with open(bin_path, "wb") as out:
                out.write(weights)
            if net.load_param(param_path) != 0 or net.load_model(bin_path) != 0:
                raise RuntimeError(f"{self.name}: ncnn refused the model pnnx wrote")
        return net

    def extract(self, net, param: str, inputs: list, outputs: int) -> list[np.ndarray]:
        """One extractor's run: ``inputs`` (2-D float32 arrays) fed to the model's ``Input`` blobs in order, the
        first ``outputs`` of its outputs (``out0``, ``out1``, ...) read back."""
        ncnn = self.ncnn
        names = [layer["outputs"][0] for layer in param_layers(param) if layer["type"] == "Input"]
        if len(names) != len(inputs):
            raise ValueError(f"{self.name}: the model takes {len(names)} input(s) {names}; given {len(inputs)}")
        # Each array held by a name while its Mat is made and cloned: ncnn.Mat(array) keeps no reference to it, so
        # a temporary (a copy of a non-contiguous slice) can be freed under it, and the Mat reads freed memory.
        arrays = [np.ascontiguousarray(array, np.float32) for array in inputs]
        with net.create_extractor() as extractor:
            for name, array in zip(names, arrays):
                extractor.input(name, ncnn.Mat(array).clone())
            results = []
            for k in range(outputs):
                code, mat = extractor.extract(f"out{k}")
                if code != 0:
                    raise RuntimeError(f"{self.name}: ncnn could not extract out{k} (status {code})")
                results.append(np.array(mat, dtype=np.float32, copy=True))
        return results

    def run_model(self, param: str, weights: bytes, xs, state, config: LayerConfig, fp16: bool = False) -> dict:
        """The ncnn model run on each sequence of the batch, stacked back: PyTorch's layer's outputs, in its
        layout (``batch_first`` included)."""
        T, batch = xs.shape[:2]
        keys = ("output", "h_n", "c_n")[:3 if self.family == "lstm" else 2]
        net = self.net(param, weights, fp16)
        per_sequence = []
        for b in range(batch):
            inputs = [xs[:, b]] + ([] if state is None else [state[key][:, b] for key in ("h", "c")[:len(keys) - 1]])
            per_sequence.append(self.extract(net, param, inputs, len(keys)))
        result = {}
        for k, key in enumerate(keys):
            shape = (T, -1) if key == "output" else (config.num_layers * config.num_directions, -1)
            result[key] = np.stack([outs[k].reshape(shape) for outs in per_sequence], axis=1)
        if config.option("batch_first"):
            result["output"] = result["output"].transpose(1, 0, 2)
        return result

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        if padding is not None:
            self.check_padding(padding, xs)  # no padded configurations: refused, naming why (PADDING)
        if self.family == "rnn" and g == "relu":
            raise ValueError(f"{self.cell}: nonlinearity='relu' refused: {RELU}")
        dtype, H = self.check_call(native, xs, state, config, g)
        _, P = self.read_options(native, config)
        param, weights = self.converted(native, xs, state, config, g)
        self.read_param(param, config, H, P)
        self.last_param = param
        result = self.run_model(param, weights, np.asarray(xs), state, config)
        return {key: value.astype(dtype) for key, value in result.items()}


# --- the systems: a mapping, the runner and the plan ----------------------------------------------------


class NcnnSystem(Adapter):
    """What every ncnn system declares: float32, no gradients, no padding; a converted system."""

    environment = ENVIRONMENT
    converter = "pnnx"  # a converted system: the depth rules of rnn_equivalence.harness.depth
    distributions = ("pnnx", "ncnn", "torch")
    requires = ("pnnx", "ncnn", "torch")
    dtypes = ("float32",)  # ncnn computes in float32 (fp16 storage off: RUNS_WITH)
    runs_with = RUNS_WITH
    autodiff, optimizers = "", {}
    padded_configs: tuple[LayerConfig, ...] = ()  # PADDING
    chunked_configs = TorchLayer.chunked_configs  # each call's h_n (c_n) given as the next call's h0 (c0)
    layout_config = LayerConfig(2, True)
    mutation_config = LayerConfig(3, True, options=(("batch_first", False),))


class NcnnLSTM(PnnxNcnnRunner, NcnnProjectedMapping, NcnnSystem):
    name = "ncnn-lstm"
    cell = "torch.nn.LSTM"
    family = "lstm"
    configs = GATED_LAYER_CONFIGS + (LayerConfig(1, True, bias=False, options=(("batch_first", True),)),)
    options = ("", "projection")  # proj_size: ncnn's LSTM projects (3=H, 0=P)
    mutation_options = "projection"
    mutations = TorchLSTM.mutations


class NcnnGRU(PnnxNcnnRunner, NcnnMapping, NcnnSystem):
    name = "ncnn-gru"
    cell = "torch.nn.GRU"
    family, variant = "gru", "reset_after"
    configs = GATED_LAYER_CONFIGS + (LayerConfig(1, True, bias=False, options=(("batch_first", True),)),)
    mutations = {**TorchGRU.mutations, "b_hn moved into b_in in layer 0": lambda n: _fold_b_hn_l0(n)}


def _fold_b_hn_l0(native: Native) -> Native:
    """What a one-bias GRU converter does (b_in + b_hn, b_hn = 0), in layer 0's forward direction: right for a
    reset-before GRU, wrong for PyTorch's reset-after one (r multiplies b_hn)."""
    ih, hh = native["bias_ih_l0"].copy(), native["bias_hh_l0"].copy()
    H = hh.size // 3
    ih[2 * H:] += hh[2 * H:]
    hh[2 * H:] = 0
    return {**native, "bias_ih_l0": ih, "bias_hh_l0": hh}


class NcnnRNN(PnnxNcnnRunner, NcnnMapping, NcnnSystem):
    name = "ncnn-rnn"
    cell = "torch.nn.RNN"
    family = "rnn"
    activations = ("tanh",)  # RELU: relu refused by name
    configs = TorchRNN.configs
    mutations = TorchRNN.mutations
