"""PyTorch's cells (``nn.RNNCell``, ``nn.LSTMCell``, ``nn.GRUCell``) and layers (``nn.RNN``,
``nn.LSTM``, ``nn.GRU``): two kernels and two biases per cell, for every family.

The canonical layout is PyTorch's own, so the mapping, written once here, is a renaming:

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H), gates i f g o (LSTM), r z n (GRU)
    torch:     weight_ih (G*H, I), weight_hh (G*H, H), bias_ih (G*H), bias_hh (G*H), same gate order

PyTorch computes h' = g(x W_ih^T + b_ih + h W_hh^T + b_hh) on batch rows (and the
gates alike), which is the canonical formula in the same orientation; its GRU is the
reset-after variant. The round trip is exact. The layers suffix each name with
``_l{layer}`` and, for the backward direction, ``_reverse``; layer k > 0 has
``weight_ih`` of shape (G*H, D*H).

The LSTM layer's projection (``proj_size=P``, the option "projection") is a renaming too:

    canonical: W_proj (P, H), h = W_proj (o * tanh(c)); W_h (4H, P), h has P units, c has H
    torch:     weight_hr (P, H), h_t = W_hr h_t;          weight_hh (4H, P), h0/h_n P units, c0/c_n H

and layer k > 0 reads D*P inputs. ``nn.LSTMCell`` has no projection: it refuses one (check_params).

Gradients and one optimizer step: ``forward`` builds the module and runs it, and ``run_native`` is that
forward under ``torch.no_grad``; ``gradients_native`` is ``torch.autograd.grad`` of the very same
forward, with the cotangents as ``grad_outputs``, and ``optimizer_step_native`` one step of
``torch.optim.SGD`` or ``torch.optim.Adam`` on the module's parameters after a backward through it.
The module's parameters are the native weights by name, so each gradient is PyTorch's own, per
stored tensor.

Half precision (float16, bfloat16; issue 37): the same modules built in that dtype, on the case's data
rounded to it (a NumPy float16 array becomes a torch.float16 tensor as it is; a bfloat16 one, ml_dtypes',
which torch.from_numpy does not take, goes through float32, exactly). What PyTorch's CPU kernels compute
there was measured against emulations (torch 2.13.0, 50 steps, batches 1 and 3, every family): the cells
(``nn.RNNCell``, ``nn.LSTMCell``, ``nn.GRUCell``) and ``nn.RNN``, ``nn.GRU`` in both formats and
``nn.LSTM`` in float16 are bitwise the arithmetic "float32 inside each operation, half between them":
each ``linear`` (x W^T + b, the bias included) accumulated in float32 and rounded once to the format, each
elementwise operation (the gates' sum, sigmoid, tanh, r * (W_hn h + b_hn), f * c, ...) computed in float32
and rounded. So fewer roundings than ``rnn_equivalence.reference.precision.Rounded`` (every product and
every partial sum rounded), which differs from PyTorch on half the outputs. ``nn.LSTM`` in bfloat16 takes
oneDNN's RNN on a CPU that oneDNN runs bfloat16 on (``torch.backends.mkldnn``; float16 has no such path
here): no emulation tried is bitwise; the nearest (on one 50-step case, 84% of the outputs equal, the rest
one bfloat16 ulp of h off) sums the two biases in bfloat16 and keeps the gates and c in float32, storing h
in bfloat16. The oneDNN path depends on the CPU (``mkldnn_bf16_device_check``), so that row may compute
differently on another machine. Every PyTorch half row is judged by the bound of that arithmetic
(``TestPlan.arithmetic``: "float16" data, "mixed_float16" arithmetic; reference/tolerance.py: each operation in
float32, each result stored in half), shown as "float16 (float32 within each op)"; nn.LSTM in bfloat16 is within
it too, with the margin of the others (worst err/bound 0.17 at default depth, seeds 0 to 2; 0.09 over the 50-step
cases of full depth), though not bitwise that arithmetic. The bound of a computation in half throughout
(every product and partial sum rounded, 4 to 5 times wider on these cases) holds too, a weaker claim
(tests/equivalence/test_half_torch.py), which also shows that the mixed bound is not decorative: such a
computation exceeds it where PyTorch does not. Gradients and optimizer steps do not run in half: they have
no derived half bound (frameworks/plan.py, ``CAPABILITY_DTYPES``).
"""

