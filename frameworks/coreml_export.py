"""Core ML, at the level of the specification: PyTorch's ``nn.LSTM`` and ``nn.RNN`` converted by
``coremltools.convert`` into a MIL program, whose recurrent ops' weights and attributes are read back and
evaluated with the reference's equations, as the ops' documentation states them. No Core ML runtime runs
(predictions need macOS): what is checked is what the converter writes into the program, read as the op
is documented to compute it, not what Core ML computes on a device (docs/SYSTEMS.md, "Specification level").

The systems' native weights are the MIL ops' inputs, per layer ``k`` (the mapping below, NumPy only):

    torch (canonical):  weight_ih (G*H, I), weight_hh (G*H, H), bias_ih (G*H), bias_hh (G*H)
                        LSTM gates i f g o; two biases
    MIL lstm / rnn:     weight_ih (G*H, I), weight_hh (G*H, H), bias (G*H) = bias_ih + bias_hh
                        LSTM gates i f o z (z the cell gate, torch's g): "ifoz"; one bias

``lstm``'s backward direction is the same op's ``weight_ih_back``, ``weight_hh_back``, ``bias_back``
(``direction="bidirectional"``); named here ``weight_ih_back_l{k}`` and so on. The equations are
coremltools/converters/mil/mil/ops/defs/iOS15/recurrent.py's docstrings (iOS17's and iOS18's ``lstm`` and
``rnn`` only widen the dtypes): the LSTM's are PyTorch's with the one summed bias, the RNN's
``h_t = activation(W_ih x_t + W_hh h_(t-1) + b)``.

What coremltools 9.0 converts (measured, tests/equivalence/test_coreml.py): ``nn.LSTM`` to one fused ``lstm``
op per layer (both directions in one op), ``nn.RNN`` to one ``rnn`` op per layer, unidirectional only
(bidirectional: "Bidirectional simple RNN not supported"); ``nn.GRU`` to a ``while_loop`` of matrix
products, never the ``gru`` op, whose documented equation keeps b_hn outside the reset product
(coremltools#1124): so no GRU system is read at this level (the loop's body is not an op whose equation
is documented). The ops take no lengths: no padded batches.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace

import numpy as np

from rnn_equivalence.frameworks.base import Adapter, LayerConfig, Mapping, Native, NativeSpec, distribution_version
from rnn_equivalence.frameworks.base import import_framework, scaled, swapped, swapped_gates, transposed
from rnn_equivalence.frameworks.mapping import gates_text, mapping_of, reorder_gates
from rnn_equivalence.frameworks.pytorch import GATED_LAYER_CONFIGS  # data only: pytorch.py imports torch lazily

ENVIRONMENT = "coreml"  # the nox session whose environment holds coremltools
RECURRENT_OPS = ("lstm", "gru", "rnn")  # the MIL ops whose equations are documented
# The op each family's conversion emits (coremltools 9.0, torch frontend), checked in test_coreml.py.
OPERATORS = {"lstm": "lstm", "rnn": "rnn", "gru": "while_loop"}
IFOZ = (0, 1, 3, 2)  # canonical i f g o -> MIL i f o z, and back (the permutation is its own inverse)


# --- the mapping: the MIL ops' inputs, NumPy only ------------------------------------------------------


class CoreMLMapping(Mapping):
    """The MIL ``lstm`` / ``rnn`` op's inputs of each layer (the module's docstring): one bias, the sum."""

    layer = True
    kept_hidden_biases = ()  # one bias per gate: bias = bias_ih + bias_hh

    def tag(self, layer: int, direction: int) -> str:
        return ("_back" if direction else "") + f"_l{layer}"

    def _order(self, array):
        return reorder_gates(np.asarray(array), IFOZ) if self.family == "lstm" else array

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str, options=(),
                  output_size=None) -> NativeSpec:
        G = gates_text(self.family, "H") + (", gates i f o z" if self.family == "lstm" else "")
        rows = hidden_size * (4 if self.family == "lstm" else 1)
        spec = {f"weight_ih{tag}": ((rows, input_size), f"({G}, I)"),
                f"weight_hh{tag}": ((rows, hidden_size), f"({G}, H)")}
        if has_bias:
            spec[f"bias{tag}"] = ((rows,), f"({G},) = bias_ih + bias_hh")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {f"weight_ih{tag}": self._order(params.W_x), f"weight_hh{tag}": self._order(params.W_h)}
        if params.has_bias:
            native[f"bias{tag}"] = self._order(params.b)
        return native

    def cell_from_native(self, native: Native, tag: str):
        b = native.get(f"bias{tag}")
        return self.params(self._order(native[f"weight_ih{tag}"]), self._order(native[f"weight_hh{tag}"]),
                           None if b is None else self._order(b), None if b is None else np.zeros_like(b))

    def recurrent_kernel(self, config) -> str:
        return "weight_hh" + self.tag(0, 0)


# --- the runner: convert, read back, evaluate the documented equations -------------------------------


class CoreMLSpecRunner:
    """Converts the PyTorch layer holding the weights with ``coremltools.convert`` into a MIL program, reads its
    recurrent ops back (``read_program``) and evaluates the reference's equations on what it read."""

    runtime = "none: the MIL program's ops read back and evaluated by the reference's equations"
    last_operators: frozenset = frozenset()

    def start(self):
        self.torch = import_framework("torch", self.name)
        with contextlib.redirect_stderr(io.StringIO()):  # "Failed to load libcoremlpython" (no macOS runtime)
            self.ct = import_framework("coremltools", self.name)

    def describe(self) -> str:
        return (f"coremltools {distribution_version('coremltools')} convert({self.cell}): its MIL "
                f"'{OPERATORS[self.family]}' ops read back, specification level (no Core ML runtime)")

    def torch_module(self, native: Native, xs, state, config: LayerConfig, g: str):
        """The PyTorch layer a user writes, holding ``native``'s weights (as PyTorch's mapping lays them out),
        wrapped to take the initial states as tensors and return a flat tuple; and its example arguments."""
        from rnn_equivalence.frameworks.pytorch import TorchLSTM, TorchRNN, load_parameters

        torch = self.torch
        stack = self.from_native(native, config)
        torch_mapping = mapping_of(TorchLSTM if self.family == "lstm" else TorchRNN)  # PyTorch's, NumPy only
        layer = getattr(torch.nn, {"lstm": "LSTM", "rnn": "RNN"}[self.family])(
            xs.shape[2], stack.hidden_size, num_layers=config.num_layers, bias=config.bias,
            batch_first=bool(config.option("batch_first")), bidirectional=config.bidirectional,
            **({"nonlinearity": g} if self.family == "rnn" else {}))
        load_parameters(torch, layer, torch_mapping.to_native(stack, config))
        lstm = self.family == "lstm"

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, x, *states):
                out, final = self.layer(x, (tuple(states) if lstm else states[0]) if states else None)
                return (out, *final) if lstm else (out, final)

        x = torch.from_numpy(np.ascontiguousarray(xs.transpose(1, 0, 2) if config.option("batch_first") else xs))
        states = [torch.from_numpy(np.ascontiguousarray(state[k])) for k in ("h", "c")[:1 + lstm]] if state else []
        return Wrapped().eval(), (x, *states)

    def program(self, native: Native, xs, state, config: LayerConfig, g: str):
        """The MIL program ``coremltools.convert`` makes of the traced module, in float32 (``milinternal``: the
        program an ML program is written from, after its passes)."""
        torch, ct = self.torch, self.ct
        module, args = self.torch_module(native, xs, state, config, g)
        traced = torch.jit.trace(module, args)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return ct.convert(traced, inputs=[ct.TensorType(shape=tuple(a.shape)) for a in args],
                              convert_to="milinternal", compute_precision=ct.precision.FLOAT32,
                              minimum_deployment_target=ct.target.iOS15)

    def read_program(self, program, config: LayerConfig, given_state: bool, g: str) -> Native:
        """The recurrent ops' weights, in this system's native layout, after checking every attribute the
        evaluation assumes (one op per layer, the direction, every step output, the activations, the initial
        state fed from the inputs or zeros); anything else is an error naming the op and what it holds."""
        ops = [op for op in program.functions["main"].operations if op.op_type in RECURRENT_OPS]
        self.last_operators = frozenset(operator_types(program.functions["main"]))
        if len(ops) != config.num_layers or any(op.op_type != self.family for op in ops):
            raise ValueError(f"{self.name}: expected {config.num_layers} MIL '{self.family}' op(s), one per layer; "
                             f"the program holds {[op.op_type for op in ops]}")
        expected = {"direction": "bidirectional" if config.bidirectional else "forward", "output_sequence": True,
                    **({"recurrent_activation": "sigmoid", "cell_activation": "tanh", "activation": "tanh"}
                       if self.family == "lstm" else {"activation": g})}
        native = {}
        for k, op in enumerate(ops):
            held = {name: op.inputs[name].val for name in expected}
            if held != expected:
                raise ValueError(f"{self.name}: MIL op {op.name!r} holds {held}, the evaluation assumes {expected}")
            for key in ("initial_h", "initial_c")[:2 if self.family == "lstm" else 1]:
                value = op.inputs[key].val  # None: computed from the program's inputs
                if given_state != (value is None) or (value is not None and np.any(value)):
                    raise ValueError(f"{self.name}: MIL op {op.name!r}'s {key} is "
                                     f"{'a constant' if value is not None else 'computed'}; expected "
                                     f"{'the given state' if given_state else 'zeros'}")
            for d in range(2 if config.bidirectional else 1):
                suffix = "_back" if d else ""
                for name in ("weight_ih", "weight_hh", "bias"):
                    var = op.inputs.get(name + suffix)
                    if var is not None:
                        native[f"{name}{self.tag(k, d)}"] = np.asarray(var.val)
        return native

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        from rnn_equivalence.reference.stack import run_stack

        if padding is not None:
            self.check_padding(padding, xs)  # the MIL ops take no lengths: refused, naming why
        dtype, _ = self.check_call(native, xs, state, config, g)
        program = self.program(native, xs, state, config, g)
        read = self.from_native(self.read_program(program, config, state is not None, g), config)
        if self.family == "rnn":  # the ops' activation, which read_program found to be g (weights carry none)
            read = read.map(lambda params: replace(params, activation=g))
        # The documented equations in float64 on the program's float32 weights: the specification's function
        # of what the converter wrote, returned in float32 (the program's type).
        result = run_stack(read.astype("float64"), np.asarray(xs, np.float64),
                           None if state is None else {k: np.asarray(v, np.float64) for k, v in state.items()})
        if config.option("batch_first"):
            result["output"] = result["output"].transpose(1, 0, 2)
        keys = ("output", "h_n", "c_n")[:3 if self.family == "lstm" else 2]  # what PyTorch's layer returns
        return {key: result[key].astype(dtype) for key in keys}

    def arrange(self, result, config: LayerConfig):
        from rnn_equivalence.frameworks.pytorch import TorchLayerRunner

        return TorchLayerRunner.arrange(self, result, config)  # PyTorch's output layout, batch_first included


