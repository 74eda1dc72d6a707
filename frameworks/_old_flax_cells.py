"""Flax ``SimpleCell`` (nnx and linen) and ``nnx.RNN`` / ``nnx.Bidirectional``.

The mapping, written once here:

    canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    nnx:       dense_i.kernel (I, H) = W_hx^T, dense_i.bias (H) = b_x + b_h, dense_h.kernel (H, H) = W_hh^T
    linen:     i.kernel, i.bias, h.kernel, the same arrays under linen's module names

Flax computes dense_i(x) + dense_h(h) on batch rows with kernels stored
(in, out), hence the transposes. Only the input dense has a bias ("input and
recurrent layers are summed so only one needs a bias"): the two canonical
biases are summed (one rounding) and come back as b_x, with b_h = 0. The cell
has no switch to drop its bias, so a bias-free canonical cell maps to zeros.

JAX computes float64 only with x64 switched on, which the adapters do
before creating any array.
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    Adapter, GatedAdapter, LayerAdapter, LayerConfig, Native, NativeSpec, import_framework, reorder_gates, scaled,
    swapped, transposed,
)
from reference.params import RNNParams
from reference.stack import StackedRNNParams

NNX_NAMES = ("dense_i.kernel", "dense_i.bias", "dense_h.kernel")
LINEN_NAMES = ("i.kernel", "i.bias", "h.kernel")


def cell_to_native(params: RNNParams, names=NNX_NAMES, prefix: str = "") -> Native:
    kernel_i, bias_i, kernel_h = (prefix + n for n in names)
    bias = params.b if params.has_bias else np.zeros(params.hidden_size, params.dtype)
    return {kernel_i: params.W_hx.T, bias_i: bias, kernel_h: params.W_hh.T}


def cell_from_native(native: Native, names=NNX_NAMES, prefix: str = "") -> RNNParams:
    kernel_i, bias_i, kernel_h = (prefix + n for n in names)
    bias = native[bias_i]
    return RNNParams(np.asarray(native[kernel_i]).T, np.asarray(native[kernel_h]).T, bias, np.zeros_like(bias))


def cell_spec(input_size: int, hidden_size: int, names=NNX_NAMES, prefix: str = "") -> NativeSpec:
    kernel_i, bias_i, kernel_h = (prefix + n for n in names)
    I, H = input_size, hidden_size
    return {kernel_i: ((I, H), "(in_features, hidden_features)"), bias_i: ((H,), "(hidden_features,)"),
            kernel_h: ((H, H), "(hidden_features, hidden_features)")}


class FlaxBase:
    distributions = ("flax", "jax")
    requires = ("flax", "jax")

    def _import_flax(self):
        jax = import_framework("jax", self.name)
        jax.config.update("jax_enable_x64", True)
        self.jax, self.jnp = jax, import_framework("jax.numpy", self.name)
        self.flax = import_framework("flax", self.name)
        self.nnx = import_framework("flax.nnx", self.name)
        self.linen = import_framework("flax.linen", self.name)

    def _activation(self, g: str):
        return {"tanh": self.jnp.tanh, "relu": self.jax.nn.relu, "sigmoid": self.jax.nn.sigmoid,
                "identity": lambda z: z}[g]

    def _nnx_cell(self, native: Native, prefix: str, input_size: int, hidden_size: int, g: str, dtype):
        jnp = self.jnp
        zeros = self.nnx.initializers.zeros  # overwritten at once; the default orthogonal init compiles a QR
        cell = self.nnx.SimpleCell(input_size, hidden_size, activation_fn=self._activation(g),
                                   dtype=dtype, param_dtype=dtype, rngs=self.nnx.Rngs(0),
                                   kernel_init=zeros, recurrent_kernel_init=zeros)
        for name in NNX_NAMES:
            module, attribute = name.split(".")
            getattr(getattr(cell, module), attribute)[...] = jnp.asarray(native[prefix + name])
        return cell


class FlaxNNXSimpleCell(FlaxBase, Adapter):
    name = "flax-nnx"
    cell = "flax.nnx.SimpleCell"
    bias_names = ("dense_i.bias",)
    mutations = {
        "dense_i.kernel not transposed": transposed("dense_i.kernel"),
        "dense_h.kernel not transposed": transposed("dense_h.kernel"),
        "dense_i.kernel and dense_h.kernel swapped": swapped("dense_i.kernel", "dense_h.kernel"),
        "dense_i.bias dropped": scaled("dense_i.bias", 0.0),
        "dense_i.bias doubled": scaled("dense_i.bias", 2.0),
    }

    def __init__(self):
        self._import_flax()

    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        return cell_spec(input_size, hidden_size)

    def to_native(self, params: RNNParams) -> Native:
        return cell_to_native(params)

    def from_native(self, native: Native) -> RNNParams:
        return cell_from_native(native)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.nnx.SimpleCell(input_size, hidden_size, rngs=self.nnx.Rngs(0))
        return {f"{m}.{a}": tuple(getattr(getattr(cell, m), a)[...].shape)
                for m, a in (n.split(".") for n in NNX_NAMES)}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        dtype = self.check_call(native, xs, h0, g)
        cell = self._nnx_cell(native, "", xs.shape[2], h0.shape[1], g, dtype)
        # Eager nnx calls cost milliseconds each; the cell's own step, jitted once, does not.
        graph, state = self.nnx.split(cell)

        @self.jax.jit
        def step(state, h, x):
            return self.nnx.merge(graph, state)(h, x)[0]

        h, outputs = self.jnp.asarray(h0), []
        for x in xs:
            h = step(state, h, self.jnp.asarray(x))
            outputs.append(np.asarray(h))
        return np.stack(outputs)


class FlaxLinenSimpleCell(FlaxBase, Adapter):
    name = "flax-linen"
    cell = "flax.linen.SimpleCell"
    bias_names = ("i.bias",)
    mutations = {
        "i.kernel not transposed": transposed("i.kernel"),
        "h.kernel not transposed": transposed("h.kernel"),
        "i.kernel and h.kernel swapped": swapped("i.kernel", "h.kernel"),
        "i.bias dropped": scaled("i.bias", 0.0),
        "i.bias doubled": scaled("i.bias", 2.0),
    }

    def __init__(self):
        self._import_flax()

    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        return cell_spec(input_size, hidden_size, LINEN_NAMES)

    def to_native(self, params: RNNParams) -> Native:
        return cell_to_native(params, LINEN_NAMES)

    def from_native(self, native: Native) -> RNNParams:
        return cell_from_native(native, LINEN_NAMES)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.linen.SimpleCell(features=hidden_size)
        variables = cell.init(self.jax.random.PRNGKey(0), self.jnp.zeros((1, hidden_size)),
                              self.jnp.zeros((1, input_size)))
        return {f"{module}.{name}": tuple(value.shape)
                for module, weights in variables["params"].items() for name, value in weights.items()}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        jnp = self.jnp
        dtype = self.check_call(native, xs, h0, g)
        cell = self.linen.SimpleCell(features=h0.shape[1], activation_fn=self._activation(g),
                                     dtype=dtype, param_dtype=dtype)
        params = {"params": {module: {} for module in ("i", "h")}}
        for name in LINEN_NAMES:
            module, attribute = name.split(".")
            params["params"][module][attribute] = jnp.asarray(native[name])
        step = self.jax.jit(lambda h, x: cell.apply(params, h, x)[0])
        h, outputs = jnp.asarray(h0), []
        for x in xs:
            h = step(h, jnp.asarray(x))
            outputs.append(np.asarray(h))
        return np.stack(outputs)


def _prefix(direction: int) -> str:
    return ("forward.", "backward.")[direction]


class FlaxNNXRNN(FlaxBase, LayerAdapter):
    """``nnx.RNN`` over ``nnx.SimpleCell``, and ``nnx.Bidirectional`` of two of them (one layer)."""

    name = "flax-nnx-rnn"
    cell = "flax.nnx.RNN(SimpleCell)"
    bias_names = ("forward.dense_i.bias",)
    configs = (
        LayerConfig(1, False, options=(("return_carry", True),)),
        LayerConfig(1, False, initial_state=False, options=(("time_major", True),)),
        LayerConfig(1, False, options=(("return_carry", True), ("reverse", True))),
        LayerConfig(1, False, options=(("return_carry", True), ("reverse", True), ("keep_order", True))),
        LayerConfig(1, True, options=(("return_carry", True),)),
    )
    mutation_config = LayerConfig(1, True, options=(("return_carry", True),))
    mutations = {
        "forward.dense_h.kernel not transposed": transposed("forward.dense_h.kernel"),
        "forward and backward swapped": lambda n: {
            **{k.replace("forward.", "backward."): v for k, v in n.items() if k.startswith("forward.")},
            **{k.replace("backward.", "forward."): v for k, v in n.items() if k.startswith("backward.")}},
        "backward.dense_i.bias dropped": scaled("backward.dense_i.bias", 0.0),
    }

    def __init__(self):
        self._import_flax()

    def reads_reversed(self, config: LayerConfig) -> bool:
        return bool(config.option("reverse"))

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "forward.dense_h.kernel"

    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int) -> NativeSpec:
        spec = {}
        for d in range(2 if config.bidirectional else 1):
            spec.update(cell_spec(input_size, hidden_size, prefix=_prefix(d)))
        return spec

    def to_native(self, stack: StackedRNNParams, config: LayerConfig) -> Native:
        native = {}
        for _, d, params in stack.cells():
            native.update(cell_to_native(params, prefix=_prefix(d)))
        return native

    def from_native(self, native: Native, config: LayerConfig) -> StackedRNNParams:
        return StackedRNNParams([[cell_from_native(native, prefix=_prefix(d))
                                  for d in range(2 if config.bidirectional else 1)]])

    def arrange(self, outputs, h_n, config: LayerConfig):
        if config.option("keep_order"):  # read reversed, reported in input time order
            outputs = outputs[::-1]
        arranged = {"outputs": outputs if config.option("time_major") else outputs.transpose(1, 0, 2)}
        if config.option("return_carry"):
            for d in range(2 if config.bidirectional else 1):
                arranged[f"carry {_prefix(d)[:-1]}"] = h_n[d]
        return arranged

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig):
        jnp, nnx = self.jnp, self.nnx
        dtype = self.check_layer_call(native, xs, h0, g, config)
        H = self._hidden_size(native, h0, config, xs.shape[2])
        time_major = bool(config.option("time_major"))
        inputs = jnp.asarray(xs if time_major else xs.transpose(1, 0, 2))
        return_carry = bool(config.option("return_carry"))
        if config.bidirectional:
            layer = nnx.Bidirectional(
                nnx.RNN(self._nnx_cell(native, "forward.", xs.shape[2], H, g, dtype)),
                nnx.RNN(self._nnx_cell(native, "backward.", xs.shape[2], H, g, dtype), reverse=True, keep_order=True),
                time_major=time_major)
            initial = None if h0 is None else (jnp.asarray(h0[0]), jnp.asarray(h0[1]))
        else:
            layer = nnx.RNN(self._nnx_cell(native, "forward.", xs.shape[2], H, g, dtype), time_major=time_major,
                            reverse=bool(config.option("reverse")), keep_order=bool(config.option("keep_order")))
            initial = None if h0 is None else jnp.asarray(h0[0])
        result = layer(inputs, initial_carry=initial, return_carry=return_carry)
        if not return_carry:
            return {"outputs": np.asarray(result)}
        carry, outputs = result
        carries = carry if config.bidirectional else (carry,)
        return {"outputs": np.asarray(outputs),
                **{f"carry {_prefix(d)[:-1]}": np.asarray(c) for d, c in enumerate(carries)}}


# --- gated cells ------------------------------------------------------------------
#
# Flax keeps one bias per gate where the framework has one, so the mapping sums:
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


class FlaxGatedCell(FlaxBase, GatedAdapter):
    def __init__(self):
        self._import_flax()

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        return {name: shape for name, (shape, _) in self._own_spec(input_size, hidden_size).items()}

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        return self._spec(input_size, hidden_size)

    def _nnx_stepper(self, cell_class, native: Native, I, H, dtype):
        """One step of an nnx cell holding the native weights ("module.weight" names)."""
        nnx, zeros = self.nnx, self.nnx.initializers.zeros  # overwritten at once; skips the init compile
        cell = cell_class(I, H, dtype=dtype, param_dtype=dtype, rngs=nnx.Rngs(0),
                          kernel_init=zeros, recurrent_kernel_init=zeros)
        for name, value in native.items():
            module, weight = name.split(".")
            getattr(getattr(cell, module), weight)[...] = self.jnp.asarray(value)
        graph, state = nnx.split(cell)
        return lambda carry, x: nnx.merge(graph, state)(carry, x)[0]

    def _linen_stepper(self, cell, native: Native):
        """One step of a linen cell with the native weights ("module.weight" names) as its params."""
        params = {"params": {}}
        for name, value in native.items():
            module, weight = name.split(".")
            params["params"].setdefault(module, {})[weight] = self.jnp.asarray(value)
        return lambda carry, x: cell.apply(params, carry, x)[0]

    def run_native(self, native: Native, xs, h0, c0):
        jax, jnp = self.jax, self.jnp
        dtype = self.check_gated_call(native, xs, h0, c0)
        step = jax.jit(self._stepper(native, xs.shape[2], h0.shape[1], dtype))
        lstm = self.cell_type == "lstm"
        carry = (jnp.asarray(c0), jnp.asarray(h0)) if lstm else jnp.asarray(h0)
        hs, cs = [], []
        for x in xs:
            carry = step(carry, jnp.asarray(x))
            hs.append(np.asarray(carry[1] if lstm else carry))
            if lstm:
                cs.append(np.asarray(carry[0]))
        return {"h": np.stack(hs), "c": np.stack(cs)} if lstm else {"h": np.stack(hs)}


def _lstm_names(forget: str):
    """Input denses ii, if (if_ in nnx), ig, io; hidden denses hi, hf, hg, ho."""
    return ([f"i{g}.kernel" for g in ("i", forget, "g", "o")], [f"h{g}.kernel" for g in LSTM_GATES],
            [f"h{g}.bias" for g in LSTM_GATES])


class FlaxLSTMCell(FlaxGatedCell):
    cell_type = "lstm"
    bias_names = ("hi.bias",)
    forget_name: str  # "f_" in nnx (the attribute is if_), "f" in linen

    def _spec(self, I, H):
        kernels_i, kernels_h, biases = _lstm_names(self.forget_name)
        spec = {n: ((I, H), "(in_features, hidden_features)") for n in kernels_i}
        spec.update({n: ((H, H), "(hidden_features, hidden_features)") for n in kernels_h})
        spec.update({n: ((H,), "(hidden_features,)") for n in biases})
        return spec

    def to_native(self, params) -> Native:
        kernels_i, kernels_h, biases = _lstm_names(self.forget_name)
        b = params.b_x + params.b_h
        native = {}
        for k, gate in enumerate(LSTM_GATES):
            native[kernels_i[k]] = params.gate(params.W_x, gate).T
            native[kernels_h[k]] = params.gate(params.W_h, gate).T
            native[biases[k]] = params.gate(b, gate)
        return native

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        kernels_i, kernels_h, biases = _lstm_names(self.forget_name)
        b = np.concatenate([native[n] for n in biases])
        return GatedParams("lstm", np.vstack([np.asarray(native[n]).T for n in kernels_i]),
                           np.vstack([np.asarray(native[n]).T for n in kernels_h]), b, np.zeros_like(b))

    mutations = {
        "gates i and f swapped": lambda n: _swap_dense(n, "ii", "if"),
        "hidden kernels not transposed": lambda n: {k: (v.T if k.startswith("h") and k.endswith("kernel") else v)
                                                    for k, v in n.items()},
    }


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


class FlaxNNXLSTMCell(FlaxLSTMCell):
    name = "flax-nnx-lstm"
    cell = "flax.nnx.LSTMCell"
    forget_name = "f_"

    def _own_spec(self, I, H):
        cell = self.nnx.LSTMCell(I, H, rngs=self.nnx.Rngs(0))
        return {f"{m}.{w}": (tuple(getattr(getattr(cell, m), w)[...].shape), "")
                for m in ("ii", "if_", "ig", "io", "hi", "hf", "hg", "ho")
                for w in ("kernel", "bias") if getattr(getattr(cell, m), w, None) is not None}

    def _stepper(self, native, I, H, dtype):
        return self._nnx_stepper(self.nnx.LSTMCell, native, I, H, dtype)


class FlaxLinenLSTMCell(FlaxLSTMCell):
    name = "flax-linen-lstm"
    cell = "flax.linen.LSTMCell"
    forget_name = "f"

    def _own_spec(self, I, H):
        cell = self.linen.LSTMCell(features=H)
        zeros = self.jnp.zeros((1, H))
        variables = cell.init(self.jax.random.PRNGKey(0), (zeros, zeros), self.jnp.zeros((1, I)))
        return {f"{m}.{w}": (tuple(v.shape), "") for m, ws in variables["params"].items() for w, v in ws.items()}

    def _stepper(self, native, I, H, dtype):
        return self._linen_stepper(self.linen.LSTMCell(features=H, dtype=dtype, param_dtype=dtype), native)


class FlaxLinenGRUCell(FlaxGatedCell):
    name = "flax-linen-gru"
    cell = "flax.linen.GRUCell"
    cell_type = "gru"
    bias_names = ("ir.bias",)
    mutations = {
        "gates r and z swapped": lambda n: _swap_dense(_swap_dense(n, "ir", "iz"), "hr", "hz"),
        "hn.bias dropped": scaled("hn.bias", 0.0),
        "hn.bias moved into in.bias": lambda n: {**n, "in.bias": n["in.bias"] + n["hn.bias"],
                                                 "hn.bias": np.zeros_like(n["hn.bias"])},
    }

    def _spec(self, I, H):
        spec = {f"i{g}.{w}": ((I, H) if w == "kernel" else (H,), "") for g in "rzn" for w in ("kernel", "bias")}
        spec.update({f"h{g}.kernel": ((H, H), "(features, features)") for g in "rzn"})
        spec["hn.bias"] = ((H,), "(features,)")
        return spec

    _own_spec = _spec

    def to_native(self, params) -> Native:
        native = {}
        for gate in "rzn":
            native[f"i{gate}.kernel"] = params.gate(params.W_x, gate).T
            native[f"h{gate}.kernel"] = params.gate(params.W_h, gate).T
        native["ir.bias"] = params.gate(params.b_x, "r") + params.gate(params.b_h, "r")
        native["iz.bias"] = params.gate(params.b_x, "z") + params.gate(params.b_h, "z")
        native["in.bias"] = params.gate(params.b_x, "n")
        native["hn.bias"] = params.gate(params.b_h, "n")
        return native

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        W_x = np.vstack([np.asarray(native[f"i{g}.kernel"]).T for g in "rzn"])
        W_h = np.vstack([np.asarray(native[f"h{g}.kernel"]).T for g in "rzn"])
        zero = np.zeros_like(native["hn.bias"])
        return GatedParams("gru", W_x, W_h, np.concatenate([native["ir.bias"], native["iz.bias"], native["in.bias"]]),
                           np.concatenate([zero, zero, native["hn.bias"]]))

    def _stepper(self, native, I, H, dtype):
        return self._linen_stepper(self.linen.GRUCell(features=H, dtype=dtype, param_dtype=dtype), native)


class FlaxNNXGRUCell(FlaxGatedCell):
    name = "flax-nnx-gru"
    cell = "flax.nnx.GRUCell"
    cell_type = "gru"
    bias_names = ("dense_i.bias",)
    zero_b_hn = True  # the cell cannot hold b_hn: its cases run with b_hn = 0
    mutations = {
        "gates r and z swapped": lambda n: {**n, **{k: reorder_gates(n[k], (1, 0, 2), axis=-1)
                                                    for k in ("dense_i.kernel", "dense_i.bias", "dense_h.kernel")}},
        "dense_h.kernel transposed blockwise": lambda n: {**n, "dense_h.kernel": np.concatenate(
            [b.T for b in np.split(n["dense_h.kernel"], 3, axis=1)], axis=1)},
    }

    def _spec(self, I, H):
        return {"dense_i.kernel": ((I, 3 * H), "(in_features, 3*hidden_features)"),
                "dense_i.bias": ((3 * H,), "(3*hidden_features,)"),
                "dense_h.kernel": ((H, 3 * H), "(hidden_features, 3*hidden_features)")}

    def _own_spec(self, I, H):
        cell = self.nnx.GRUCell(I, H, rngs=self.nnx.Rngs(0))
        return {f"{m}.{w}": (tuple(getattr(getattr(cell, m), w)[...].shape), "")
                for m in ("dense_i", "dense_h") for w in ("kernel", "bias")
                if getattr(getattr(cell, m), w, None) is not None}

    def to_native(self, params) -> Native:
        b_hn = params.gate(params.b_h, "n")
        if np.any(b_hn != 0):
            raise ValueError(
                f"{self.cell} has no slot for b_hn (the hidden bias of the n gate, which r multiplies in "
                f"n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); expected b_hn = 0, got max |b_hn| = "
                f"{np.max(np.abs(b_hn)):.3g}. Moving it into b_in would compute another function.")
        b = params.b_x + params.b_h  # r and z: the sum; n: b_in alone, since b_hn is zero
        return {"dense_i.kernel": params.W_x.T, "dense_i.bias": b, "dense_h.kernel": params.W_h.T}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        b = np.asarray(native["dense_i.bias"])
        return GatedParams("gru", np.asarray(native["dense_i.kernel"]).T, np.asarray(native["dense_h.kernel"]).T,
                           b, np.zeros_like(b))

    def _stepper(self, native, I, H, dtype):
        return self._nnx_stepper(self.nnx.GRUCell, native, I, H, dtype)
