"""Keras ``SimpleRNNCell`` and ``SimpleRNN`` (with ``Bidirectional`` and stacking).

Two implementations share these adapters because they share the API and the
weight layout: Keras 3 (package ``keras``) on each of its backends, and
Keras 2 (package ``tf_keras``), a separate code base.

The mapping, written once here:

    canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    Keras:     kernel (I, H) = W_hx^T, recurrent_kernel (H, H) = W_hh^T, bias (H) = b_x + b_h

Keras computes (x @ kernel + bias) + h @ recurrent_kernel on batch rows, hence
the transposes. One bias slot: the sum rounds once, and the way back returns
b_x = bias, b_h = 0 (lossy unless b_h was zero).

In a stack, layer k's cell for direction d is named ``layer{k}.forward.`` or
``layer{k}.backward.`` followed by the cell's own weight name.

Keras 3 chooses its backend once per process, from ``KERAS_BACKEND``. Each
backend is its own adapter whose ``process_env`` names it, so a run covers
all three: the one this process uses runs here, the others in child
processes (``frameworks.child``).
"""

from __future__ import annotations

import numpy as np

from frameworks.base import (
    Adapter, GatedAdapter, GatedLayerAdapter, LayerConfig, Native, NativeSpec, StackOfCells, distribution_version, import_framework,
    reorder_gates, scaled, swapped, swapped_gates, transposed,
)
from reference.params import RNNParams

KERAS_ACTIVATION = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid", "identity": "linear"}
# Every weight is assigned right after build, so the initial values never matter; the
# default orthogonal recurrent initializer would compile a QR decomposition for every
# new shape (1 to 3 s each on the JAX backend).
ZERO_INIT = {"kernel_initializer": "zeros", "recurrent_initializer": "zeros", "bias_initializer": "zeros"}
DIRECTIONS = ("forward", "backward")


def cell_to_native(params: RNNParams, prefix: str = "") -> Native:
    native = {f"{prefix}kernel": params.W_hx.T, f"{prefix}recurrent_kernel": params.W_hh.T}
    if params.has_bias:
        native[f"{prefix}bias"] = params.b
    return native


def cell_from_native(native: Native, prefix: str = "") -> RNNParams:
    bias = native.get(f"{prefix}bias")
    return RNNParams(np.asarray(native[f"{prefix}kernel"]).T, np.asarray(native[f"{prefix}recurrent_kernel"]).T,
                     bias, None if bias is None else np.zeros_like(bias))


def cell_spec(input_size: int, hidden_size: int, has_bias: bool, prefix: str = "") -> NativeSpec:
    I, H = input_size, hidden_size
    spec = {f"{prefix}kernel": ((I, H), "(input_dim, units)"),
            f"{prefix}recurrent_kernel": ((H, H), "(units, units)")}
    if has_bias:
        spec[f"{prefix}bias"] = ((H,), "(units,)")
    return spec


def layer_prefix(layer: int, direction: int) -> str:
    return f"layer{layer}.{DIRECTIONS[direction]}."


class KerasFamily:
    """How to reach one Keras implementation: its module, tensors in and out, its version."""

    module = "keras"
    backend: str | None = None  # Keras 3 only

    def __init__(self):
        self._import_keras()

    def describe(self) -> str:
        return self.cell + self._backend_text()

    def reads_reversed(self, config: LayerConfig) -> bool:
        """For the layers: ``go_backwards`` reads x_T..x_1 and reports in that order."""
        return bool(config.option("go_backwards"))

    def _import_keras(self):
        if self.backend == "jax":
            # float64 in JAX needs x64 switched on before any array exists.
            import_framework("jax", self.name).config.update("jax_enable_x64", True)
        keras = import_framework(self.module, self.name)
        if self.backend and keras.backend.backend() != self.backend:
            raise ImportError(f"adapter {self.name!r} needs Keras backend {self.backend!r}, "
                              f"but this process has {keras.backend.backend()!r}")
        self.keras = keras

    def _tensor(self, array):
        if self.module == "keras":
            return self.keras.ops.convert_to_tensor(array)
        return self.keras.backend.constant(array, dtype=array.dtype.name)

    def _numpy(self, tensor) -> np.ndarray:
        if self.module == "keras":
            return np.asarray(self.keras.ops.convert_to_numpy(tensor))
        return np.asarray(tensor)

    def _backend_text(self) -> str:
        return f" (backend {self.keras.backend.backend()})" if self.module == "keras" else ""

    def versions(self) -> dict[str, str]:
        # The backend does the arithmetic, so its version belongs to the result.
        backend = self.backend or "tensorflow"
        return {self.module: distribution_version(self.module), backend: distribution_version(backend)}


