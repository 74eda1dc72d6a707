"""Flax's cells, nnx and linen (``SimpleCell``, ``LSTMCell``, ``GRUCell``), and the layer
``nnx.RNN`` over ``nnx.SimpleCell`` (with ``nnx.Bidirectional`` of two of them).

Each system is its mapping, its runner and its test plan, as in ``rnn_equivalence.frameworks.pytorch``:
the mappings (``FlaxSimpleCellMapping`` and the rest, NumPy only: what ``convert.mapping`` gives), the
runners (``FlaxRunner`` and its subclasses: jax, flax and optax, imported by ``start``), and the systems
(``FlaxNNXSimpleCell`` and the rest), each a runner, a mapping and its plan, by its literal name.

Flax computes every dense on batch rows with kernels stored (in, out), hence
the transposes below, and keeps one dense per gate where the framework has one.
The mappings, written once each:

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H); gates h (rnn), i f g o (LSTM), r z n (GRU)

    SimpleCell, nnx and the nnx.RNN layer:
        dense_i.kernel (I, H) = W_hx^T, dense_i.bias (H) = b_x + b_h, dense_h.kernel (H, H) = W_hh^T
        (the layer prefixes each name with its direction: "forward.", "backward.")
    SimpleCell, linen: i.kernel, i.bias, h.kernel, the same arrays under linen's module names

Activations: Flax takes functions, not names; ``FlaxRunner._activation`` is the one table from
the canonical names (rnn_equivalence.reference.activations). The gated cells take ``gate_fn`` (canonical f: LSTM
i, f, o; GRU r, z) and ``activation_fn`` (canonical g: the LSTM candidate, the GRU's n; and the
LSTM's h, in h = o * activation_fn(c)), linen and nnx alike (flax 0.12 recurrent.py). An LSTM's
g and h are thus one function: Flax cannot compute ONNX's "sigmoid,tanh,relu". Flax has no
peepholes, projection, clipping or coupled gates (check_params refuses them, naming them).

Only the SimpleCell's input dense has a bias ("input and recurrent layers are
summed so only one needs a bias"): the two canonical biases are summed (one
rounding) and come back as b_x, with b_h = 0. The cells have no switch to drop
their bias, so a bias-free canonical cell maps to zeros. The gated cells'
mappings are written above their classes below.

JAX computes float64 only with x64 switched on, which the adapters do
before creating any array.

Gradients are jax.vjp of the one function run_native calls (``_run``: the weights, inputs and
initial state in, the outputs out), so what is differentiated is the forward the suite compares,
the nnx.RNN adapter's zeroing of padded steps included. One optimizer step is optax's (optax.sgd,
optax.adam), the optimizers Flax trains with (nnx.Optimizer wraps them).

Half precision (float16, bfloat16; issue 37), Flax's systems and Equinox's (the same XLA): the cells and layers built
in that dtype (``dtype`` and ``param_dtype``), on the case's data rounded to it (NumPy float16 and ml_dtypes' bfloat16
arrays, which JAX takes as they are). What XLA computes there on a CPU was measured (jax and jaxlib 0.10.2, flax
0.12.8, equinox 0.13.8, ml_dtypes 0.6.0; the compiled HLO, and the results against the exact values):

- a matrix product on half operands (``x @ kernel``, jnp.dot, ``preferred_element_type`` left at its default, as
  Flax's denses and Equinox's cells call it) is a float32 dot between two converts: accumulated in float32 and
  rounded once. 1024 + 1000 x 0.25 comes out 1274 exactly in float16 (1424 of 1024 + 200 x 2 in bfloat16), where a
  sum in half stays 1024; a random (64, 37) @ (37, 29) equals the exact product rounded once, every element;
- every elementwise operation's result is stored in half: in bfloat16 each is a float32 operation between converts,
  all kept inside a fusion ((1024 + 0.25) + 0.25 stays 1024), in float16 each a float16 operation (computed in float32
  and rounded, the CPU having no float16 arithmetic); jnp.tanh is one operation, equal to the exact tanh rounded once
  on every half value in [-8, 8];
- but jax.nn.sigmoid is lowered as 1 / (1 + exp(-z)) (negate, exponential, add, divide: its StableHLO), each result
  stored in half: 62% (float16) and 66% (bfloat16) of the values in [-8, 8] equal the exact sigmoid rounded once, the
  worst 2.1 u (float16) and 2.2 u (bfloat16) off, relatively; jax.nn.hard_sigmoid is relu6(z + 3) / 6, z + 3 stored.

So the bound of a mixed policy (float32 within each operation, an activation one of them: what PyTorch and Keras are
judged by) does not hold: a right run exceeds it, 1.12 (float16) and 1.05 (bfloat16) times on 50-step SimpleCell
cases with sigmoid, 1.26 with the hard sigmoid, and 1.63 and 1.76 (float16), 1.56 and 1.30 (bfloat16) on one step
from exact arguments (tests/equivalence/test_half_jax.py). The bound of half throughout holds everywhere (worst 0.32)
but is too wide to catch wrong mappings in bfloat16 (an LSTM's gates i and f swapped: 0.68 of it on the mutation case,
1.53 on the one-step case; a GRU's b_hn dropped 1.51 and 1.75, below harness/detection.py's 2.5). The JAX half rows
are judged by the bound of what XLA computes (``HALF_ARITHMETIC``: a mixed policy whose sigmoid and hard sigmoid are
composed of operations stored in half, reference/tolerance.py ``Arithmetic.composed_error``; shown "float16 (float32
within each op, activations composed in half)"): at full depth (seed 0, every JAX system, 1 756 half tests) the
rows' worst err/bound is 0.15 to 0.75 (flax-nnx-rnn float16; flax-nnx and flax-linen 0.75 float16, 0.61 bfloat16;
the gated cells 0.15 to 0.32), 0.90 on the one-step grid of test_half_jax.py; every wrong mapping caught on the
mutation case in both formats, none pinned below it (``mutations_within_bound``). The least: an LSTM's gates i and f
swapped in bfloat16 (the input denses ii and if alone), 2.52 times the bound, flax nnx and linen alike, a thin margin
over harness/detection.py's 2.5 (the mutation case's seed is fixed: it does not move with ``--seed``); 3.27 its hidden
kernels not transposed.
Gradients and optimizer steps do not run in half: they have no derived half bound (frameworks/plan.py,
``CAPABILITY_DTYPES``). Short of full depth flax-nnx runs float16 and equinox-gru bfloat16 (``DEFAULT_HALF``).
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import (
    Adapter, LayerConfig, Mapping, Native, NativeSpec, gate_and_candidate, import_framework, reorder_gates, scaled,
    swapped, swapped_names, transposed,
)
from rnn_equivalence.frameworks.jax_cache import use_persistent_cache
from rnn_equivalence.reference.formats import HALF_FORMATS
from rnn_equivalence.reference.params import GATED, state_keys
from rnn_equivalence.reference.stack import DIRECTIONS


# --- the mappings: NumPy only ---------------------------------------------------------------------------


def _summed_bias(params) -> np.ndarray:
    """b_x + b_h where the cell has biases; zeros where it has none (Flax cannot drop its biases)."""
    return params.b if params.has_bias else np.zeros(params.W_h.shape[0], params.dtype)


class FlaxMapping(Mapping):
    """What every Flax layout shares: the state is the cell's carry."""

    state_names = {"h": "carry"}


