"""Equinox's cells (``equinox.nn.LSTMCell``, ``equinox.nn.GRUCell``): JAX modules of one step on one
unbatched vector, run over a batch with ``jax.vmap``, as Equinox's documentation has users do.

Equinox keeps PyTorch's orientation and gate orders, with one bias per cell and, for the GRU, a second
bias for the n gate alone. The mappings, written once each:

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H); gates i f g o (LSTM), r z n (GRU)

    LSTMCell: weight_ih (4H, I) = W_x, weight_hh (4H, H) = W_h, bias (4H) = b_x + b_h, gates i f g o
              (its __call__: lin = weight_ih @ x + weight_hh @ h + bias; i, f, g, o = split(lin, 4))
    GRUCell:  weight_ih (3H, I) = W_x, weight_hh (3H, H) = W_h, gates r z n,
              bias (3H) = [b_xr + b_hr, b_xz + b_hz, b_xn], bias_n (H) = b_hn
              (its __call__: n = tanh(i_n + r * (weight_hh_n @ h + bias_n)), the reset-after GRU;
              h' = n + z * (h - n), which is (1 - z) n + z h)

So PyTorch's two GRU biases map as: bias = bias_ih + [bias_hh_r, bias_hh_z, 0], bias_n = bias_hh_n; the
LSTM's bias is bias_ih + bias_hh. A sum is one rounding, and comes back as b_x with b_h = 0.
``use_bias=False`` drops both biases (the bias-free configuration). The activations are fixed
(sigmoid, tanh): the default spec only. No peepholes, projection, clipping or coupled gates.

Gradients and one optimizer step are Flax's machinery (``rnn_equivalence.frameworks.flax_cells.FlaxRunner``):
jax.vjp of the one function run_native calls, and optax, which Equinox users train with.

Half precision (float16, bfloat16; issue 37): the cells built in that dtype, judged as Flax's are
(``rnn_equivalence.frameworks.flax_cells``, "Half precision": XLA's arithmetic, measured there; the cells' ``weight_ih @
x`` a float32 dot rounded once, their gates jax.nn.sigmoid composed of operations stored in half). Measured on these
cells (jax 0.10.2, equinox 0.13.8; 50-, 20- and 5-step cases, two seeds, both configurations): worst err/bound of
that arithmetic 0.27 (LSTM) and 0.16 (GRU), against 0.45 and 0.20 of a mixed policy's bound (which the gates' composed
sigmoid does not exceed here, as the SimpleCell's does) and 0.061 and 0.061 of half throughout; every wrong mapping
caught on the mutation case in both formats, the least 3.27 (LSTM, bfloat16, weight_hh transposed blockwise) and 3.76
(GRU, bfloat16, the same). At default depth equinox-gru runs bfloat16 (flax_cells.DEFAULT_HALF).

Each system is its mapping (``EquinoxLSTMMapping``, ``EquinoxGRUMapping``: NumPy only), its runner
(``EquinoxRunner``) and its test plan, as in ``rnn_equivalence.frameworks.pytorch``.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import (
    CELL, NO_BIAS, Adapter, Mapping, Native, NativeSpec, gates_text, import_framework, reorder_gates, scaled,
)
from rnn_equivalence.frameworks.flax_cells import HALF_ARITHMETIC, FlaxRunner, full_depth_halves
from rnn_equivalence.frameworks.jax_cache import use_persistent_cache
from rnn_equivalence.reference.formats import HALF_FORMATS
from rnn_equivalence.reference.params import GATES


# --- the mappings: NumPy only ---------------------------------------------------------------------------


class EquinoxMapping(Mapping):
    """What both Equinox cells share: PyTorch's orientation and gate order, no tag (a cell), and the way back."""

    native_names: tuple[str, ...]  # the cell's weight attributes

    def recurrent_kernel(self, config) -> str:
        return "weight_hh"

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        """weight_ih (G*H, I), weight_hh (G*H, H), bias (G*H); the GRU's bias_n (H) too."""
        I, H, G, GH = input_size, hidden_size, len(GATES[self.family]), gates_text(self.family, "hidden_size")
        spec = {"weight_ih": ((G * H, I), f"({GH}, input_size)"), "weight_hh": ((G * H, H), f"({GH}, hidden_size)")}
        if has_bias:
            spec["bias"] = ((G * H,), f"({GH},)")
            if "bias_n" in self.native_names:
                spec["bias_n"] = ((H,), "(hidden_size,)")
        return spec

    def cell_from_native(self, native: Native, tag: str):
        """b_x = bias, b_h = 0 but for the GRU's b_hn = bias_n (none without a bias)."""
        W_x, W_h = np.asarray(native["weight_ih"]), np.asarray(native["weight_hh"])
        if "bias" not in native:
            return self.params(W_x, W_h, None, None)
        bias = np.asarray(native["bias"])
        b_h = np.zeros_like(bias)
        if "bias_n" in native:
            b_h[-len(native["bias_n"]):] = native["bias_n"]
        return self.params(W_x, W_h, bias, b_h)