class KerasSimpleRNNCell(KerasFamily, Adapter):
    cell = "keras.layers.SimpleRNNCell"
    bias_names = ("bias",)
    mutations = {
        "kernel not transposed": transposed("kernel"),
        "recurrent_kernel not transposed": transposed("recurrent_kernel"),
        "kernel and recurrent_kernel swapped": swapped("kernel", "recurrent_kernel"),
        "bias dropped": scaled("bias", 0.0),
        "bias doubled": scaled("bias", 2.0),
    }


    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        return cell_spec(input_size, hidden_size, has_bias)

    def to_native(self, params: RNNParams) -> Native:
        return cell_to_native(params)

    def from_native(self, native: Native) -> RNNParams:
        return cell_from_native(native)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self.keras.layers.SimpleRNNCell(hidden_size)
        cell.build((None, input_size))
        return {v.name.split("/")[-1].split(":")[0]: tuple(v.shape) for v in cell.weights}

    def run_native(self, native: Native, xs, h0, g: str) -> np.ndarray:
        dtype = self.check_call(native, xs, h0, g)
        cell = self.keras.layers.SimpleRNNCell(h0.shape[1], activation=KERAS_ACTIVATION[g],
                                               use_bias="bias" in native, dtype=dtype.name, **ZERO_INIT)
        cell.build((None, xs.shape[2]))
        for name, value in native.items():
            getattr(cell, name).assign(value)
        h, outputs = self._tensor(h0), []
        for x in xs:
            h, _ = cell(self._tensor(x), [h])
            outputs.append(self._numpy(h))
        return np.stack(outputs)