# SimpleCell: the module docstring's mapping, under nnx's and linen's names of the same three weights.
NNX_NAMES = ("dense_i.kernel", "dense_i.bias", "dense_h.kernel")
LINEN_NAMES = ("i.kernel", "i.bias", "h.kernel")


class FlaxSimpleCellMapping(FlaxMapping):
    """The SimpleCell mapping of the module docstring, for one cell whose names begin with ``tag``."""

    family = "rnn"
    names: tuple[str, str, str]  # kernel_i, bias_i, kernel_h: NNX_NAMES or LINEN_NAMES

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        kernel_i, bias_i, kernel_h = (tag + n for n in self.names)
        I, H = input_size, hidden_size  # a bias, with or without a canonical bias
        return {kernel_i: ((I, H), "(in_features, hidden_features)"), bias_i: ((H,), "(hidden_features,)"),
                kernel_h: ((H, H), "(hidden_features, hidden_features)")}

    def cell_to_native(self, params, tag: str) -> Native:
        kernel_i, bias_i, kernel_h = (tag + n for n in self.names)
        return {kernel_i: params.W_hx.T, bias_i: _summed_bias(params), kernel_h: params.W_hh.T}

    def cell_from_native(self, native: Native, tag: str):
        kernel_i, bias_i, kernel_h = (tag + n for n in self.names)
        bias = np.asarray(native[bias_i])
        return self.params(np.asarray(native[kernel_i]).T, np.asarray(native[kernel_h]).T, bias, np.zeros_like(bias))

    def recurrent_kernel(self, config) -> str:
        return self.tag(0, 0) + self.names[2]


class FlaxNNXSimpleCellMapping(FlaxSimpleCellMapping):
    """``nnx.SimpleCell``: dense_i.kernel, dense_i.bias, dense_h.kernel."""

    names = NNX_NAMES


class FlaxLinenSimpleCellMapping(FlaxSimpleCellMapping):
    """``linen.SimpleCell``: i.kernel, i.bias, h.kernel."""

    names = LINEN_NAMES


class FlaxNNXRNNMapping(FlaxNNXSimpleCellMapping):
    """``nnx.RNN`` over ``nnx.SimpleCell`` (one layer): the nnx SimpleCell mapping per direction, its names
    prefixed "forward." or "backward." (``nnx.Bidirectional``'s two RNNs)."""

    layer = True
    state_names = {"h": "initial_carry"}

    def tag(self, layer: int, direction: int) -> str:
        return f"{DIRECTIONS[direction]}."


# Gated cells. Flax keeps one bias per gate where the framework has one, so the mapping sums:
#   canonical LSTM gates i f g o: W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
#   LSTMCell (nnx and linen), one dense per gate and side, kernels (in, out):
#       ii/if/ig/io.kernel (I, H) = W_x gate^T, no bias;
#       hi/hf/hg/ho.kernel (H, H) = W_h gate^T, hi/hf/hg/ho.bias (H) = b_x + b_h of the gate
#       (nnx names the forget dense ``if_``: ``if`` is a keyword)
#   canonical GRU gates r z n (reset after, as Flax computes):
#   linen GRUCell: ir/iz/in.kernel (I, H) with biases, hr/hz.kernel (H, H) without, hn.kernel (H, H)
#       with bias: ir.bias = b_xr + b_hr, iz.bias = b_xz + b_hz, in.bias = b_xn, hn.bias = b_hn
#   nnx GRUCell: dense_i.kernel (I, 3H) and dense_i.bias (3H) for r z n, dense_h.kernel (H, 3H) and
#       no hidden bias at all: n = tanh(W_in x + b_in + r * (W_hn h)). There is no slot for b_hn,
#       which r multiplies: the mapping refuses a non-zero b_hn rather than drop or misplace it.
LSTM_GATES = ("i", "f", "g", "o")