from __future__ import annotations

import inspect

import numpy as np

from rnn_equivalence.frameworks.base import (
    Adapter, LayerConfig, Mapping, Native, NativeSpec, gates_text, import_framework, reorder_gates, scaled, swapped,
    swapped_gates, swapped_names, transposed,
)
from rnn_equivalence.reference.formats import numpy_dtype
from rnn_equivalence.reference.params import CellParams


def as_tensor(torch, array):
    """A NumPy array as a tensor of the same dtype and values: bfloat16 (ml_dtypes', which torch.from_numpy
    refuses) through float32, exactly."""
    array = np.ascontiguousarray(array)
    if not array.flags.writeable:  # read-only (a cached reference's, a kept case's): a tensor of its own, not
        # one sharing its memory, which torch.from_numpy warns that writing to is undefined
        array = array.copy()
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(array)


def as_array(tensor) -> np.ndarray:
    """A tensor's values as a NumPy array of the same dtype: bfloat16 (ml_dtypes') through float32, exactly."""
    tensor = tensor.detach()
    if str(tensor.dtype) == "torch.bfloat16":
        return tensor.float().numpy().astype(numpy_dtype("bfloat16"))
    return tensor.numpy()


def load_parameters(torch, module, native: Native) -> None:
    with torch.no_grad():
        for name, value in native.items():
            getattr(module, name).copy_(as_tensor(torch, value))