class KerasSimpleRNN(KerasFamily, StackOfCells):
    """``SimpleRNN`` layers, each wrapped in ``Bidirectional(merge_mode="concat")`` when
    bidirectional, stacked with ``return_sequences=True`` below the top layer."""

    cell = "keras.layers.SimpleRNN"
    bias_names = ("layer0.forward.bias",)
    configs = (
        LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True))),
        LayerConfig(1, False, initial_state=False, options=(("return_sequences", False),)),
        LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("go_backwards", True))),
        LayerConfig(1, True, options=(("return_sequences", True), ("return_state", True))),
        LayerConfig(2, True, bias=False, initial_state=False, options=(("return_sequences", False),)),
        LayerConfig(3, False, options=(("return_sequences", True), ("return_state", True))),
    )
    mutation_config = LayerConfig(3, True, options=(("return_sequences", True), ("return_state", True)))
    mutations = {
        "layer0.forward.recurrent_kernel not transposed": transposed("layer0.forward.recurrent_kernel"),
        "forward and backward swapped in layer 0": lambda n: _swap_prefix(n, "layer0.forward.", "layer0.backward."),
        "layers 1 and 2 swapped": lambda n: _swap_prefix(_swap_prefix(n, "layer1.forward.", "layer2.forward."),
                                                         "layer1.backward.", "layer2.backward."),
        "layer2.backward.bias dropped": scaled("layer2.backward.bias", 0.0),
    }


    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "layer0.forward.recurrent_kernel"

    cell_to_native, cell_from_native, cell_spec = (staticmethod(cell_to_native),
                                                   staticmethod(cell_from_native), staticmethod(cell_spec))

    def tag(self, layer: int, direction: int) -> str:
        return layer_prefix(layer, direction)

    def arrange(self, outputs, h_n, config: LayerConfig):
        D = 2 if config.bidirectional else 1
        top = config.num_layers - 1
        if config.option("return_sequences"):
            arranged = {"output": outputs.transpose(1, 0, 2)}  # Keras is batch first
        else:  # the last step of each direction: its final state
            arranged = {"output": np.concatenate([h_n[top * D + d] for d in range(D)], axis=-1)}
        if config.option("return_state"):
            for k in range(config.num_layers):
                for d in range(D):
                    arranged[f"state {layer_prefix(k, d)[:-1]}"] = h_n[k * D + d]
        return arranged

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig):
        dtype = self.check_layer_call(native, xs, h0, g, config)
        H = self._hidden_size(native, h0, config, xs.shape[2])
        layers = self.keras.layers
        D = 2 if config.bidirectional else 1
        x = self._tensor(np.ascontiguousarray(xs.transpose(1, 0, 2)))
        result = {}
        for k in range(config.num_layers):
            top = k == config.num_layers - 1
            rnn = layers.SimpleRNN(
                H, activation=KERAS_ACTIVATION[g], use_bias=config.bias, dtype=dtype.name,
                return_sequences=True if not top else bool(config.option("return_sequences")),
                return_state=bool(config.option("return_state")),
                go_backwards=bool(config.option("go_backwards")), **ZERO_INIT,
            )
            if config.bidirectional:
                rnn = layers.Bidirectional(rnn, merge_mode="concat", dtype=dtype.name)
            initial = None if h0 is None else [self._tensor(h0[k * D + d]) for d in range(D)]
            rnn.build(tuple(x.shape))
            cells = [rnn.forward_layer.cell, rnn.backward_layer.cell] if config.bidirectional else [rnn.cell]
            for d, cell in enumerate(cells):
                for name in ("kernel", "recurrent_kernel", "bias") if config.bias else ("kernel", "recurrent_kernel"):
                    getattr(cell, name).assign(native[layer_prefix(k, d) + name])
            out = rnn(x, initial_state=initial)
            if config.option("return_state"):
                x, states = out[0], out[1:]
                for d, state in enumerate(states):
                    result[f"state {layer_prefix(k, d)[:-1]}"] = self._numpy(state)
            else:
                x = out
        result["output"] = self._numpy(x)
        return result


def _swap_prefix(native: Native, a: str, b: str) -> Native:
    out = dict(native)
    for name in native:
        if name.startswith(a):
            twin = b + name[len(a):]
            out[name], out[twin] = native[twin], native[name]
    return out


def _keras3(backend: str, base):
    label = {"tensorflow": "tf"}.get(backend, backend)
    suffix = "-rnn" if base is KerasSimpleRNN else ""
    return type(f"{base.__name__}_{backend}", (base,), {
        "name": f"keras-{label}{suffix}", "backend": backend, "distributions": ("keras", backend),
        "requires": ("keras", backend), "process_env": {"KERAS_BACKEND": backend},
        "__module__": __name__,
    })


