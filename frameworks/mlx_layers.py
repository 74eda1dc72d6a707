"""MLX's recurrent layers (``mlx.nn.RNN``, ``mlx.nn.LSTM``, ``mlx.nn.GRU``; Apple's array framework, on this
Linux CPU through ``mlx[cpu]``): one layer, one direction, each returning the state of every step, so the
suite's cell kind ({"h": (T, batch, H)}, and "c"). Inputs batch first, (batch, T, I), as MLX takes them.

The mapping, one bias per gate where MLX adds the two (one rounding), both for the GRU's n gate:

    canonical:  W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H); gates h | i f g o | r z n
    mlx RNN:    Wxh (H, I) = W_x, Whh (H, H) = W_h, bias (H) = b_x + b_h
    mlx LSTM:   Wx (4H, I) = W_x, Wh (4H, H) = W_h, bias (4H) = b_x + b_h, gates i f g o as canonical
    mlx GRU:    Wx (3H, I) = W_x, Wh (3H, H) = W_h, gates r z n as canonical, reset after (b_hn inside r):
                b (3H) = [b_xr + b_hr, b_xz + b_hz, b_xn], bhn (H) = b_hn

and the way back returns the sums as b_x (b_h = 0 there), b_hn as itself. ``bias=False`` holds no bias at all.

What MLX computes (mlx/nn/layers/recurrent.py): x W^T + b for every step at once (``mx.addmm``), then the
recurrence; from no initial state it leaves out the W_h h term (zero) and, for the GRU, adds r * b_hn at the
first step: the step mlx#3249 reported dropping b_hn at (tests/equivalence/test_mlx.py). The RNN's
``nonlinearity`` is any callable: tanh, relu, sigmoid, identity; the LSTM's and GRU's are fixed.

Gradients by ``mx.vjp`` of the very forward the run evaluates; one step of ``mlx.optimizers.SGD`` or
``mlx.optimizers.Adam``. MLX's Adam has no bias correction by default (``bias_correction=False``): the suite's
Adam is the textbook one, so the system steps with ``bias_correction=True`` and says so (``optimizers``);
test_mlx.py shows the default is another optimizer.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import (
    CELL, NO_BIAS, Adapter, Mapping, Native, NativeSpec, distribution_version, import_framework, reorder_gates, scaled,
    swapped, swapped_gates, transposed,
)
from rnn_equivalence.reference.params import state_keys

# --- the mappings ----------------------------------------------------------------------------------------


class MLXRNNMapping(Mapping):
    """``mlx.nn.RNN``: Wxh, Whh, one bias (b_x + b_h)."""

    state_names = {"h": "hidden"}

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {"Wxh": ((H, I), "(hidden_size, input_size)"), "Whh": ((H, H), "(hidden_size, hidden_size)")}
        if has_bias:
            spec["bias"] = ((H,), "(hidden_size,)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"Wxh": params.W_x, "Whh": params.W_h}
        if params.has_bias:
            native["bias"] = params.b_x + params.b_h
        return native

    def cell_from_native(self, native: Native, tag: str):
        bias = native.get("bias")
        return self.params(native["Wxh"], native["Whh"], bias, None if bias is None else np.zeros_like(bias))

    def recurrent_kernel(self, config) -> str:
        return "Whh"


class MLXGatedMapping(Mapping):
    """``mlx.nn.LSTM`` (bias = b_x + b_h) and ``mlx.nn.GRU`` (b = the sums but b_xn; bhn = b_hn)."""

    state_names = {"h": "hidden", "c": "cell"}

    def _bias_names(self) -> tuple[str, ...]:
        return ("b", "bhn") if self.family == "gru" else ("bias",)

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        G = 4 if self.family == "lstm" else 3
        I, H, rows = input_size, hidden_size, G * hidden_size
        spec = {"Wx": ((rows, I), f"({G}*hidden_size, input_size)"),
                "Wh": ((rows, H), f"({G}*hidden_size, hidden_size)")}
        if has_bias and self.family == "gru":
            spec.update(b=((rows,), f"({G}*hidden_size,)"), bhn=((H,), "(hidden_size,)"))
        elif has_bias:
            spec["bias"] = ((rows,), f"({G}*hidden_size,)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"Wx": params.W_x, "Wh": params.W_h}
        if not params.has_bias:
            return native
        if self.family == "lstm":
            return {**native, "bias": params.b_x + params.b_h}
        H = params.hidden_size
        b = params.b_x.copy()
        b[:2 * H] += params.b_h[:2 * H]  # r and z: one bias each, the sum; n: b_xn alone, b_hn apart (bhn)
        return {**native, "b": b, "bhn": params.b_h[2 * H:].copy()}

    def cell_from_native(self, native: Native, tag: str):
        W_x, W_h = native["Wx"], native["Wh"]
        if self.family == "lstm":
            bias = native.get("bias")
            return self.params(W_x, W_h, bias, None if bias is None else np.zeros_like(bias))
        if native.get("b") is None:
            return self.params(W_x, W_h, None, None)
        b, bhn = np.asarray(native["b"]), np.asarray(native["bhn"])
        return self.params(W_x, W_h, b, np.concatenate([np.zeros(b.size - bhn.size, b.dtype), bhn]))

    def recurrent_kernel(self, config) -> str:
        return "Wh"


# --- the runner: the layer called on the whole sequence, mx.vjp, mlx.optimizers -------------------------

ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity")


class MLXRunner:
    """An MLX layer holding the native weights (``Module.update``), called on the sequence, batch first."""

    def start(self):
        self.mx = import_framework("mlx.core", self.name)
        self.nn = import_framework("mlx.nn", self.name)
        self.optim = import_framework("mlx.optimizers", self.name)

    def versions(self) -> dict[str, str]:
        return {"mlx": distribution_version("mlx")}

    def _layer(self, input_size: int, hidden_size: int, has_bias: bool, g: str):
        nn, mx = self.nn, self.mx
        options = {}
        if self.family == "rnn":
            options["nonlinearity"] = {"tanh": mx.tanh, "relu": nn.relu, "sigmoid": mx.sigmoid,
                                       "identity": lambda x: x}[g]
        return getattr(nn, self.cell.rsplit(".", 1)[1])(input_size, hidden_size, bias=has_bias, **options)

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        layer = self._layer(input_size, hidden_size, True, self.activations[0])
        return {name: tuple(value.shape) for name, value in layer.parameters().items()}

    def _forward(self, native: Native, xs, state, config, g: str):
        """(forward, its arguments): forward(*weights in ``native``'s order, x (T, batch, I), *initial states
        (1, batch, H)) -> [h (T, batch, H)] (+ [c]), MLX's layer holding the weights it is given, so that the
        run and ``mx.vjp`` evaluate the same function."""
        mx = self.mx
        dtype, H = self.check_call(native, xs, state, config, g)
        layer = self._layer(xs.shape[2], H, config.bias, g)
        names, keys = list(native), [key for key in state_keys(self.family) if state and key in state]
        lstm = self.family == "lstm"

        def forward(*arrays):
            weights, x, starts = arrays[:len(names)], arrays[len(names)], dict(zip(keys, arrays[len(names) + 1:]))
            layer.update(dict(zip(names, weights)))
            given = {key: value[0] for key, value in starts.items()}
            out = layer(mx.transpose(x, (1, 0, 2)), given.get("h"), *((given.get("c"),) if lstm else ()))
            outputs = out if lstm else (out,)
            return [mx.transpose(value, (1, 0, 2)) for value in outputs]

        arguments = [self._array(native[n]) for n in names] + [self._array(xs)]
        arguments += [self._array(state[key]) for key in keys]
        return forward, arguments, keys

    def _array(self, value):
        """An MLX array of the value's own dtype (``mx.array`` of a float64 NumPy array is float32 otherwise)."""
        value = np.asarray(value)
        return self.mx.array(value, dtype=getattr(self.mx, value.dtype.name))

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        forward, arguments, _ = self._forward(native, xs, state, config, g)
        return dict(zip(state_keys(self.family), (np.asarray(value) for value in forward(*arguments))))

    def gradients_native(self, native: Native, xs, state, config, g: str, cotangents: dict) -> dict:
        mx = self.mx
        forward, arguments, keys = self._forward(native, xs, state, config, g)
        outputs = dict(zip(state_keys(self.family), forward(*arguments)))
        self.check_cotangents(outputs, cotangents)
        seeds = [self._array(np.asarray(cotangents[key], dtype=xs.dtype)) for key in outputs]
        _, grads = mx.vjp(forward, arguments, seeds)
        grads = [np.asarray(grad) for grad in grads]
        n = len(native)
        return {"weights": dict(zip(native, grads[:n])), "inputs": grads[n],
                "state": dict(zip(keys, grads[n + 1:]))}

    def optimizer_step_native(self, native: Native, xs, state, config, g: str, cotangents: dict,
                              optimizer: dict) -> Native:
        """One step of MLX's optimizer, fresh (no moments, step 1), on ``gradients_native``'s gradients, by its
        own ``apply_gradients``. Adam with ``bias_correction=True`` (see the module's docstring)."""
        mx = self.mx
        step = self._optimizer(optimizer)  # refused before a run
        gradients = self.gradients_native(native, xs, state, config, g, cotangents)["weights"]
        params = {name: self._array(value) for name, value in native.items()}
        new = step.apply_gradients({name: self._array(value) for name, value in gradients.items()}, params)
        return {name: np.asarray(value) for name, value in new.items()}

    def _optimizer(self, optimizer: dict):
        name, arguments = self.optimizer_arguments(optimizer, {"epsilon": "eps"})
        if "learning_rate" not in arguments:  # MLX has no default for it
            raise ValueError(f"{self.cell}: {self.optimizers[name]}: expected a learning_rate")
        if name == "sgd":
            return self.optim.SGD(**arguments)  # momentum 0, no weight decay, no Nesterov: its defaults
        default_b1, default_b2 = 0.9, 0.999  # mlx.optimizers.Adam's betas default
        betas = [arguments.pop("beta_1", default_b1), arguments.pop("beta_2", default_b2)]
        return self.optim.Adam(betas=betas, bias_correction=True, **arguments)