class TorchMapping(Mapping):
    """The renaming above, for one cell whose names end in ``tag`` (a cell's tag is "")."""

    kept_hidden_biases = ("h", "i", "f", "g", "o", "r", "z", "n")  # every gate: both biases kept

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str, options=(),
                  output_size=None) -> NativeSpec:
        G, I, H = gates_text(self.family, "hidden_size"), input_size, hidden_size
        rows = (H * (1 if self.family == "rnn" else 4 if self.family == "lstm" else 3))
        projected = "projection" in options  # weight_hh's columns and h are P = proj_size wide
        spec = {f"weight_ih{tag}": ((rows, I), f"({G}, input_size)"),
                f"weight_hh{tag}": ((rows, output_size if projected else H),
                                    f"({G}, {'proj_size' if projected else 'hidden_size'})")}
        if has_bias:
            spec.update({f"bias_ih{tag}": ((rows,), f"({G},)"), f"bias_hh{tag}": ((rows,), f"({G},)")})
        if projected:
            spec[f"weight_hr{tag}"] = ((output_size, H), "(proj_size, hidden_size)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {f"weight_ih{tag}": params.W_x, f"weight_hh{tag}": params.W_h}
        if params.has_bias:
            native.update({f"bias_ih{tag}": params.b_x, f"bias_hh{tag}": params.b_h})
        if params.W_proj is not None:  # canonical W_proj (P, H) is torch's weight_hr (P, H), as is
            native[f"weight_hr{tag}"] = params.W_proj
        return native

    def cell_from_native(self, native: Native, tag: str):
        return CellParams(self.family, native[f"weight_ih{tag}"], native[f"weight_hh{tag}"],
                          native.get(f"bias_ih{tag}"), native.get(f"bias_hh{tag}"), variant=self.variant,
                          W_proj=native.get(f"weight_hr{tag}"))

    def recurrent_kernel(self, config) -> str:
        return "weight_hh" + self.tag(0, 0)


class TorchLayerMapping(TorchMapping):
    """``nn.RNN``, ``nn.LSTM``, ``nn.GRU``: the cell's names suffixed per layer and direction."""

    layer = True

    def tag(self, layer: int, direction: int) -> str:
        return f"_l{layer}" + ("_reverse" if direction else "")


class TorchProjectedMapping(TorchLayerMapping):
    """``nn.LSTM``, whose weights may hold a projection (``proj_size``): weight_hr says so, and its size."""

    def read_options(self, native: Native, config) -> tuple[tuple[str, ...], int | None]:
        """A projection iff the weights hold weight_hr (of layer 0, forward): P is its first axis."""
        name = "weight_hr" + self.tag(0, 0)
        if isinstance(native, dict) and name in native:
            return ("projection",), int(np.shape(native[name])[0])
        return (), None

    def read_hidden_size(self, native: Native, config) -> tuple[int, str]:
        """H from weight_hh's columns, or with a projection (they are P then) from weight_hr's."""
        name = "weight_hr" + self.tag(0, 0)
        if self.read_options(native, config)[0]:
            return int(np.shape(native[name])[1]), f"{name}'s shape"
        return super().read_hidden_size(native, config)


# --- the runners: PyTorch's own modules, autograd and optimizers ----------------------------------------


class TorchRunner:
    """Running a PyTorch system (the ``Runner`` methods), with the checks of ``Adapter`` it is mixed with."""

    def start(self):
        self.torch = import_framework("torch", self.name)

    def _module_class(self):
        return getattr(self.torch.nn, self.cell.split(".")[-1])

    def _options(self, g: str) -> dict:
        return {"nonlinearity": g} if self.family == "rnn" else {}

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        config = self.layout_config
        extra = {"num_layers": config.num_layers, "bidirectional": config.bidirectional} if self.layer else {}
        module = self._module_class()(input_size, hidden_size, **extra)
        return {name: tuple(p.shape) for name, p in module.named_parameters()}

    # --- gradients and one optimizer step: PyTorch's own, through ``forward`` ------------------------
    def forward(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None,
                requires_grad: bool = False) -> tuple[dict, object, dict]:
        """Build the module from ``native`` and run it: (outputs as ``run_native`` returns them, as
        tensors; the module, whose parameters are the native weights by name; the leaves
        {"inputs": (T, batch, I) as ``xs``, "state": {key: as ``state[key]``}}, requiring grad when
        ``requires_grad``). Runs with autograd as the caller has it: ``run_native`` wraps it in no_grad."""
        raise NotImplementedError

    def gradients_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                         padding=None) -> dict:
        autograd = self.autodiff_runtime
        outputs, module, leaves = self.forward(native, xs, state, config, g, padding, requires_grad=True)
        weights = [getattr(module, name) for name in native]
        _, grads = autograd.vjp(lambda: outputs, [*weights, leaves["inputs"], *leaves["state"].values()],
                                cotangents, self.check_cotangents)
        n = len(weights)
        return {"weights": {name: as_array(grad) for name, grad in zip(native, grads[:n])},
                "inputs": as_array(grads[n]),
                "state": {key: as_array(grad) for key, grad in zip(leaves["state"], grads[n + 1:])}}

    def _optimizer(self, optimizer: dict):
        """The framework's optimizer class and its arguments for ``optimizer``, by PyTorch's names
        (learning_rate: lr; beta_1, beta_2: betas; epsilon: eps), PyTorch's own defaults for those it
        leaves out."""
        torch = self.torch
        name, arguments = self.optimizer_arguments(optimizer, {"learning_rate": "lr", "epsilon": "eps"})
        if name == "sgd":
            # Plain SGD, whatever PyTorch's defaults become: no momentum, no weight decay.
            return torch.optim.SGD, {**arguments, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
                                     "nesterov": False}
        if "beta_1" in arguments or "beta_2" in arguments:  # torch takes the pair: the other one's default
            b1, b2 = inspect.signature(torch.optim.Adam).parameters["betas"].default
            arguments["betas"] = (arguments.pop("beta_1", b1), arguments.pop("beta_2", b2))
        return torch.optim.Adam, {**arguments, "weight_decay": 0.0, "amsgrad": False}  # plain Adam, not AdamW

    def optimizer_step_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                              optimizer: dict, padding=None) -> Native:
        autograd = self.autodiff_runtime
        optimizer_class, arguments = self._optimizer(optimizer)  # refused before a run
        outputs, module, _ = self.forward(native, xs, state, config, g, padding)
        weights = [getattr(module, name) for name in native]
        step = optimizer_class(weights, **arguments)  # fresh: no moments yet, step count 0
        step.zero_grad()
        autograd.backward(lambda: outputs, cotangents, self.check_cotangents)  # each parameter's .grad: dL/dw
        step.step()
        return {name: weight.detach().numpy() for name, weight in zip(native, weights)}