def _lstm_names(forget: str, tag: str = ""):
    """Input denses ii, if (if_ in nnx), ig, io; hidden denses hi, hf, hg, ho."""
    return ([f"{tag}i{g}.kernel" for g in ("i", forget, "g", "o")], [f"{tag}h{g}.kernel" for g in LSTM_GATES],
            [f"{tag}h{g}.bias" for g in LSTM_GATES])


class FlaxLSTMMapping(FlaxMapping):
    """``LSTMCell``, nnx and linen: eight kernels and four summed biases, one dense per gate and side."""

    family = "lstm"
    state_names = {"h": "carry[1] (h)", "c": "carry[0] (c)"}  # the carry is (c, h)
    forget_name: str  # "f_" in nnx (the attribute is if_), "f" in linen

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        kernels_i, kernels_h, biases = _lstm_names(self.forget_name, tag)
        I, H = input_size, hidden_size
        spec = {n: ((I, H), "(in_features, hidden_features)") for n in kernels_i}
        spec.update({n: ((H, H), "(hidden_features, hidden_features)") for n in kernels_h})
        spec.update({n: ((H,), "(hidden_features,)") for n in biases})
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        kernels_i, kernels_h, biases = _lstm_names(self.forget_name, tag)
        b = _summed_bias(params)
        native = {}
        for k, gate in enumerate(LSTM_GATES):
            native[kernels_i[k]] = params.gate(params.W_x, gate).T
            native[kernels_h[k]] = params.gate(params.W_h, gate).T
            native[biases[k]] = params.gate(b, gate)
        return native

    def cell_from_native(self, native: Native, tag: str):
        kernels_i, kernels_h, biases = _lstm_names(self.forget_name, tag)
        b = np.concatenate([native[n] for n in biases])
        return self.params(np.vstack([np.asarray(native[n]).T for n in kernels_i]),
                           np.vstack([np.asarray(native[n]).T for n in kernels_h]), b, np.zeros_like(b))

    def recurrent_kernel(self, config) -> str:
        return "hi.kernel"  # (H, H)


class FlaxNNXLSTMMapping(FlaxLSTMMapping):
    """``nnx.LSTMCell``: the forget denses are ``if_`` and ``hf``."""

    forget_name = "f_"


class FlaxLinenLSTMMapping(FlaxLSTMMapping):
    """``linen.LSTMCell``: the forget denses are ``if`` and ``hf``."""

    forget_name = "f"