# --- the systems --------------------------------------------------------------------------------------


# MLX runs in a nox session of its own (noxfile.py, ``nox -s mlx``), its report in docs/environments/mlx: its pins
# would fit the main environment, but its three systems cost the default run (issue 34's budget) what they add.
ENVIRONMENT = "mlx"


class MLXAdapter(Adapter):
    """An MLX system: what every one declares."""

    environment = ENVIRONMENT
    distributions = ("mlx",)
    requires = ("mlx",)
    autodiff = "mx.vjp"
    optimizers = {"sgd": "mlx.optimizers.SGD", "adam": "mlx.optimizers.Adam(bias_correction=True)"}
    # MLX's optimizers hold the learning rate as an mx.array made from a Python float, float32, and cast it to
    # the gradient's dtype (mlx/optimizers/optimizers.py); Adam's bias correction raises the betas to the step,
    # an mx.array, in float32 too: a float64 step uses them rounded to float32.
    optimizer_constants_dtype = "float32"
    configs = (CELL,)


def _gates_transposed_blockwise(name: str, gates: int):
    return lambda n: {**n, name: np.concatenate([b.T for b in np.split(n[name], gates)])}


class MLXRNN(MLXRunner, MLXRNNMapping, MLXAdapter):
    name = "mlx"
    cell = "mlx.nn.RNN"
    family = "rnn"
    activations = ACTIVATIONS
    mutations = {
        "Wxh transposed": transposed("Wxh"),
        "Whh transposed": transposed("Whh"),
        "Wxh and Whh swapped": swapped("Wxh", "Whh"),
        "bias dropped": scaled("bias", 0.0),
        "bias doubled (b_x + b_h added twice)": scaled("bias", 2.0),
    }