class TorchCellRunner(TorchRunner):
    """``nn.RNNCell``, ``nn.LSTMCell``, ``nn.GRUCell`` stepped over the sequence in Python, as a user steps them."""

    def forward(self, native: Native, xs, state, config, g: str, padding=None, requires_grad: bool = False):
        torch = self.torch
        if padding is not None:
            self.check_padding(padding, xs)  # a cell takes no lengths: refused, naming them
        dtype, H = self.check_call(native, xs, state, config, g)
        cell = self._module_class()(xs.shape[2], H, bias=config.bias, dtype=getattr(torch, dtype.name),
                                    **self._options(g))
        load_parameters(torch, cell, native)
        inputs = as_tensor(torch, xs).requires_grad_(requires_grad)
        # The given state as given, (1, batch, H), so that its gradient comes back in that shape.
        given = {key: as_tensor(torch, value).requires_grad_(requires_grad) for key, value in (state or {}).items()}
        carry = {key: given[key][0] if key in given else as_tensor(torch, zeros)  # zeros where not given
                 for key, zeros in self.cell_state(None, xs.shape[1], H, dtype).items()}
        trace = {key: [] for key in carry}
        for x in inputs:
            if self.family == "lstm":
                h, c = cell(x, (carry["h"], carry["c"]))
                carry = {"h": h, "c": c}
            else:
                carry = {"h": cell(x, carry["h"])}
            for key, value in carry.items():
                trace[key].append(value)
        return {key: torch.stack(values) for key, values in trace.items()}, cell, {"inputs": inputs, "state": given}

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        with self.torch.no_grad():
            outputs, _, _ = self.forward(native, xs, state, config, g)
        return {key: as_array(value) for key, value in outputs.items()}