KerasTF = _keras3("tensorflow", KerasSimpleRNNCell)
# Keras 3's dtype promotion (keras/src/backend/common/dtypes.py, result_type)
# demotes 64-bit results to 32-bit when a Python float takes part, and the jax
# backend's tanh promotes with `float`: a float64 cell returns float32 states.
JAX_TANH_FLOAT64 = {("tanh", "float64"): (
    "Keras 3 on jax computes tanh of float64 in float32: keras.ops.tanh promotes with "
    "result_type(x.dtype, float), which demotes 64-bit dtypes; the cause reported in "
    "https://github.com/keras-team/keras/issues/23223"
)}
KerasJax = _keras3("jax", KerasSimpleRNNCell)
KerasJax.known_issues = JAX_TANH_FLOAT64
KerasJax.known_issue_scopes = ("reference", "activation")  # the bug is in tanh itself
# The torch backend's matmul takes its dtype from the same result_type, so
# float64 @ float64 is computed in float32 and every float64 activation suffers.
TORCH_MATMUL_FLOAT64 = {(g, "float64"): (
    "Keras 3 on torch computes float64 @ float64 in float32: keras.ops.matmul takes its dtype from "
    "result_type, which demotes 64-bit dtypes; the cause reported in "
    "https://github.com/keras-team/keras/issues/23223, whose fix covered elementwise ops, not matmul"
) for g in KERAS_ACTIVATION}
KerasTorch = _keras3("torch", KerasSimpleRNNCell)
KerasTorch.known_issues = TORCH_MATMUL_FLOAT64
KerasTFRNN = _keras3("tensorflow", KerasSimpleRNN)
KerasJaxRNN = _keras3("jax", KerasSimpleRNN)
KerasJaxRNN.known_issues = {key: reason + "; in SimpleRNN the scan then refuses the float32 carry"
                            for key, reason in JAX_TANH_FLOAT64.items()}
KerasJaxRNN.known_issue_raises = (TypeError,)
KerasTorchRNN = _keras3("torch", KerasSimpleRNN)
KerasTorchRNN.known_issues = TORCH_MATMUL_FLOAT64


class TFKerasSimpleRNNCell(KerasSimpleRNNCell):
    """Keras 2 (``tf_keras``): the same API and layout, a separate implementation."""

    name = "tf-keras"
    cell = "tf_keras.layers.SimpleRNNCell"
    module = "tf_keras"
    distributions = ("tf_keras", "tensorflow")
    requires = ("tf_keras", "tensorflow")


class TFKerasSimpleRNN(KerasSimpleRNN):
    name = "tf-keras-rnn"
    cell = "tf_keras.layers.SimpleRNN"
    module = "tf_keras"
    distributions = ("tf_keras", "tensorflow")
    requires = ("tf_keras", "tensorflow")


# --- gated cells ------------------------------------------------------------------
#
#   canonical LSTM gates i f g o:  W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
#   Keras LSTMCell,  gates i f c o: kernel (I, 4H) = W_x^T, recurrent_kernel (H, 4H) = W_h^T,
#                                   bias (4H) = b_x + b_h                  (same order, c is g)
#   canonical GRU gates r z n:     W_x (3H, I), W_h (3H, H), b_x, b_h (3H)
#   Keras GRUCell,   gates z r h:  kernel (I, 3H), recurrent_kernel (H, 3H), reordered z r n,
#       reset_after=True:  bias (2, 3H) = [b_x; b_h] reordered: both biases kept, exact
#       reset_after=False: bias (3H) = b_x + b_h reordered: one bias; b_hn may join b_in
#                          because reset-before adds b_hn outside the reset
KERAS_GRU_ORDER = (1, 0, 2)  # Keras's z, r, h as canonical indices (r=0, z=1, n=2)