class MLXLSTM(MLXRunner, MLXGatedMapping, MLXAdapter):
    name = "mlx-lstm"
    cell = "mlx.nn.LSTM"
    family = "lstm"
    configs = (CELL, NO_BIAS)  # bias=False: the bias-free layer
    mutations = {
        "gates i and f swapped": swapped_gates("Wx", 0, 1, 4, axis=0),
        "gates g and o swapped in Wh": swapped_gates("Wh", 2, 3, 4, axis=0),
        "bias dropped": scaled("bias", 0.0),
        "Wh transposed blockwise": _gates_transposed_blockwise("Wh", 4),
    }


class MLXGRU(MLXRunner, MLXGatedMapping, MLXAdapter):
    name = "mlx-gru"
    cell = "mlx.nn.GRU"
    family, variant = "gru", "reset_after"
    kept_hidden_biases = ("n",)  # b_hn apart (bhn); r's and z's two biases summed in b
    configs = (CELL, NO_BIAS)
    mutations = {
        "gates r and z swapped (the Keras order)": lambda n: {
            **n, **{k: reorder_gates(n[k], (1, 0, 2)) for k in ("Wx", "Wh", "b")}},
        "bhn dropped": scaled("bhn", 0.0),
        "bhn moved into b (added outside r)": lambda n: {
            **n, "b": n["b"] + np.concatenate([np.zeros(2 * n["bhn"].size, n["bhn"].dtype), n["bhn"]]),
            "bhn": np.zeros_like(n["bhn"])},
        "Wh transposed blockwise": _gates_transposed_blockwise("Wh", 3),
    }