def operator_types(block) -> set[str]:
    """Every op type in a MIL block, the blocks of its ops (a while_loop's body) included."""
    found = set()
    for op in block.operations:
        found.add(op.op_type)
        for inner in op.blocks:
            found |= operator_types(inner)
    return found


# --- the systems --------------------------------------------------------------------------------------


PROJECTION = "the MIL lstm op has no projection (proj_size)"
PADDING = "the MIL lstm and rnn ops take no sequence lengths"


class CoreMLSystem(CoreMLSpecRunner, CoreMLMapping, Adapter):
    """What every Core ML system declares: float32 (``compute_precision=FLOAT32``), no gradients, no padding."""

    environment = ENVIRONMENT
    converter = "coremltools.convert"  # a converted system: the depth rules of rnn_equivalence.harness.depth
    distributions = ("coremltools", "torch")
    requires = ("coremltools", "torch")
    dtypes = ("float32",)
    autodiff, optimizers = "", {}
    padded_configs: tuple[LayerConfig, ...] = ()  # PADDING
    chunked_configs = (LayerConfig(2, False, options=(("batch_first", False),)),)
    layout_config = LayerConfig(2, False)


def _directions_swapped(layer: int):
    def mutate(native):
        out = dict(native)
        for name in ("weight_ih", "weight_hh", "bias"):
            a, b = f"{name}_l{layer}", f"{name}_back_l{layer}"
            if a in native:
                out[a], out[b] = native[b], native[a]
        return out
    return mutate