class TorchLayerRunner(TorchRunner):
    """``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` called on the sequence: packed where a batch is padded."""

    def arrange(self, result, config: LayerConfig):
        # batch_first applies to the input and output, not to the final states.
        output = result["output"]
        arranged = {"output": output.transpose(1, 0, 2) if config.option("batch_first") else output,
                    "h_n": result["h_n"]}
        if "c_n" in result:
            arranged["c_n"] = result["c_n"]
        return arranged

    def module(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """The loaded module and its arguments, in the layout ``config`` asks for; a padded batch
        packed (``pack_padded_sequence``, which refuses pre-padding's layout by construction:
        it takes each element's first ``lengths[b]`` steps)."""
        module, args, _ = self.build(native, xs, state, config, g, padding)
        return module, args

    def build(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None,
              requires_grad: bool = False):
        """``module``'s module and arguments, and the leaves its arguments are made from: the inputs as
        given, (T, batch, I), and the initial states, requiring grad when ``requires_grad``."""
        torch = self.torch
        dtype, H = self.check_call(native, xs, state, config, g)
        batch_first = bool(config.option("batch_first"))
        _, P = self.read_options(native, config)
        module = self._module_class()(xs.shape[2], H, num_layers=config.num_layers, bias=config.bias,
                                      batch_first=batch_first, bidirectional=config.bidirectional,
                                      dtype=getattr(torch, dtype.name), **self._options(g),
                                      **({"proj_size": P} if P else {}))
        load_parameters(torch, module, native)
        # Transposed in torch, not in NumPy, so that the gradient reaches the inputs in the canonical layout.
        leaf = as_tensor(torch, xs).requires_grad_(requires_grad)
        inputs = leaf.transpose(0, 1).contiguous() if batch_first else leaf
        if padding is not None:
            inputs = torch.nn.utils.rnn.pack_padded_sequence(
                inputs, torch.tensor(padding.lengths), batch_first=batch_first,
                enforce_sorted=bool(config.option("enforce_sorted")))
        if state is None:
            return module, (inputs,), {"inputs": leaf, "state": {}}
        given = {key: as_tensor(torch, state[key]).requires_grad_(requires_grad)
                 for key in ("h", "c")[:2 if self.family == "lstm" else 1]}
        leaves = {"inputs": leaf, "state": given}
        if self.family == "lstm":
            return module, (inputs, (given["h"], given["c"])), leaves
        return module, (inputs, given["h"]), leaves

    def forward(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None,
                requires_grad: bool = False):
        module, args, leaves = self.build(native, xs, state, config, g, padding, requires_grad)
        output, final = module(*args)
        if padding is not None:  # zeros on the padded steps, T steps as given
            output, _ = self.torch.nn.utils.rnn.pad_packed_sequence(
                output, batch_first=bool(config.option("batch_first")), total_length=xs.shape[0])
        if self.family == "lstm":
            return {"output": output, "h_n": final[0], "c_n": final[1]}, module, leaves
        return {"output": output, "h_n": final}, module, leaves

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        with self.torch.no_grad():
            outputs, _, _ = self.forward(native, xs, state, config, g, padding)
        return {key: as_array(value) for key, value in outputs.items()}


# --- the systems: each a mapping, a runner and its test plan ------------------------------------------


class TorchAdapter(Adapter):
    """A PyTorch system: what every one declares."""

    distributions = ("torch",)
    requires = ("torch",)
    # float16 and bfloat16: the forward capabilities in the designs (frameworks/plan.py, CAPABILITY_DTYPES), the
    # gradients by name (tests/equivalence/test_half_torch.py), no optimizer step; what PyTorch's CPU kernels compute
    # in them: the module's docstring.
    dtypes = ("float32", "float64", "float16", "bfloat16")
    arithmetic = {"float16": "mixed_float16", "bfloat16": "mixed_bfloat16"}  # float32 within each operation
    autodiff = "torch.autograd"
    optimizers = {"sgd": "torch.optim.SGD", "adam": "torch.optim.Adam"}


class TorchCell(TorchCellRunner, TorchMapping, TorchAdapter):
    """The cells' plan: ``TestPlan``'s defaults; each system below sets its own activations and mutations."""


class TorchLayer(TorchLayerRunner, TorchLayerMapping, TorchAdapter):
    """The layers' plan: configurations of layers, directions and ``batch_first``, padded and chunked."""

    layout_config = LayerConfig(2, True)
    mutation_config = LayerConfig(3, True, options=(("batch_first", False),))
    mutations = {
        "forward and reverse swapped in layer 0": swapped_names("_l0", "_l0_reverse"),
        "layers 1 and 2 swapped": lambda n: swapped_names("_l1_reverse", "_l2_reverse")(swapped_names("_l1", "_l2")(n)),
    }

    # Packed batches: lengths sorted longest first (enforce_sorted=True, the default) or in any order
    # (False: PyTorch sorts, and puts the final states back in the batch's order).
    padded_configs = (
        LayerConfig(1, False, options=(("batch_first", False), ("enforce_sorted", True))),
        LayerConfig(2, True, options=(("batch_first", True), ("enforce_sorted", False))),
    )
    chunked_configs = (LayerConfig(2, False, options=(("batch_first", False),)),)


class TorchRNNCell(TorchCell):
    name = "torch"
    cell = "torch.nn.RNNCell"
    family = "rnn"
    activations = ("tanh", "relu")  # `nonlinearity` accepts only these
    mutations = {
        "weight_ih transposed": transposed("weight_ih"),
        "weight_hh transposed": transposed("weight_hh"),
        "weight_ih and weight_hh swapped": swapped("weight_ih", "weight_hh"),
        "bias_hh dropped": scaled("bias_hh", 0.0),
        "bias_ih doubled": scaled("bias_ih", 2.0),
    }


class TorchLSTMCell(TorchCell):
    name = "torch-lstm"
    cell = "torch.nn.LSTMCell"
    family = "lstm"
    mutations = {
        "gates i and f swapped": swapped_gates("weight_ih", 0, 1, 4, axis=0),
        "gates g and o swapped in weight_hh": swapped_gates("weight_hh", 2, 3, 4, axis=0),
        "bias_hh dropped": scaled("bias_hh", 0.0),
        "weight_hh transposed blockwise": lambda n: {**n, "weight_hh": np.concatenate(
            [b.T for b in np.split(n["weight_hh"], 4)])},
    }


def _fold_b_hn(native: Native) -> Native:
    """What a converter to a one-bias GRU does: b_in + b_hn, b_hn = 0. Right for reset
    before, wrong for PyTorch's reset after, where r multiplies b_hn."""
    H = native["bias_hh"].size // 3
    ih, hh = native["bias_ih"].copy(), native["bias_hh"].copy()
    ih[2 * H:] += hh[2 * H:]
    hh[2 * H:] = 0
    return {**native, "bias_ih": ih, "bias_hh": hh}


def _drop_b_hn(native: Native) -> Native:
    hh = native["bias_hh"].copy()
    hh[2 * hh.size // 3:] = 0
    return {**native, "bias_hh": hh}


class TorchGRUCell(TorchCell):
    name = "torch-gru"
    cell = "torch.nn.GRUCell"
    family, variant = "gru", "reset_after"
    mutations = {
        "gates r and z swapped (the Keras order)": lambda n: {
            **n, **{k: reorder_gates(n[k], (1, 0, 2)) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}},
        "b_hn dropped": _drop_b_hn,
        "b_hn moved into b_in": _fold_b_hn,
    }



class TorchRNN(TorchLayer):
    name = "torch-rnn"
    cell = "torch.nn.RNN"
    family = "rnn"
    activations = ("tanh", "relu")
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(1, True, initial_state=False, options=(("batch_first", True),)),
        LayerConfig(2, False, bias=False, options=(("batch_first", True),)),
        LayerConfig(2, True, options=(("batch_first", False),)),
        LayerConfig(3, True, options=(("batch_first", True),)),
        LayerConfig(3, False, bias=False, initial_state=False, options=(("batch_first", False),)),
    )
    mutations = {
        "weight_hh_l0 transposed": transposed("weight_hh_l0"),
        **TorchLayer.mutations,
        "bias_hh_l2_reverse dropped": scaled("bias_hh_l2_reverse", 0.0),
    }
    # The last layer's backward bias moves its outputs by less than the bfloat16 bound of three bidirectional
    # layers: err/bound 0.44 (of the bound of float32 within each op; 0.059 of the bound in bfloat16 throughout;
    # 9.8e3 in float32). In float16 it is caught: 5.06.
    mutations_within_bound = {"bfloat16": ("bias_hh_l2_reverse dropped",)}


GATED_LAYER_CONFIGS = (
    LayerConfig(1, False, options=(("batch_first", False),)),
    LayerConfig(2, True, options=(("batch_first", True),)),
    LayerConfig(3, False, initial_state=False, options=(("batch_first", False),)),
    LayerConfig(2, True, initial_state=False, options=(("batch_first", False),)),
)


def _gates_swapped_in_layer_1(native: Native) -> Native:
    weight = native["weight_hh_l1"]
    H = native["weight_hr_l1"].shape[1] if "weight_hr_l1" in native else weight.shape[1]  # P columns with a projection
    return swapped_gates("weight_hh_l1", 0, 1, weight.shape[0] // H, axis=0)(native)


class TorchLSTM(TorchProjectedMapping, TorchLayer):
    name = "torch-lstm-rnn"
    cell = "torch.nn.LSTM"
    family = "lstm"
    configs = GATED_LAYER_CONFIGS
    options = ("", "projection")  # proj_size; no peepholes, clips or other activations in nn.LSTM
    mutation_options = "projection"  # the 3-layer bidirectional mutation case, projected
    mutations = {**TorchLayer.mutations, "gates 0 and 1 swapped in weight_hh_l1": _gates_swapped_in_layer_1,
                 # the projection: shapes refuse a transposed one (P < H), values a swapped one
                 "weight_hr transposed": transposed("weight_hr_l0"),
                 "weight_hr of the two directions swapped": swapped("weight_hr_l0", "weight_hr_l0_reverse")}
    # err/bound on the mutation case, of the bound of float32 within each op (of the bound in half throughout):
    # gates swapped in weight_hh_l1 0.23 (0.037) in float16; in bfloat16 0.040 (0.0067), no more than the right
    # run's own (the worst element is elsewhere); 356 in float32.
    mutations_within_bound = {"float16": ("gates 0 and 1 swapped in weight_hh_l1",),
                              "bfloat16": ("gates 0 and 1 swapped in weight_hh_l1",)}


class TorchGRU(TorchLayer):
    name = "torch-gru-rnn"
    cell = "torch.nn.GRU"
    family, variant = "gru", "reset_after"
    configs = GATED_LAYER_CONFIGS
    mutations = {**TorchLayer.mutations, "gates 0 and 1 swapped in weight_hh_l1": _gates_swapped_in_layer_1}
    # err/bound on the mutation case, of the bound of float32 within each op (of the bound in half throughout):
    # gates swapped in weight_hh_l1 0.58 (0.16) in float16; in bfloat16 0.040 (0.0095), no more than the right
    # run's own (the worst element is elsewhere); 1.6e3 in float32.
    mutations_within_bound = {"float16": ("gates 0 and 1 swapped in weight_hh_l1",),
                              "bfloat16": ("gates 0 and 1 swapped in weight_hh_l1",)}