class EquinoxLSTMMapping(EquinoxMapping):
    """``LSTMCell``: weight_ih, weight_hh and the one summed bias, gates i f g o."""

    family = "lstm"
    native_names = ("weight_ih", "weight_hh", "bias")
    state_names = {"h": "hidden[0] (h)", "c": "hidden[1] (c)"}  # Equinox's LSTM state is (h, c)

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"weight_ih": params.W_x, "weight_hh": params.W_h}
        if params.has_bias:
            native["bias"] = params.b  # b_x + b_h
        return native


class EquinoxGRUMapping(EquinoxMapping):
    """``GRUCell``: weight_ih, weight_hh, bias summed for r and z (b_xn for n), and bias_n = b_hn, gates r z n."""

    family, variant = "gru", "reset_after"
    kept_hidden_biases = ("n",)  # bias_n holds b_hn, which r multiplies
    native_names = ("weight_ih", "weight_hh", "bias", "bias_n")
    state_names = {"h": "hidden"}

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"weight_ih": params.W_x, "weight_hh": params.W_h}
        if params.has_bias:
            b_h = params.b_h.copy()
            b_h[2 * params.hidden_size:] = 0  # b_hn stays apart, in bias_n
            native["bias"] = params.b_x + b_h
            native["bias_n"] = params.gate(params.b_h, "n")
        return native


# --- the runner: Flax's machinery over an Equinox cell -------------------------------------------------------


class EquinoxRunner(FlaxRunner):
    """An Equinox cell: the framework, and its step over a batch; the rest (the run over the sequence,
    gradients, optax) is ``FlaxRunner``'s."""

    def start(self):
        jax = import_framework("jax", self.name)
        jax.config.update("jax_enable_x64", True)  # before any array exists
        use_persistent_cache(jax)  # before the first compile (rnn_equivalence.frameworks.jax_cache)
        self.jax, self.jnp = jax, import_framework("jax.numpy", self.name)
        self.eqx = import_framework("equinox", self.name)

    activation_arguments = Adapter.activation_arguments  # fixed activations: none to give (not Flax's)

    def _cell(self, input_size: int, hidden_size: int, has_bias: bool, dtype):
        return getattr(self.eqx.nn, self.cell.rsplit(".", 1)[1])(input_size, hidden_size, use_bias=has_bias,
                                                                 dtype=dtype, key=self.jax.random.PRNGKey(0))

    def _step(self, input_size: int, hidden_size: int, dtype, g: str):
        """step(native, carry, x) -> carry over a batch: the cell holding the native weights
        (``eqx.tree_at``), vmapped over the batch rows. The carry is Flax's (c, h) for an LSTM (the
        driver's, ``FlaxRunner._run``); Equinox's own is (h, c).

        Compiled, ``jax.jit`` of this function of the weights, once per cell and batch (``FlaxRunner._run``):
        what ``eqx.filter_jit`` does for a module whose leaves are all arrays. filter_jit over the module
        itself (a template built once, each run's weights put in by tree_at outside the jit) was measured
        slower here: the two Equinox systems' tests took 39 s cold and 11.4 s warm, against 30 s and 9.9 s
        (one run each, 2 cores)."""
        jax, eqx = self.jax, self.eqx
        names = tuple(self.native_names)
        lstm = self.family == "lstm"

        def step(native, carry, x):
            present = tuple(name for name in names if name in native)
            template = self._cell(x.shape[-1], hidden_size, "bias" in native, dtype)
            cell = eqx.tree_at(lambda c: tuple(getattr(c, n) for n in present), template,
                               tuple(native[n] for n in present))
            if lstm:
                h, c = jax.vmap(cell)(x, (carry[1], carry[0]))
                return c, h
            return jax.vmap(cell)(x, carry)

        return self._jit(step)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self._cell(input_size, hidden_size, True, self.jnp.float32)
        return {name: tuple(getattr(cell, name).shape) for name in self.native_names}


