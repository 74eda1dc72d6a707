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
    Adapter, LayerAdapter, LayerConfig, Native, NativeSpec, import_framework, scaled, swapped, transposed,
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