class KerasGatedCell(KerasFamily, GatedAdapter):
    bias_names = ("bias",)


    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        G = 4 if self.cell_type == "lstm" else 3
        I, H = input_size, hidden_size
        two_biases = self.cell_type == "gru" and self.gru_variant == "reset_after"
        return {"kernel": ((I, G * H), f"(input_dim, {G}*units)"),
                "recurrent_kernel": ((H, G * H), f"(units, {G}*units)"),
                "bias": (((2, G * H), f"(2, {G}*units)") if two_biases else ((G * H,), f"({G}*units,)"))}

    def to_native(self, params) -> Native:
        return gated_to_native(params, self.gru_variant)

    def from_native(self, native: Native):
        return gated_from_native(native, self.cell_type)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self._make(hidden_size, "float32")
        cell.build((None, input_size))
        return {v.name.split("/")[-1].split(":")[0]: tuple(v.shape) for v in cell.weights}

    def _make(self, units: int, dtype: str):
        if self.cell_type == "lstm":
            return self.keras.layers.LSTMCell(units, dtype=dtype, **ZERO_INIT)
        return self.keras.layers.GRUCell(units, reset_after=self.gru_variant == "reset_after", dtype=dtype, **ZERO_INIT)

    def run_native(self, native: Native, xs, h0, c0):
        dtype = self.check_gated_call(native, xs, h0, c0)
        cell = self._make(h0.shape[1], dtype.name)
        cell.build((None, xs.shape[2]))
        for name, value in native.items():
            getattr(cell, name).assign(value)
        states = [self._tensor(h0), self._tensor(c0)] if self.cell_type == "lstm" else [self._tensor(h0)]
        hs, cs = [], []
        for x in xs:
            _, states = cell(self._tensor(x), states)
            states = list(states)
            hs.append(self._numpy(states[0]))
            if self.cell_type == "lstm":
                cs.append(self._numpy(states[1]))
        return {"h": np.stack(hs), "c": np.stack(cs)} if cs else {"h": np.stack(hs)}


LSTM_MUTATIONS = {
    "gates i and f swapped": swapped_gates("kernel", 0, 1, 4),
    "gates c and o swapped in recurrent_kernel": swapped_gates("recurrent_kernel", 2, 3, 4),
    "bias dropped": scaled("bias", 0.0),
}
GRU_MUTATIONS = {
    "PyTorch's r z n order kept (no reorder)": lambda n: {
        **n, **{k: reorder_gates(n[k], KERAS_GRU_ORDER, axis=-1) for k in ("kernel", "recurrent_kernel", "bias")}},
    "recurrent_kernel transposed blockwise": lambda n: {**n, "recurrent_kernel": np.concatenate(
        [b.T for b in np.split(n["recurrent_kernel"], 3, axis=1)], axis=1)},
    "bias dropped": scaled("bias", 0.0),
}


def _gated(base_name: str, cell: str, cell_type: str, variant: str, module: str, backend: str | None):
    label = {"tensorflow": "tf", None: None}.get(backend, backend)
    prefix = f"keras-{label}" if module == "keras" else "tf-keras"
    suffix = "-reset-before" if variant == "reset_before" else ""
    attributes = {
        "name": f"{prefix}-{base_name}{suffix}", "cell": f"{module}.layers.{cell}" +
        ("(reset_after=False)" if variant == "reset_before" else ""),
        "cell_type": cell_type, "gru_variant": variant, "module": module, "backend": backend,
        "distributions": (module, backend or "tensorflow"), "requires": (module, backend or "tensorflow"),
        "process_env": {"KERAS_BACKEND": backend} if backend else {},
        "mutations": LSTM_MUTATIONS if cell_type == "lstm" else GRU_MUTATIONS,
        "__module__": __name__,
    }
    if backend == "jax":
        attributes["known_issues"] = {("default", "float64"): JAX_TANH_FLOAT64[("tanh", "float64")]}
    if backend == "torch":
        attributes["known_issues"] = {("default", "float64"): TORCH_MATMUL_FLOAT64[("tanh", "float64")]}
    return type(f"Gated_{prefix}_{base_name}{suffix}".replace("-", "_"), (KerasGatedCell,), attributes)


GATED_CELLS = {
    cls.name: cls
    for module, backend in (("keras", "tensorflow"), ("keras", "jax"), ("keras", "torch"), ("tf_keras", None))
    for cls in (_gated("lstm", "LSTMCell", "lstm", "reset_after", module, backend),
                _gated("gru", "GRUCell", "gru", "reset_after", module, backend),
                _gated("gru", "GRUCell", "gru", "reset_before", module, backend))
}