class FlaxLinenGRUMapping(FlaxMapping):
    """``linen.GRUCell``: one dense per gate and side, b_hn kept apart in hn.bias."""

    family, variant = "gru", "reset_after"
    kept_hidden_biases = ("n",)  # hn.bias holds b_hn, which r multiplies

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {}
        for g in "rzn":
            spec[f"{tag}i{g}.kernel"] = ((I, H), "(in_features, features)")
            spec[f"{tag}i{g}.bias"] = ((H,), "(features,)")
        spec.update({f"{tag}h{g}.kernel": ((H, H), "(features, features)") for g in "rzn"})
        spec[f"{tag}hn.bias"] = ((H,), "(features,)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {}
        for gate in "rzn":
            native[f"{tag}i{gate}.kernel"] = params.gate(params.W_x, gate).T
            native[f"{tag}h{gate}.kernel"] = params.gate(params.W_h, gate).T
        b = _summed_bias(params)
        zeros = np.zeros(params.hidden_size, params.dtype)
        native[f"{tag}ir.bias"] = params.gate(b, "r")
        native[f"{tag}iz.bias"] = params.gate(b, "z")
        native[f"{tag}in.bias"] = params.gate(params.b_x, "n") if params.has_bias else zeros
        native[f"{tag}hn.bias"] = params.gate(params.b_h, "n") if params.has_bias else zeros
        return native

    def cell_from_native(self, native: Native, tag: str):
        W_x = np.vstack([np.asarray(native[f"{tag}i{g}.kernel"]).T for g in "rzn"])
        W_h = np.vstack([np.asarray(native[f"{tag}h{g}.kernel"]).T for g in "rzn"])
        zero = np.zeros_like(native[f"{tag}hn.bias"])
        b_x = np.concatenate([native[f"{tag}ir.bias"], native[f"{tag}iz.bias"], native[f"{tag}in.bias"]])
        return self.params(W_x, W_h, b_x, np.concatenate([zero, zero, native[f"{tag}hn.bias"]]))

    def recurrent_kernel(self, config) -> str:
        return "hn.kernel"  # (H, H)


class FlaxNNXGRUMapping(FlaxMapping):
    """``nnx.GRUCell``: two stacked kernels (r z n along the columns), one bias, and no slot for b_hn."""

    family, variant = "gru", "reset_after"
    zero_b_hn = True  # the cell cannot hold b_hn: its cases run with b_hn = 0
    hidden_axis = 0  # dense_h.kernel is (H, 3H)

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size
        return {f"{tag}dense_i.kernel": ((I, 3 * H), "(in_features, 3*hidden_features)"),
                f"{tag}dense_i.bias": ((3 * H,), "(3*hidden_features,)"),
                f"{tag}dense_h.kernel": ((H, 3 * H), "(hidden_features, 3*hidden_features)")}

    def cell_to_native(self, params, tag: str) -> Native:
        if params.has_bias:
            b_hn = params.gate(params.b_h, "n")
            if np.any(b_hn != 0):
                raise ValueError(
                    f"{self.cell} has no slot for b_hn (the hidden bias of the n gate, which r multiplies in "
                    f"n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); expected b_hn = 0, got max |b_hn| = "
                    f"{np.max(np.abs(b_hn)):.3g}. Moving it into b_in would compute another function.")
        b = _summed_bias(params)  # r and z: the sum; n: b_in alone, since b_hn is zero
        return {f"{tag}dense_i.kernel": params.W_x.T, f"{tag}dense_i.bias": b, f"{tag}dense_h.kernel": params.W_h.T}

    def cell_from_native(self, native: Native, tag: str):
        b = np.asarray(native[f"{tag}dense_i.bias"])
        return self.params(np.asarray(native[f"{tag}dense_i.kernel"]).T, np.asarray(native[f"{tag}dense_h.kernel"]).T,
                           b, np.zeros_like(b))

    def recurrent_kernel(self, config) -> str:
        return "dense_h.kernel"  # (H, 3H): its rows are the hidden size


# --- the runners: jax, flax and optax ----------------------------------------------------------------------


class FlaxRunner:
    """Running a Flax system (the ``Runner`` methods): the framework, and the ways of building and stepping its
    cells, shared by every Flax system and Equinox's; with the checks of ``Adapter`` it is mixed with."""

    def start(self):
        jax = import_framework("jax", self.name)
        jax.config.update("jax_enable_x64", True)  # before any array exists
        use_persistent_cache(jax)  # before the first compile: each structure compiled once across runs
        self.jax, self.jnp = jax, import_framework("jax.numpy", self.name)
        self.flax = import_framework("flax", self.name)
        self.nnx = import_framework("flax.nnx", self.name)
        self.linen = import_framework("flax.linen", self.name)

    def _activation(self, name: str):
        """The function Flax is given for a canonical activation name: the one table. JAX has no
        identity, so it is written out; jax.nn.hard_sigmoid is relu6(x + 3) / 6 (its source), the
        "hard_sigmoid_relu6" of rnn_equivalence.reference.activations, not Keras 2's clip(0.2 x + 0.5, 0, 1)."""
        jax, jnp = self.jax, self.jnp
        return {"tanh": jnp.tanh, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid,
                "hard_sigmoid_relu6": jax.nn.hard_sigmoid, "identity": lambda z: z}[name]

    def activation_arguments(self, spec: str) -> dict:
        """A gated spec ("default", LSTM "f,g,h", GRU "f,g") as the cell's keywords: gate_fn = f,
        activation_fn = g, which the LSTM also applies to c (h), so h must be g."""
        f, g = gate_and_candidate(self.family, spec, self.cell, "activation_fn")
        return {"gate_fn": self._activation(f), "activation_fn": self._activation(g)}

    def _cell_arguments(self, g: str) -> dict:
        """The activations a cell is built with: a SimpleCell's ``activation_fn`` alone, a gated cell's
        ``activation_arguments``."""
        return {"activation_fn": self._activation(g)} if self.family == "rnn" else self.activation_arguments(g)

    # --- building ---------------------------------------------------------------------
    # Every build takes the native weights as JAX values, arrays or tracers alike, so that one
    # function of (weights, inputs, initial state) is both what run_native runs and what
    # gradients_native differentiates (jax.vjp): there is no second forward.
    def _nnx_cell(self, cell_class, native: Native, tag: str, input_size: int, hidden_size: int, dtype, **options):
        """An nnx cell holding the native weights named ``tag`` + "module.weight"."""
        nnx, zeros = self.nnx, self.nnx.initializers.zeros  # overwritten at once; the default init compiles a QR
        cell = cell_class(input_size, hidden_size, dtype=dtype, param_dtype=dtype, rngs=nnx.Rngs(0),
                          kernel_init=zeros, recurrent_kernel_init=zeros, **options)
        for name, value in native.items():
            if name.startswith(tag):
                module, weight = name[len(tag):].split(".")
                getattr(getattr(cell, module), weight)[...] = self.jnp.asarray(value)
        return cell

    def _jit(self, function):
        """``jax.jit(function)`` in a compiled run, ``function`` itself in an eager one."""
        return self.jax.jit(function) if self.compiled else function

    def _nnx_step(self, cell_class, input_size: int, hidden_size: int, dtype, **options):
        """One step of an nnx cell, jitted (eager nnx calls cost milliseconds each), as a function of the
        native weights: step(native, carry, x) -> carry. The cell is built inside, on the weights given."""
        return self._jit(lambda native, carry, x: self._nnx_cell(cell_class, native, "", input_size, hidden_size,
                                                                  dtype, **options)(carry, x)[0])

    def _linen_step(self, cell):
        """One step of a linen cell, jitted, with the native weights ("module.weight") as its params:
        step(native, carry, x) -> carry."""
        def params(native):
            nested = {}
            for name, value in native.items():
                module, weight = name.split(".")
                nested.setdefault(module, {})[weight] = value
            return {"params": nested}

        return self._jit(lambda native, carry, x: cell.apply(params(native), carry, x)[0])

    # --- the framework's own weights --------------------------------------------------
    def _nnx_shapes(self, module, rename=lambda name: name) -> dict[str, tuple[int, ...]]:
        """Every parameter of a freshly built nnx module, by its dotted path."""
        nnx = self.nnx
        return {rename(".".join(str(p) for p in path)): tuple(variable[...].shape)
                for path, variable in nnx.to_flat_state(nnx.state(module, nnx.Param))}

    def _linen_shapes(self, cell, input_size: int) -> dict[str, tuple[int, ...]]:
        """Every parameter of a linen cell initialised on a batch of one."""
        key = self.jax.random.PRNGKey(0)
        x = self.jnp.zeros((1, input_size))
        variables = cell.init(key, cell.initialize_carry(key, x.shape), x)
        return {f"{module}.{name}": tuple(value.shape)
                for module, weights in variables["params"].items() for name, value in weights.items()}

    # --- running a cell -----------------------------------------------------------------
    def _step(self, input_size: int, hidden_size: int, dtype, g: str):
        """The cell's step as a function of the native weights (``_nnx_step``, ``_linen_step``)."""
        raise NotImplementedError

    def _run(self, native: Native, xs, state, config, g: str, padding=None, scanned=False):
        """The checked run as a JAX function and its arguments: forward(weights, inputs, start) -> the
        outputs run_native returns, and ``state_gradient``, which maps the start's gradient to the
        initial state's keys. A cell runs from every state over (batch, H) (cell_state: zeros where
        not given), so the given state[key] (1, batch, H) receives start[key]'s gradient. The steps are
        a Python loop over the jitted step, or with ``scanned`` one ``jax.lax.scan`` of it (the same step,
        for a function compiled whole: its size does not grow with T)."""
        jnp, lstm = self.jnp, self.family == "lstm"
        dtype, H = self.check_call(native, xs, state, config, g)
        if padding is not None:
            self.check_padding(padding, xs)  # a cell takes no lengths: refused, naming them
        # The jitted step, once per cell and batch: any T, a state given or not (the key of one step's run).
        step = self.built_once(self.compile_key(native, xs[:1], None, config, g),
                               lambda: self._step(xs.shape[2], H, dtype, g))

        def forward(weights, inputs, start):
            carry = (start["c"], start["h"]) if lstm else start["h"]  # an LSTM's carry is (c, h)
            if scanned:  # every step's carry is both the next step's and one of the outputs
                _, carries = self.jax.lax.scan(lambda carry, x: (step(weights, carry, x),) * 2, carry, inputs)
                return {"h": carries[1], "c": carries[0]} if lstm else {"h": carries}
            trace = {key: [] for key in state_keys(self.family)}
            for t in range(inputs.shape[0]):
                carry = step(weights, carry, inputs[t])
                trace["h"].append(carry[1] if lstm else carry)
                if lstm:
                    trace["c"].append(carry[0])
            return {key: jnp.stack(values) for key, values in trace.items()}

        start = self.cell_state(state, xs.shape[1], H, dtype)

        def state_gradient(start_gradient):
            return {key: start_gradient[key][None] for key in (state or {})}

        return forward, (self._jax_values(native), jnp.asarray(xs), self._jax_values(start)), state_gradient

    def run_native(self, native: Native, xs, state, config, g: str, padding=None) -> dict:
        forward, arguments, _ = self._run(native, xs, state, config, g, padding)
        run = self.autodiff_runtime.jit(self._whole_run_key(native, xs, state, config, g, padding), forward)
        return {key: np.asarray(value) for key, value in run(*arguments).items()}

    def _whole_run_key(self, native: Native, xs, state, config, g: str, padding=None):
        """The compile key of run_native's whole run (``rnn_equivalence.frameworks.autodiff.JaxVjp``): a layer's
        (nnx.RNN scans its cell, compiled once); None for a cell, whose run loops over its compiled step
        (``_run``): one compile per cell and batch serves every T and initial state, where a whole run would
        compile per structure (the gradients do, ``gradients_native``)."""
        return self.compile_key(native, xs, state, config, g, padding) if self.layer else None

    def _jax_values(self, values):
        return None if values is None else {key: self.jnp.asarray(value) for key, value in values.items()}

    # --- gradients and one optimizer step ---------------------------------------------

    def gradients_native(self, native: Native, xs, state, config, g: str, cotangents: dict, padding=None) -> dict:
        """jax.vjp of the function run_native calls (``_run``), pulled back with the cotangents.

        Compiled whole, forward and pullback, once per structure (``JaxVjp``, the weights arguments); a
        cell's steps then in one lax.scan of its compiled step (``scanned``). An eager jax.vjp of the loop
        over the step, as run_native runs it, traces and compiles the step's linearisation and transpose
        anew for each case: measured on four Flax and Equinox cells' tests (one run each, 2 cores), 67 s cold
        and 30 s warm, against 54 s and 20 s scanned (an unrolled loop compiled whole: 103 s cold). Eagerly
        (set_compiled(False)), the loop as run_native runs it."""
        key = self.compile_key(native, xs, state, config, g, padding)
        forward, arguments, state_gradient = self._run(native, xs, state, config, g, padding, scanned=key is not None)
        _, pulled = self.autodiff_runtime.vjp(forward, arguments, cotangents, self.check_cotangents, key=key)
        weights, inputs, start = self.jax.tree_util.tree_map(np.asarray, pulled)
        return {"weights": weights, "inputs": inputs, "state": {} if state is None else state_gradient(start)}

    def optimizer_step_native(self, native: Native, xs, state, config, g: str, cotangents: dict, optimizer: dict,
                              padding=None) -> Native:
        """One optax step (optax.sgd, optax.adam; fresh state) on the gradients of ``gradients_native``,
        applied by optax.apply_updates to the native weights, each of which Flax trains.

        A bias-free configuration's held zero biases are Flax parameters too, but they stand for no
        bias: they are frozen (optax.multi_transform with optax.set_to_zero, optax's way to freeze
        parameters) as a Flax user emulating a bias-free cell must, so they stay zero and map back
        to no bias. optax.masked would not do: it passes the unmasked leaves' gradients through as
        updates."""
        optax = import_framework("optax", self.name)
        transform = self._optax_transform(optax, optimizer)
        gradients = self.gradients_native(native, xs, state, config, g, cotangents, padding)["weights"]
        if not config.bias:
            labels = {name: "held" if name.endswith(".bias") else "trained" for name in native}
            transform = optax.multi_transform({"trained": transform, "held": optax.set_to_zero()}, labels)
        params = self._jax_values(native)
        updates, _ = transform.update(self._jax_values(gradients), transform.init(params), params)
        return {name: np.asarray(value) for name, value in optax.apply_updates(params, updates).items()}

    def _optax_transform(self, optax, optimizer: dict):
        """The optimizer in optax's own names (learning_rate; Adam's b1, b2, eps); a key left out is
        optax's default (adam: b1=0.9, b2=0.999, eps=1e-8, added to sqrt(nu_hat), outside the root).
        optax.sgd without momentum is plain gradient descent."""
        name, arguments = self.optimizer_arguments(optimizer, {"beta_1": "b1", "beta_2": "b2", "epsilon": "eps"})
        if "learning_rate" not in arguments:  # optax has no default for it
            raise ValueError(f"{self.cell}: {self.optimizers[name]}: expected a learning_rate, got "
                             f"{sorted(set(optimizer) - {'name'})}")
        return (optax.sgd if name == "sgd" else optax.adam)(**arguments)


class FlaxNNXCellRunner(FlaxRunner):
    """An nnx cell (``nnx.SimpleCell``, ``nnx.LSTMCell``, ``nnx.GRUCell``: the last name of ``cell``), stepped
    by ``_nnx_step``."""

    def _module_class(self):
        return getattr(self.nnx, self.cell.rsplit(".", 1)[1])

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        return self._nnx_shapes(self._module_class()(input_size, hidden_size, rngs=self.nnx.Rngs(0)))

    def _step(self, input_size, hidden_size, dtype, g):
        return self._nnx_step(self._module_class(), input_size, hidden_size, dtype, **self._cell_arguments(g))


class FlaxLinenCellRunner(FlaxRunner):
    """A linen cell (``linen.SimpleCell``, ``linen.LSTMCell``, ``linen.GRUCell``: the last name of ``cell``),
    stepped by ``_linen_step``."""

    def _module_class(self):
        return getattr(self.linen, self.cell.rsplit(".", 1)[1])

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        return self._linen_shapes(self._module_class()(features=hidden_size), input_size)

    def _step(self, input_size, hidden_size, dtype, g):
        return self._linen_step(self._module_class()(features=hidden_size, dtype=dtype, param_dtype=dtype,
                                                     **self._cell_arguments(g)))


class FlaxNNXRNNRunner(FlaxRunner):
    """``nnx.RNN`` over ``nnx.SimpleCell``, and ``nnx.Bidirectional`` of two of them, called on the sequence."""

    @classmethod
    def reads_reversed(cls, config: LayerConfig) -> bool:
        return bool(config.option("reverse"))

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        nnx = self.nnx
        rnn = lambda: nnx.RNN(nnx.SimpleCell(input_size, hidden_size, rngs=nnx.Rngs(0)))
        if not self.layout_config.bidirectional:
            return self._nnx_shapes(rnn(), lambda name: name.replace("cell.", "forward.", 1))
        renames = {"forward_rnn.cell.": "forward.", "backward_rnn.cell.": "backward."}

        def rename(name):
            prefix = next((p for p in renames if name.startswith(p)), None)
            return name if prefix is None else renames[prefix] + name[len(prefix):]

        return self._nnx_shapes(nnx.Bidirectional(rnn(), rnn()), rename)

    def arrange(self, result: dict, config: LayerConfig) -> dict:
        outputs = result["output"]
        if config.option("keep_order"):  # read reversed, reported in input time order
            outputs = outputs[::-1]
        arranged = {"outputs": outputs if config.option("time_major") else outputs.transpose(1, 0, 2)}
        if config.option("return_carry"):
            for d in range(config.num_directions):
                arranged[f"carry {DIRECTIONS[d]}"] = result["h_n"][d]
        return arranged

    def returned_state(self, outputs: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """The carry ``return_carry=True`` returned, one per direction, as the next call's
        ``initial_carry``."""
        return {"h": np.stack([outputs[f"carry {DIRECTIONS[d]}"] for d in range(config.num_directions)])}

    def _layer(self, config: LayerConfig, g: str, input_size: int, hidden_size: int, dtype, padding=None):
        """``nnx.RNN`` (or ``nnx.Bidirectional``) as a function of the native weights, the inputs (T, batch, I)
        and the initial state ({"h": (D, batch, H)} or None), JAX values or tracers, built on those weights
        and called as ``config`` asks, ``seq_lengths`` from ``padding``: what Flax returns, (carry, outputs)
        or outputs, unmasked."""
        jnp, nnx = self.jnp, self.nnx
        time_major = bool(config.option("time_major"))
        seq_lengths = None if padding is None else jnp.asarray(padding.lengths)

        def call(native, xs, state):
            cells = [self._nnx_cell(nnx.SimpleCell, native, self.tag(0, d), input_size, hidden_size, dtype,
                                    activation_fn=self._activation(g)) for d in range(config.num_directions)]
            inputs = xs if time_major else xs.transpose(1, 0, 2)
            initial = None if state is None else tuple(state["h"][d] for d in range(config.num_directions))
            if config.bidirectional:
                layer = nnx.Bidirectional(nnx.RNN(cells[0]), nnx.RNN(cells[1], reverse=True, keep_order=True),
                                          time_major=time_major)
            else:
                layer = nnx.RNN(cells[0], time_major=time_major, reverse=bool(config.option("reverse")),
                                keep_order=bool(config.option("keep_order")))
                initial = None if initial is None else initial[0]
            return layer(inputs, initial_carry=initial, seq_lengths=seq_lengths,
                         return_carry=bool(config.option("return_carry")))

        return call

    def flax_call(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """What Flax returns for the checked arguments (``_layer``), unmasked."""
        dtype, H = self.check_call(native, xs, state, config, g)
        return self._layer(config, g, xs.shape[2], H, dtype, padding)(
            self._jax_values(native), self.jnp.asarray(xs), self._jax_values(state))

    def _run(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None, scanned=False):
        """A padded batch's padded steps zeroed with its mask: Flax leaves them as the cell computed
        them, run on over the padding ("The output elements corresponding to padding elements are NOT
        zeroed out", flax.linen.RNN's docstring; nnx.RNN is the same code), and its users mask them.
        tests/equivalence/test_padded_flax_tf1.py holds what Flax reports there. The zeroing is part of
        the function differentiated (jnp.where), so a padded step's output passes no gradient back.
        The layer takes the state as given, so its gradient is the state's own. ``scanned`` changes nothing:
        nnx.RNN scans its cell itself."""
        jnp = self.jnp
        dtype, H = self.check_call(native, xs, state, config, g)
        call = self._layer(config, g, xs.shape[2], H, dtype, padding)

        def forward(weights, inputs, initial):
            result = call(weights, inputs, initial)
            if config.option("return_carry"):
                carry, outputs = result
                carries = carry if config.bidirectional else (carry,)
            else:
                carries, outputs = (), result
            if padding is not None:
                mask = padding.mask(xs.shape[0])  # (T, batch)
                outputs = jnp.where((mask if config.option("time_major") else mask.T)[..., None], outputs, 0)
            return {"outputs": outputs, **{f"carry {DIRECTIONS[d]}": c for d, c in enumerate(carries)}}

        arguments = (self._jax_values(native), jnp.asarray(xs), self._jax_values(state))
        return forward, arguments, lambda state_gradient: state_gradient


# --- the systems: each a runner, a mapping and its test plan ----------------------------------------------


# The arithmetic the half rows of every JAX system (Flax's and Equinox's) are judged by, measured (the module
# docstring, "Half precision"): float32 within each operation, each result stored in half, and the activations
# sigmoid and hard sigmoid composed of several such operations (reference/formats.py, COMPOSED_ACTIVATION_POLICIES).
HALF_ARITHMETIC = {half: f"mixed_{half}_composed_activations" for half in HALF_FORMATS}
# Short of full depth (rnn_equivalence.harness.depth), one system of each library runs one half format, both formats
# and both libraries met: flax-nnx float16, equinox-gru bfloat16; every other JAX half row at full depth only
# (``full_depth_dtypes``: JAX compiles each structure again per dtype). Measured (2 cores, another run beside it, one
# run each; summed test durations of test_reference.py, test_padded.py, test_mutations.py and test_half_jax.py with
# --systems=flax-nnx,equinox-gru): the half rows add 1.9 s and test_half_jax.py 2.6 s with JAX's persistent cache warm,
# 5.1 s and 4.8 s without it (RNN_EQ_NO_CONVERSION_CACHE=1). At full depth the nine JAX systems' half rows are 1 756
# tests (397 s in one process).
DEFAULT_HALF = {"flax-nnx": ("float16",), "equinox-gru": ("bfloat16",)}


def full_depth_halves(name: str) -> tuple[str, ...]:
    """The half formats the JAX system ``name`` runs at full depth only: those ``DEFAULT_HALF`` does not give it."""
    return tuple(h for h in HALF_FORMATS if h not in DEFAULT_HALF.get(name, ()))


class FlaxAdapter(Adapter):
    """A Flax system: what every one declares."""

    distributions = ("flax", "jax", "optax")
    requires = ("flax", "jax")
    autodiff = "jax.vjp"
    optimizers = {"sgd": "optax.sgd", "adam": "optax.adam"}
    # Compiled (jax.jit, weights as arguments): a cell's step, once per cell and batch (``_run``), and a
    # layer's whole run (``_whole_run_key``); the gradients' forward and pullback whole, a cell's steps in
    # one lax.scan (``gradients_native``); eagerly on one case (set_compiled(False)).
    compiles = True
    # float16 and bfloat16 (issue 37): the forward capabilities only (frameworks/plan.py, CAPABILITY_DTYPES), judged
    # by the bound of the arithmetic measured (``HALF_ARITHMETIC``; the module docstring, "Half precision"); short
    # of full depth only the systems of ``DEFAULT_HALF`` run a half format, each its own (``full_depth_halves``).
    dtypes = ("float32", "float64", *HALF_FORMATS)
    arithmetic = HALF_ARITHMETIC
    full_depth_dtypes = HALF_FORMATS


# The specs compared (rnn_equivalence.reference.params). A SimpleCell takes any function: the defaults, and
# jax.nn.hard_sigmoid (JAX has no 0.2 one). A gated cell's are given as gate_fn and activation_fn
# (activation_arguments), and its activation_fn is the LSTM's g and h. Each registered class names them
# itself: registration sets ("default",) on a gated class that does not, inherited or not.
SIMPLE_CELL_ACTIVATIONS = Adapter.activations + ("hard_sigmoid_relu6",)
LSTM_ACTIVATIONS = (GATED, "hard_sigmoid_relu6,tanh,tanh", "sigmoid,relu,relu")
GRU_ACTIVATIONS = (GATED, "hard_sigmoid_relu6,tanh", "sigmoid,relu")


def _swap_dense(native: Native, a: str, b: str) -> Native:
    """Exchange two denses' weights, whatever the forget dense is called (if, if_)."""
    names = {n.split(".")[0] for n in native}
    a, b = next(n for n in names if n.rstrip("_") == a), next(n for n in names if n.rstrip("_") == b)
    out = dict(native)
    for name in native:
        module, weight = name.split(".")
        if module in (a, b):
            out[f"{b if module == a else a}.{weight}"] = native[name]
    return out


class FlaxNNXSimpleCell(FlaxNNXCellRunner, FlaxNNXSimpleCellMapping, FlaxAdapter):
    name = "flax-nnx"
    cell = "flax.nnx.SimpleCell"
    full_depth_dtypes = full_depth_halves(name)
    activations = SIMPLE_CELL_ACTIVATIONS
    mutations = {
        "dense_i.kernel not transposed": transposed("dense_i.kernel"),
        "dense_h.kernel not transposed": transposed("dense_h.kernel"),
        "dense_i.kernel and dense_h.kernel swapped": swapped("dense_i.kernel", "dense_h.kernel"),
        "dense_i.bias dropped": scaled("dense_i.bias", 0.0),
        "dense_i.bias doubled": scaled("dense_i.bias", 2.0),
    }


class FlaxLinenSimpleCell(FlaxLinenCellRunner, FlaxLinenSimpleCellMapping, FlaxAdapter):
    name = "flax-linen"
    cell = "flax.linen.SimpleCell"
    activations = SIMPLE_CELL_ACTIVATIONS
    mutations = {
        "i.kernel not transposed": transposed("i.kernel"),
        "h.kernel not transposed": transposed("h.kernel"),
        "i.kernel and h.kernel swapped": swapped("i.kernel", "h.kernel"),
        "i.bias dropped": scaled("i.bias", 0.0),
        "i.bias doubled": scaled("i.bias", 2.0),
    }


class FlaxNNXRNN(FlaxNNXRNNRunner, FlaxNNXRNNMapping, FlaxAdapter):
    """``nnx.RNN`` over ``nnx.SimpleCell``, and ``nnx.Bidirectional`` of two of them (one layer)."""

    name = "flax-nnx-rnn"
    cell = "flax.nnx.RNN(SimpleCell)"
    # Layers are tested for structure (directions, layouts, states); every activation is
    # already tested on the cell. tanh saturates, relu does not, the hard sigmoid is linear
    # between two clipped ends.
    activations = ("tanh", "relu", "hard_sigmoid_relu6")
    configs = (
        LayerConfig(1, False, options=(("return_carry", True),)),
        LayerConfig(1, False, initial_state=False, options=(("time_major", True),)),
        LayerConfig(1, False, options=(("return_carry", True), ("reverse", True))),
        LayerConfig(1, False, options=(("return_carry", True), ("reverse", True), ("keep_order", True))),
        LayerConfig(1, True, options=(("return_carry", True),)),
    )
    mutation_config = LayerConfig(1, True, options=(("return_carry", True),))
    layout_config = LayerConfig(1, True)  # nnx.Bidirectional: both directions' weights
    # seq_lengths (post-padding only: the reverse direction flips each element within its own
    # length, flip_sequences); the carry sliced at each length needs return_carry. Chunked: the
    # carry returned fed back as initial_carry.
    lengths_name = "seq_lengths"
    padded_configs = (
        LayerConfig(1, False, options=(("return_carry", True), ("time_major", True))),
        LayerConfig(1, True, options=(("return_carry", True),)),
    )
    chunked_configs = (LayerConfig(1, False, options=(("return_carry", True),)),)
    mutations = {
        "forward.dense_h.kernel not transposed": transposed("forward.dense_h.kernel"),
        "forward and backward swapped": swapped_names("forward.", "backward.", where="prefix"),
        "backward.dense_i.bias dropped": scaled("backward.dense_i.bias", 0.0),
    }


LSTM_MUTATIONS = {
    "gates i and f swapped": lambda n: _swap_dense(n, "ii", "if"),
    "hidden kernels not transposed": lambda n: {k: (v.T if k.startswith("h") and k.endswith("kernel") else v)
                                                for k, v in n.items()},
}


class FlaxNNXLSTMCell(FlaxNNXCellRunner, FlaxNNXLSTMMapping, FlaxAdapter):
    name = "flax-nnx-lstm"
    cell = "flax.nnx.LSTMCell"
    activations = LSTM_ACTIVATIONS
    mutations = LSTM_MUTATIONS


class FlaxLinenLSTMCell(FlaxLinenCellRunner, FlaxLinenLSTMMapping, FlaxAdapter):
    name = "flax-linen-lstm"
    cell = "flax.linen.LSTMCell"
    activations = LSTM_ACTIVATIONS
    mutations = LSTM_MUTATIONS


class FlaxLinenGRUCell(FlaxLinenCellRunner, FlaxLinenGRUMapping, FlaxAdapter):
    name = "flax-linen-gru"
    cell = "flax.linen.GRUCell"
    activations = GRU_ACTIVATIONS
    mutations = {
        "gates r and z swapped": lambda n: _swap_dense(_swap_dense(n, "ir", "iz"), "hr", "hz"),
        "hn.bias dropped": scaled("hn.bias", 0.0),
        "hn.bias moved into in.bias": lambda n: {**n, "in.bias": n["in.bias"] + n["hn.bias"],
                                                 "hn.bias": np.zeros_like(n["hn.bias"])},
    }


class FlaxNNXGRUCell(FlaxNNXCellRunner, FlaxNNXGRUMapping, FlaxAdapter):
    name = "flax-nnx-gru"
    cell = "flax.nnx.GRUCell"
    activations = GRU_ACTIVATIONS
    mutations = {
        "gates r and z swapped": lambda n: {**n, **{k: reorder_gates(n[k], (1, 0, 2), axis=-1)
                                                    for k in ("dense_i.kernel", "dense_i.bias", "dense_h.kernel")}},
        "dense_h.kernel transposed blockwise": lambda n: {**n, "dense_h.kernel": np.concatenate(
            [b.T for b in np.split(n["dense_h.kernel"], 3, axis=1)], axis=1)},
    }