# --- the systems: each a runner, a mapping and its test plan ----------------------------------------------


class EquinoxAdapter(Adapter):
    """An Equinox system: what each one declares. Gradients and optimizer steps are ``FlaxRunner``'s, so
    jax.vjp and optax, compiled as Flax's are."""

    distributions = ("equinox", "jax", "optax")
    requires = ("equinox", "jax")
    autodiff = "jax.vjp"
    optimizers = {"sgd": "optax.sgd", "adam": "optax.adam"}
    compiles = True
    # float16 and bfloat16 (issue 37), as Flax's (``rnn_equivalence.frameworks.flax_cells``, "Half precision": the same
    # XLA, measured on these cells too): the forward capabilities only, judged by the bound of ``HALF_ARITHMETIC``.
    dtypes = ("float32", "float64", *HALF_FORMATS)
    arithmetic = HALF_ARITHMETIC
    full_depth_dtypes = HALF_FORMATS


class EquinoxLSTMCell(EquinoxRunner, EquinoxLSTMMapping, EquinoxAdapter):
    name = "equinox-lstm"
    cell = "equinox.nn.LSTMCell"
    configs = (CELL, NO_BIAS)  # use_bias=False: the bias-free cell
    mutations = {
        "gates i and f swapped": lambda n: {
            **n, **{k: reorder_gates(n[k], (1, 0, 2, 3)) for k in ("weight_ih", "weight_hh", "bias")}},
        "weight_hh transposed blockwise": lambda n: {
            **n, "weight_hh": np.concatenate([b.T for b in np.split(n["weight_hh"], 4)])},
        "bias doubled (bias_ih + bias_hh added twice)": scaled("bias", 2.0),
    }


class EquinoxGRUCell(EquinoxRunner, EquinoxGRUMapping, EquinoxAdapter):
    name = "equinox-gru"
    cell = "equinox.nn.GRUCell"
    full_depth_dtypes = full_depth_halves(name)
    configs = (CELL, NO_BIAS)  # use_bias=False: the bias-free cell
    mutations = {
        "gates r and z swapped": lambda n: {
            **n, **{k: reorder_gates(n[k], (1, 0, 2)) for k in ("weight_ih", "weight_hh", "bias")}},
        "bias_n dropped": scaled("bias_n", 0.0),
        "bias_n moved into bias (b_hn added outside r)": lambda n: {
            **n, "bias": n["bias"] + np.concatenate([np.zeros(2 * n["bias_n"].size, n["bias_n"].dtype), n["bias_n"]]),
            "bias_n": np.zeros_like(n["bias_n"])},
        "weight_hh transposed blockwise": lambda n: {
            **n, "weight_hh": np.concatenate([b.T for b in np.split(n["weight_hh"], 3)])},
    }