def gated_to_native(params, variant: str, prefix: str = "") -> Native:
    """The Keras gated layout above, for one cell, weight names prefixed."""
    order = (0, 1, 2, 3) if params.cell == "lstm" else KERAS_GRU_ORDER
    native = {f"{prefix}kernel": reorder_gates(params.W_x, order).T,
              f"{prefix}recurrent_kernel": reorder_gates(params.W_h, order).T}
    if params.cell == "gru" and variant == "reset_after":
        native[f"{prefix}bias"] = np.stack([reorder_gates(params.b_x, order), reorder_gates(params.b_h, order)])
    else:
        native[f"{prefix}bias"] = reorder_gates(params.b_x + params.b_h, order)
    return native


def gated_from_native(native: Native, cell_type: str, prefix: str = ""):
    from reference.gated import GatedParams

    back = np.argsort((0, 1, 2, 3) if cell_type == "lstm" else KERAS_GRU_ORDER)
    bias = np.asarray(native[f"{prefix}bias"])
    b_x, b_h = (bias[0], bias[1]) if bias.ndim == 2 else (bias, np.zeros_like(bias))
    return GatedParams(cell_type, reorder_gates(np.asarray(native[f"{prefix}kernel"]).T, back),
                       reorder_gates(np.asarray(native[f"{prefix}recurrent_kernel"]).T, back),
                       reorder_gates(b_x, back), reorder_gates(b_h, back))


class KerasGatedRNN(KerasFamily, GatedLayerAdapter):
    """Keras ``LSTM`` / ``GRU`` layers, ``Bidirectional(merge_mode="concat")`` and stacked, as
    ``KerasSimpleRNN`` does for the vanilla cell."""

    # Two configurations (the cells cover the gates; these cover the layer's structure),
    # because eager Keras layers over 50 steps cost about a second each on this machine.
    configs = (
        LayerConfig(1, False, options=(("return_sequences", True), ("return_state", True), ("go_backwards", True))),
        LayerConfig(2, True, initial_state=False, options=(("return_sequences", False),)),
    )
    mutation_config = LayerConfig(2, True, options=(("return_sequences", True), ("return_state", True)))
    mutations = {
        "forward and backward swapped in layer 0": lambda n: _swap_prefix(n, "layer0.forward.", "layer0.backward."),
        "layers 0 and 1 swapped (recurrent kernels)": lambda n: {
            **n, "layer0.forward.recurrent_kernel": n["layer1.forward.recurrent_kernel"],
            "layer1.forward.recurrent_kernel": n["layer0.forward.recurrent_kernel"]},
    }


    def tag(self, layer: int, direction: int) -> str:
        return layer_prefix(layer, direction)

    def cell_spec(self, input_size, hidden_size, has_bias, tag):
        G, I, H = (4 if self.cell_type == "lstm" else 3), input_size, hidden_size
        two = self.cell_type == "gru" and self.gru_variant == "reset_after"
        return {f"{tag}kernel": ((I, G * H), f"(input_dim, {G}*units)"),
                f"{tag}recurrent_kernel": ((H, G * H), f"(units, {G}*units)"),
                f"{tag}bias": ((2, G * H), f"(2, {G}*units)") if two else ((G * H,), f"({G}*units,)")}

    def cell_to_native(self, params, tag):
        return gated_to_native(params, self.gru_variant, tag)

    def cell_from_native(self, native, tag):
        return gated_from_native(native, self.cell_type, tag)

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        return "layer0.forward.recurrent_kernel"

    hidden_axis = 0  # recurrent_kernel is (units, G*units)

    def _states(self, k, D):
        names = ("h", "c") if self.cell_type == "lstm" else ("h",)
        return [f"state {layer_prefix(k, d)[:-1]} {s}" for d in range(D) for s in names]

    def arrange(self, outputs, h_n, c_n, config: LayerConfig):
        D = 2 if config.bidirectional else 1
        top = config.num_layers - 1
        if config.option("return_sequences"):
            arranged = {"output": outputs.transpose(1, 0, 2)}
        else:
            arranged = {"output": np.concatenate([h_n[top * D + d] for d in range(D)], axis=-1)}
        if config.option("return_state"):
            for k in range(config.num_layers):
                for d in range(D):
                    arranged[f"state {layer_prefix(k, d)[:-1]} h"] = h_n[k * D + d]
                    if c_n is not None:
                        arranged[f"state {layer_prefix(k, d)[:-1]} c"] = c_n[k * D + d]
        return arranged

    def run_native(self, native: Native, xs, h0, c0, config: LayerConfig):
        dtype = self.check_gated_layer_call(native, xs, h0, c0, config)
        H = self._hidden_size(native, h0, config, xs.shape[2])
        layers, D, lstm = self.keras.layers, (2 if config.bidirectional else 1), self.cell_type == "lstm"
        x = self._tensor(np.ascontiguousarray(xs.transpose(1, 0, 2)))
        result = {}
        for k in range(config.num_layers):
            top = k == config.num_layers - 1
            options = dict(return_sequences=True if not top else bool(config.option("return_sequences")),
                           return_state=bool(config.option("return_state")),
                           go_backwards=bool(config.option("go_backwards")), dtype=dtype.name, **ZERO_INIT)
            rnn = layers.LSTM(H, **options) if lstm else layers.GRU(
                H, reset_after=self.gru_variant == "reset_after", **options)
            if config.bidirectional:
                rnn = layers.Bidirectional(rnn, merge_mode="concat", dtype=dtype.name)
            initial = None
            if h0 is not None:
                initial = [self._tensor(s[k * D + d]) for d in range(D) for s in ((h0, c0) if lstm else (h0,))]
            rnn.build(tuple(x.shape))
            cells = [rnn.forward_layer.cell, rnn.backward_layer.cell] if config.bidirectional else [rnn.cell]
            for d, cell in enumerate(cells):
                for name in ("kernel", "recurrent_kernel", "bias"):
                    getattr(cell, name).assign(native[layer_prefix(k, d) + name])
            out = rnn(x, initial_state=initial)
            if config.option("return_state"):
                x = out[0]
                result.update({name: self._numpy(s) for name, s in zip(self._states(k, D), out[1:])})
            else:
                x = out
        result["output"] = self._numpy(x)
        return result