class CoreMLLSTM(CoreMLSystem):
    name = "coreml-lstm"
    cell = "torch.nn.LSTM"
    family = "lstm"
    configs = GATED_LAYER_CONFIGS
    options = ("",)
    refused_options = {"projection": PROJECTION}
    layout_config = LayerConfig(2, True)
    mutation_config = LayerConfig(3, True, options=(("batch_first", False),))
    mutations = {
        "gates o and z in torch's order (ifzo)": lambda n: {
            k: reorder_gates(np.asarray(v), IFOZ) for k, v in n.items()},
        "gates i and f swapped in weight_ih_l0": swapped_gates("weight_ih_l0", 0, 1, 4, axis=0),
        "weight_hh_l1 transposed blockwise": lambda n: {**n, "weight_hh_l1": np.concatenate(
            [b.T for b in np.split(n["weight_hh_l1"], 4)])},
        "bias_l0 dropped": scaled("bias_l0", 0.0),
        "bias_back_l2 doubled": scaled("bias_back_l2", 2.0),
        "forward and backward swapped in layer 0": _directions_swapped(0),
    }


class CoreMLRNN(CoreMLSystem):
    name = "coreml-rnn"
    cell = "torch.nn.RNN"
    family = "rnn"
    activations = ("tanh", "relu")
    # Unidirectional only: coremltools 9.0 refuses a bidirectional nn.RNN (test_coreml.py).
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(1, False, initial_state=False, options=(("batch_first", True),)),
        LayerConfig(2, False, bias=False, options=(("batch_first", True),)),
        LayerConfig(3, False, bias=False, initial_state=False, options=(("batch_first", False),)),
    )
    mutation_config = LayerConfig(3, False, options=(("batch_first", False),))
    mutations = {
        "weight_hh_l0 transposed": transposed("weight_hh_l0"),
        "weight_ih_l1 and weight_hh_l1 swapped": swapped("weight_ih_l1", "weight_hh_l1"),
        "bias_l2 dropped": scaled("bias_l2", 0.0),
        "bias_l0 doubled": scaled("bias_l0", 2.0),
        "layers 1 and 2 swapped": lambda n: {**n, **{f"{w}_l{a}": n[f"{w}_l{b}"] for a, b in ((1, 2), (2, 1))
                                                     for w in ("weight_ih", "weight_hh", "bias")}},
    }