def _gated_layer(cell_type: str, variant: str, backend: str):
    label = {"tensorflow": "tf"}.get(backend, backend)
    suffix = "-reset-before" if variant == "reset_before" else ""
    layer = "LSTM" if cell_type == "lstm" else "GRU"
    attributes = {
        "name": f"keras-{label}-{cell_type}{suffix}-rnn",
        "cell": f"keras.layers.{layer}" + ("(reset_after=False)" if variant == "reset_before" else ""),
        "cell_type": cell_type, "gru_variant": variant, "backend": backend,
        "distributions": ("keras", backend), "requires": ("keras", backend),
        "process_env": {"KERAS_BACKEND": backend}, "__module__": __name__,
    }
    if backend == "jax":
        attributes["known_issues"] = {("default", "float64"): JAX_TANH_FLOAT64[("tanh", "float64")]}
        attributes["known_issue_raises"] = (AssertionError, TypeError)
    if backend == "torch" and variant == "reset_before":
        # LSTM and GRU(reset_after=True) layers on torch hand the whole sequence to torch's own
        # nn.LSTM / nn.GRU kernels (keras/src/backend/torch/rnn.py) and compute float64 right;
        # reset_after=False has no torch kernel and falls back to keras.ops, matmul included.
        attributes["known_issues"] = {("default", "float64"): TORCH_MATMUL_FLOAT64[("tanh", "float64")]}
    return type(f"KerasGatedRNN_{label}_{cell_type}{suffix}".replace("-", "_"), (KerasGatedRNN,), attributes)


GATED_LAYERS = {
    cls.name: cls
    for backend in ("tensorflow", "jax", "torch")
    for cls in (_gated_layer("lstm", "reset_after", backend), _gated_layer("gru", "reset_after", backend),
                _gated_layer("gru", "reset_before", backend))
}
