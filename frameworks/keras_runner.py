"""Running Keras: its cells unrolled over the sequence here, its layers called on it, gradients by the backend's
own autodiff, one step of Keras's optimizers; Keras 3 (``keras``) on each backend and Keras 2 (``tf_keras``).
The weights' layout is ``rnn_equivalence.frameworks.keras_mapping``'s.

Activations, by name (``KERAS_ACTIVATIONS``, one table per Keras version): SimpleRNN's
``activation`` is g; an LSTM's or GRU's ``recurrent_activation`` is the canonical f (LSTM i, f,
o; GRU z, r) and its ``activation`` the canonical g (the candidate) and, in an LSTM, h too
(h = o * activation(c)): Keras has one function for both, so it computes "f,g,g" only. The
name "hard_sigmoid" is two functions: relu6(x + 3) / 6 in Keras 3 (every backend) and
clip(0.2 x + 0.5, 0, 1) in Keras 2. Keras has no peepholes, projection or clipping
(``check_params`` refuses them by name); tf_keras has no ``PeepholeLSTMCell`` (Keras 2's
tf.keras.experimental one, deprecated for tensorflow_addons', itself at its end of life).

Keras 3 chooses its backend once per process, from ``KERAS_BACKEND``. Each
backend is its own adapter whose ``process_env`` names it, so a run covers
all three: the one this process uses runs here, the others in child
processes (``rnn_equivalence.frameworks.child``).

Half precision (float16, bfloat16; issue 37). The suite's dtype names a run's data (frameworks/plan.py); Keras
names a dtype policy, storage and arithmetic together: ``float16`` (variables and computation in float16),
``mixed_float16`` (variables float32, each layer casting them and its inputs to float16 and computing on float16
tensors), and the same two for bfloat16. A run on float16 data is built under the system's policy for the format
(``KerasRunner.policies``: the mixed one, what Keras recommends for training; the variables then hold the half
values exactly, in float32) or under the one a configuration names (the option ``policy``:
tests/equivalence/test_half_keras.py). So a mixed policy is a way of running a half format, no dtype of its own:
its row is "float16" data judged by the bound of the arithmetic measured (``TestPlan.arithmetic``). Measured (keras
3.15.1 on tensorflow 2.21.0, jax 0.10.2, torch 2.13.0; tf_keras 2.21.0; this CPU, every family, cells and layers,
50 steps, against ``rnn_equivalence.reference.precision.run_rounded`` and the float64 reference):

- every backend, and tf_keras, computes float32 within each operation and rounds each result to the format: a
  product ``x @ kernel`` accumulates beyond the format (a sum of 1024 and a thousand terms of 0.25 comes out
  1274 exactly in float16, where a sum added up in float16 stays 1024; 1424 of 1024 and 200 terms of 2 in
  bfloat16), each elementwise operation rounded once, but on jax the sigmoid and the relu6 hard sigmoid, which XLA
  composes of operations each stored in half (frameworks/flax_cells.py, "Half precision"; keras-jax's rows are judged
  by that arithmetic: frameworks/keras_plan.py, ``XLA_HALF_ARITHMETIC``). No emulation is bitwise (27 to 66% of the outputs of a
  50-step run equal those of ``run_rounded`` under the mixed policy, 20 to 57% under half throughout: Keras adds
  in its own order, the SimpleRNN cell's bias to ``x @ kernel`` before ``h @ recurrent_kernel``, and a recurrence
  carries a last-bit difference on), and every run is within the bound of that arithmetic (the mixed policy's,
  reference/tolerance.py) with margin: worst err/bound 0.26 (float16) and 0.21 (bfloat16) on the cells, 0.10 and
  0.084 on one SimpleRNN layer, 0.02 on an LSTM layer; 5 to 7 times less of the bound of half throughout;
- the half policy computes bitwise what the mixed one does, on every backend: ``float16`` claims half precision
  throughout, and computes as ``mixed_float16`` does, float32 within each operation (its float16 variables need no
  cast; the mixed policy's casts of float32 variables holding half values are exact); the results are half (stored in the format, every tensor a float16 one), not float32 ones.
  Neither policy computes in float32 throughout nor in half throughout.

Every Keras half row is judged by the bound of float32 within each operation (``arithmetic``: "mixed_float16",
"mixed_bfloat16"), shown as "float16 (float32 within each op)". Gradients and optimizer steps do not run in half:
they have no derived half bound (frameworks/plan.py, ``CAPABILITY_DTYPES``). The layers run the half formats;
the cells, whose code the layers run step by step, were measured alike and keep float32 and float64.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rnn_equivalence.frameworks.base import Native, distribution_version, gate_and_candidate, import_framework
from rnn_equivalence.frameworks.jax_cache import use_persistent_cache
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.stack import StackParams

# Canonical activation names (rnn_equivalence.reference.activations) -> each Keras version's own. "hard_sigmoid"
# is relu6(x + 3) / 6 in Keras 3: tf.nn.relu6(x + 3) / 6, jax.nn.hard_sigmoid, torch's hardsigmoid
# (keras/src/backend/*/nn.py; keras.ops.hard_sigmoid's docstring still says 0.2 x + 0.5), and
# clip(0.2 x + 0.5, 0, 1) in Keras 2 (tf_keras/src/backend.py): the same name, two functions.
_KERAS_SHARED = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid", "identity": "linear"}
KERAS_ACTIVATIONS = {"keras": {**_KERAS_SHARED, "hard_sigmoid_relu6": "hard_sigmoid"},
                     "tf_keras": {**_KERAS_SHARED, "hard_sigmoid_0.2": "hard_sigmoid"}}
KERAS_HARD_SIGMOID = {"keras": "hard_sigmoid_relu6", "tf_keras": "hard_sigmoid_0.2"}  # each one's, canonically
# Every weight is assigned right after build, so the initial values never matter; the
# default orthogonal recurrent initializer would compile a QR decomposition for every
# new shape (1 to 3 s each on the JAX backend).
ZERO_INIT = {"kernel_initializer": "zeros", "recurrent_initializer": "zeros", "bias_initializer": "zeros"}
KERAS_LAYERS = {"rnn": "SimpleRNN", "lstm": "LSTM", "gru": "GRU"}  # the cells are these names + "Cell"
MASK_VALUE = 0.0  # keras.layers.Masking's default mask_value


class KerasImplementation:
    """How to reach one Keras implementation: its module, tensors in and out, its version."""

    module = "keras"
    backend: str | None = None  # Keras 3 only

    def start(self):
        self._import_keras()

    def describe(self) -> str:
        return self.cell + self._backend_text()

    def _import_keras(self):
        if self.backend == "jax":
            # float64 in JAX needs x64 switched on before any array exists; the persistent compilation
            # cache (rnn_equivalence.frameworks.jax_cache) must be set before the first compile.
            jax = import_framework("jax", self.name)
            jax.config.update("jax_enable_x64", True)
            use_persistent_cache(jax)
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

    # --- tensors, in this Keras's own ops (tf_keras has none of its own: TensorFlow's) ----
    @property
    def _ops(self):
        """``keras.ops`` in Keras 3; TensorFlow in Keras 2, whose stack and transpose take the same arguments."""
        return self.keras.ops if self.module == "keras" else import_framework("tensorflow", self.name)

    def _states(self, state) -> dict | None:
        """An initial state as tensors, {key: (L*D, batch, H)}, or None."""
        return None if state is None else {key: self._tensor(np.asarray(value)) for key, value in state.items()}

    def _evaluate(self, variables: dict, forward, xs, state, key=None) -> dict[str, np.ndarray]:
        """``forward`` (tensors in, a dict of tensors out) on NumPy arguments, its outputs as NumPy;
        compiled where ``key`` is given (``_stateless``)."""
        x, states = self._tensor(xs), self._states(state)
        if key is None:
            outputs = forward(x, states)
        else:
            pure = self.autodiff_runtime.jit(("forward", key), self._stateless(variables, forward))
            outputs = pure({n: variable.value for n, variable in variables.items()}, x, states or {})
        return {name: self._numpy(value) for name, value in outputs.items()}

    def _stateless(self, variables: dict, forward):
        """``forward`` as a pure function of (weights by native name, x, states), for jax: Keras reads every
        variable from the scope, so the weights are the function's arguments."""
        names = list(variables)

        def pure(weights, x, states):
            with self.keras.StatelessScope(state_mapping=[(variables[n], weights[n]) for n in names]):
                return forward(x, states or None)

        return pure

    # --- gradients and one optimizer step: the backend's own autodiff -----------------------
    def _cotangents(self, outputs: dict, cotangents: dict) -> dict:
        self.check_cotangents(outputs, cotangents)
        return cotangents

    def _differentiate(self, variables: dict, forward, xs, state, cotangents: dict, key=None):
        """The vector-Jacobian product of ``forward(x, state)`` (the forward ``run_native`` evaluates) with
        ``cotangents``, by the backend's own autodiff (``rnn_equivalence.frameworks.autodiff``, shared with
        every adapter on it): the variables' gradients as backend tensors (what the optimizer takes), and the
        inputs' and initial state's as NumPy, each in its argument's shape."""
        names, keys = list(variables), list(state or {})
        x, states = self._tensor(xs), self._states(state) or {}
        autodiff, check = self.autodiff_runtime, self._cotangents
        if autodiff.name == "jax.vjp":
            _, (weights, x_grad, state_grads) = autodiff.vjp(
                self._stateless(variables, forward), ({n: variables[n].value for n in names}, x, states), cotangents,
                check, key=key)
            return weights, self._numpy(x_grad), {k: self._numpy(state_grads[k]) for k in keys}
        if autodiff.name == "torch.autograd":
            x.requires_grad_(True)
            for value in states.values():
                value.requires_grad_(True)
            targets = [variables[n].value for n in names] + [x] + [states[k] for k in keys]
        else:  # tf.GradientTape, Keras 3's tensorflow backend or tf_keras; trainable variables are watched anyway
            targets = [variables[n] for n in names] + [x] + [states[k] for k in keys]
        _, grads = autodiff.vjp(lambda: forward(x, states or None), targets, cotangents, check,
                                **({} if autodiff.name == "torch.autograd" else {"watch": [x, *states.values()]}))
        weights, (x_grad, *state_grads) = dict(zip(names, grads[:len(names)])), grads[len(names):]
        return weights, self._numpy(x_grad), {k: self._numpy(d) for k, d in zip(keys, state_grads)}

    def _gradients(self, variables: dict, forward, xs, state, cotangents: dict, key=None) -> dict:
        weights, x_grad, state_grads = self._differentiate(variables, forward, xs, state, cotangents, key)
        dtype = np.asarray(xs).dtype  # the run's: a backend that computed in float32 does not change it
        return {"weights": {n: self._numpy(d).astype(dtype, copy=False) for n, d in weights.items()},
                "inputs": x_grad.astype(dtype, copy=False),
                "state": {k: d.astype(dtype, copy=False) for k, d in state_grads.items()}}

    def _optimizer(self, optimizer: dict):
        """The framework's optimizer, by Keras's own argument names (the suite's); a key left out keeps
        Keras's default. SGD is Keras's default SGD: momentum 0, no Nesterov, no weight decay."""
        name, arguments = self.optimizer_arguments(optimizer)
        return {"sgd": self.keras.optimizers.SGD, "adam": self.keras.optimizers.Adam}[name](**arguments)

    def _optimizer_step(self, variables: dict, forward, xs, state, cotangents: dict, optimizer: dict,
                        key=None) -> Native:
        """One step of the optimizer, fresh, with the gradients of ``_differentiate``, applied to the
        variables that hold the native weights (a summed bias is one variable: one update)."""
        step = self._optimizer(optimizer)
        weights, _, _ = self._differentiate(variables, forward, xs, state, cotangents, key)
        pairs = [(weights[n], variables[n]) for n in variables]
        if self.module == "keras":
            step.apply([grad for grad, _ in pairs], [variable for _, variable in pairs])
        else:
            step.apply_gradients(pairs)
        return {n: np.asarray(variable.numpy()) for n, variable in variables.items()}

    def _backend_text(self) -> str:
        return f" (backend {self.keras.backend.backend()})" if self.module == "keras" else ""

    def versions(self) -> dict[str, str]:
        # The backend does the arithmetic, so its version belongs to the result.
        backend = self.backend or "tensorflow"
        return {self.module: distribution_version(self.module), backend: distribution_version(backend)}


class KerasRunner(KerasImplementation):
    """Building this family's Keras objects and differentiating through them, for the cell and layer runners."""

    # Per half format, the Keras dtype policy its runs build the cells and layers with (``policy``); a dtype not
    # named here is its own policy ("float32", "float64").
    policies: dict[str, str] = {}

    @classmethod
    def native_activation(cls, name: str) -> str:
        """This Keras version's name of a canonical activation (rnn_equivalence.reference.activations)."""
        table = KERAS_ACTIVATIONS[cls.module]
        if name not in table:
            raise ValueError(f"{cls.module}: no activation computes {name!r}; it has {sorted(table)}")
        return table[name]

    def activation_arguments(self, spec: str) -> dict[str, str]:
        """The keyword arguments for an activation spec: SimpleRNN's g as ``activation``; a gated
        spec's f as ``recurrent_activation`` and g as ``activation``, which an LSTM applies to c
        too, so its h must be g."""
        if self.family == "rnn":
            return {"activation": self.native_activation(spec)}
        f, g = gate_and_candidate(self.family, spec, self.cell, "Keras's `activation`")
        return {"recurrent_activation": self.native_activation(f), "activation": self.native_activation(g)}

    def policy(self, dtype: str, config: LayerConfig | None = None) -> str:
        """The Keras dtype policy a run on data in ``dtype`` builds its cells and layers with: the
        configuration's option ``policy`` where it names one (tests/equivalence/test_half_keras.py), else the
        system's (``policies``: a half format runs under its mixed policy), else the dtype itself."""
        chosen = config.option("policy") if config is not None else None
        return chosen or self.policies.get(dtype, dtype)

    def _assign(self, variable, value) -> None:
        """``variable.assign(value)`` in the variable's own dtype: under a mixed policy the variables are float32
        and the weights (values of the half format) go in exactly."""
        value = np.asarray(value)
        dtype = getattr(variable.dtype, "name", variable.dtype)  # tf_keras: a tf.DType; Keras 3: a string
        variable.assign(value if value.dtype.name == dtype else value.astype(np.float32).astype(dtype))

    def _make(self, units: int, g: str, use_bias: bool, dtype: str, **layer_options):
        """The Keras cell (or layer, with ``layer_options``) of this family, zero-initialized; ``dtype`` is a
        Keras dtype policy's name (``policy``)."""
        options = dict(use_bias=use_bias, dtype=dtype, **ZERO_INIT, **self.activation_arguments(g), **layer_options)
        if self.family == "gru":
            options["reset_after"] = self.variant == "reset_after"
        return getattr(self.keras.layers, KERAS_LAYERS[self.family] + ("" if self.layer else "Cell"))(units, **options)

    # --- gradients and one optimizer step, of the forward ``run_native`` evaluates (``_prepare``) ---
    def gradients_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                         padding=None) -> dict:
        variables, forward, key = self._prepare(native, xs, state, config, g, padding)
        return self._gradients(variables, forward, xs, state, cotangents, key)

    def optimizer_step_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                              optimizer: dict, padding=None) -> Native:
        variables, forward, key = self._prepare(native, xs, state, config, g, padding)
        return self._optimizer_step(variables, forward, xs, state, cotangents, optimizer, key)

    @staticmethod
    def _weight_shapes(cell, tag: str = "") -> dict[str, tuple[int, ...]]:
        return {tag + v.name.split("/")[-1].split(":")[0]: tuple(v.shape) for v in cell.weights}


class KerasCellRunner(KerasRunner):
    """``SimpleRNNCell``, ``LSTMCell`` or ``GRUCell``, unrolled over the sequence here."""

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self._make(hidden_size, self.activations[0], self.layout_config.bias, "float32")
        cell.build((None, input_size))
        return self._weight_shapes(cell)

    def _prepare(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """The cell holding ``native`` (its variables by native name), the forward of a run:
        (x (T, batch, I), state {key: (1, batch, H)} or None) -> {"h": (T, batch, H), "c"}, as tensors,
        and the key of the run compiled whole: None, a cell's run is never compiled whole. Compiled, its
        step is (``_build_cell``), once per cell and batch (any T, a state given or not)."""
        if padding is not None:
            self.check_padding(padding, xs)  # a cell takes no padded batch: refused, naming why
        dtype, H = self.check_call(native, xs, state, config, g)
        step_key = self.compile_key(native, xs[:1], None, config, g)  # one step's: T and the state left out
        variables, forward = self.built_once(step_key, lambda: self._build_cell(native, xs, config, g, dtype, H,
                                                                               step_key is not None))
        for name, value in native.items():
            self._assign(variables[name], value)
        return variables, forward, None

    def _build_cell(self, native: Native, xs, config: LayerConfig, g: str, dtype, H: int, compiled: bool):
        """The cell and the forward unrolling it. Compiled (jax): the step is ``jax.jit``-ed with the weights
        as its arguments, read from the variables at each call, so that a run reads the assigned weights and
        the differentiated forward (``_differentiate``'s scope) the traced ones. Compiling the unrolled
        sequence would cost more than running it (measured: 50 GRU steps)."""
        cell = self._make(H, g, config.bias, self.policy(dtype.name, config))
        cell.build((None, xs.shape[2]))
        variables = {name: getattr(cell, name) for name in native}
        keys, zeros = state_keys(self.family), np.zeros((xs.shape[1], H), dtype)

        def step(weights, x, carry):
            with self.keras.StatelessScope(state_mapping=[(variables[n], weights[n]) for n in variables]):
                return list(cell(x, carry)[1])

        compiled_step = self.autodiff_runtime.jax.jit(step) if compiled else None

        def forward(x, states):
            # Keras's states are [h] or [h, c]; a state not given starts at zeros.
            carry = [states[key][0] if states and key in states else self._tensor(zeros) for key in keys]
            trace = {key: [] for key in keys}
            for t in range(x.shape[0]):
                if compiled_step is None:
                    carry = list(cell(x[t], carry)[1])
                else:
                    carry = compiled_step({n: variable.value for n, variable in variables.items()}, x[t], carry)
                for key, value in zip(keys, carry):
                    trace[key].append(value)
            return {key: self._ops.stack(values, axis=0) for key, values in trace.items()}

        return variables, forward

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str) -> dict:
        variables, forward, key = self._prepare(native, xs, state, config, g)
        return self._evaluate(variables, forward, xs, state, key)


class KerasLayerRunner(KerasRunner):
    """``SimpleRNN``, ``LSTM`` or ``GRU`` layers, each wrapped in ``Bidirectional(merge_mode="concat")``
    when bidirectional, stacked with ``return_sequences=True`` below the top layer."""

    @classmethod
    def reads_reversed(cls, config: LayerConfig) -> bool:
        """``go_backwards`` reads x_T..x_1 and reports in that order."""
        return bool(config.option("go_backwards"))

    def _state_key(self, layer: int, direction: int, key: str) -> str:
        """The name of a returned final state: "state layer0.forward" (SimpleRNN), "... h", "... c"."""
        return f"state {self.tag(layer, direction)[:-1]}" + ("" if self.family == "rnn" else f" {key}")

    def arrange(self, result, config: LayerConfig):
        D, top = config.num_directions, config.num_layers - 1
        if config.option("return_sequences"):
            arranged = {"output": result["output"].transpose(1, 0, 2)}  # Keras is batch first
        else:  # the last step of each direction: its final state
            arranged = {"output": np.concatenate([result["h_n"][top * D + d] for d in range(D)], axis=-1)}
        if config.option("return_state"):
            for k in range(config.num_layers):
                for d in range(D):
                    for key in state_keys(self.family):
                        arranged[self._state_key(k, d, key)] = result[f"{key}_n"][k * D + d]
        return arranged

    def _layer(self, layer: int, H: int, config: LayerConfig, g: str, dtype: str):
        """Layer ``layer`` of the stack, in ``Bidirectional`` when bidirectional; not yet built."""
        top = layer == config.num_layers - 1
        options = {key: config.option(key) for key in ("zero_output_for_mask", "stateful") if config.option(key)}
        dtype = self.policy(dtype, config)
        rnn = self._make(H, g, config.bias, dtype,
                         return_sequences=True if not top else bool(config.option("return_sequences")),
                         return_state=bool(config.option("return_state")),
                         go_backwards=bool(config.option("go_backwards")), **options)
        if config.bidirectional:
            rnn = self.keras.layers.Bidirectional(rnn, merge_mode="concat", dtype=dtype)
        return rnn

    @staticmethod
    def _cells(rnn, config: LayerConfig) -> list:
        return [rnn.forward_layer.cell, rnn.backward_layer.cell] if config.bidirectional else [rnn.cell]

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        config, shapes = self.layout_config, {}
        for k in range(config.num_layers):
            layer_input = input_size if k == 0 else config.num_directions * hidden_size
            rnn = self._layer(k, hidden_size, config, self.activations[0], "float32")
            rnn.build((1, 1, layer_input))
            for d, cell in enumerate(self._cells(rnn, config)):
                shapes.update(self._weight_shapes(cell, self.tag(k, d)))
        return shapes

    # --- padded batches: a mask ---------------------------------------------------------
    @classmethod
    def padded_output(cls, config: LayerConfig) -> str:
        """A masked step repeats the last real output (keras/src/backend/*/rnn.py), unless the layer
        has ``zero_output_for_mask=True``, which ``Bidirectional`` forces on both halves when it
        returns sequences (keras/src/layers/rnn/bidirectional.py). Without return_sequences only
        the final states are compared (``arrange``)."""
        zeros = config.bidirectional or config.option("zero_output_for_mask")
        return "zeros" if zeros and config.option("return_sequences") else "repeat"

    def _inputs(self, xs, config: LayerConfig, padding):
        """How the inputs reach the stack: a function of the time-major input tensor returning the
        batch-first inputs and the mask to pass to every layer call, so that the differentiated
        forward takes them from the same tensor. ``("mask", "argument")``: the layer's ``mask``
        argument, (batch, T) booleans. ``("mask", "Masking")``: padded steps set to ``MASK_VALUE`` (how
        Masking users mark them; the suite's random inputs never equal it) and a
        ``keras.layers.Masking`` in front, whose mask Keras hands on layer to layer."""
        how = config.option("mask")
        if how not in (None, "argument", "Masking"):
            raise ValueError(f"{self.cell}: option mask: expected 'argument' or 'Masking', got {how!r}")
        if padding is not None and how is None:
            raise ValueError(f"{self.cell}: configuration {config} takes no {self.lengths_name}; "
                             f"a padded batch needs the option ('mask', 'argument') or ('mask', 'Masking')")
        # A Padding, or (run_native only, unchecked) any (T, batch) boolean mask: Keras takes any.
        mask = None if padding is None else (padding.mask(xs.shape[0]) if hasattr(padding, "mask")
                                             else np.asarray(padding, bool)).T
        ops, shape = self._ops, (xs.shape[1], xs.shape[0], xs.shape[2])

        def batch_first(x):
            return ops.transpose(x, (1, 0, 2))

        if how == "Masking":
            masking = self.keras.layers.Masking(MASK_VALUE, dtype=self.policy(xs.dtype.name, config))
            if mask is None:
                return lambda x: (masking(batch_first(x)), None)
            # The padded steps become MASK_VALUE inside the framework (a where, not an assignment to
            # the array), so that their inputs get the gradient the run gives them: none.
            keep = self._tensor(np.broadcast_to(mask[:, :, None], shape).copy())
            padded = self._tensor(np.full(shape, MASK_VALUE, xs.dtype))
            return lambda x: (masking(ops.where(keep, batch_first(x), padded)), None)
        mask = None if mask is None else self._tensor(mask)
        return lambda x: (batch_first(x), mask)

    # --- running --------------------------------------------------------------------------
    def _built_layers(self, native: Native, batch_shape, config: LayerConfig, H: int, g: str, dtype: str) -> list:
        """The stack's Keras layers, built for ``batch_shape`` (batch, T, I) and holding ``native``."""
        layers, shape = [], tuple(batch_shape)
        for k in range(config.num_layers):
            rnn = self._layer(k, H, config, g, dtype)
            rnn.build(shape)
            for d, cell in enumerate(self._cells(rnn, config)):
                for name in self.cell_spec(1, 1, config.bias, ""):
                    self._assign(getattr(cell, name), native[self.tag(k, d) + name])
            layers.append(rnn)
            shape = shape[:2] + (config.num_directions * H,)
        return layers

    def _variables(self, layers: list, config: LayerConfig) -> dict:
        """The variables of the built stack, by native name."""
        return {self.tag(k, d) + name: getattr(cell, name) for k, rnn in enumerate(layers)
                for d, cell in enumerate(self._cells(rnn, config)) for name in self.cell_spec(1, 1, config.bias, "")}

    def _call(self, layers: list, x, mask, state, config: LayerConfig) -> dict:
        """Call the built stack on ``x`` (batch first), each layer with the mask and its initial
        state (tensors, {key: (L*D, batch, H)} or None); the outputs, as tensors, as ``arrange``
        names them."""
        D, keys = config.num_directions, state_keys(self.family)
        result = {}
        for k, rnn in enumerate(layers):
            # Bidirectional takes the forward states, then the backward ones; an LSTM's are [h, c].
            initial = None if state is None else [state[key][k * D + d] for d in range(D) for key in keys]
            out = rnn(x, initial_state=initial) if mask is None else rnn(x, initial_state=initial, mask=mask)
            if config.option("return_state"):
                x = out[0]
                names = [self._state_key(k, d, key) for d in range(D) for key in keys]
                result.update(zip(names, out[1:]))
            else:
                x = out
        result["output"] = x
        return result

    def _prepare(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """The stack holding ``native`` (its variables by native name), the forward of a run:
        (x (T, batch, I), state {key: (L*D, batch, H)} or None) -> the outputs, as tensors, and its
        compile key (None: eager; a stateful layer's carry lives in its variables, so it runs eagerly)."""
        dtype, H = self.check_call(native, xs, state, config, g)
        stateful = config.option("stateful")
        key = None if stateful else self.compile_key(native, xs, state, config, g, padding)

        def build():
            inputs = self._inputs(xs, config, padding)
            layers = self.built_once(None if stateful else self._layers_key(native, xs, config, g),
                                     lambda: self._reusable_layers(native, xs, config, H, g, dtype.name))
            return self._variables(layers, config), lambda x, states: self._call(layers, *inputs(x), states, config)

        variables, forward = self.built_once(key, build)
        # Every run's weights go in through Keras's own Variable.assign (shapes and dtype checked by Keras),
        # into layers that may have run other cases of the same structure (``_layers_key``).
        for name, variable in variables.items():
            self._assign(variable, native[name])
        return variables, forward, key

    def _layers_key(self, native: Native, xs, config: LayerConfig, g: str) -> tuple:
        """What the stack's layers depend on: the ``structure_key`` of a one-step run of one element from no
        initial state. The batch, the steps, the initial state and the mask are arguments of a call, not of
        the layers (none is stateful here: a stateful layer's carry lives in it, and it is built per run).
        Building a stack costs 50-100 ms (``Bidirectional`` copies its layer through its config), about what
        the run costs; at default depth 150 builds of three systems' layers came down to 87 this way."""
        return ("layers", self.structure_key(native, xs[:1, :1], None, replace(config, initial_state=False), g))

    def _reusable_layers(self, native: Native, xs, config: LayerConfig, H: int, g: str, dtype: str) -> list:
        """``_built_layers`` for ``_layers_key``, checked to hold no weight that a run does not assign: a
        reused stack carries nothing of the case it ran before (its values would leak into this one)."""
        layers = self._built_layers(native, (xs.shape[1], xs.shape[0], xs.shape[2]), config, H, g, dtype)
        assigned = {id(variable) for variable in self._variables(layers, config).values()}
        held = [variable for rnn in layers for variable in rnn.trainable_variables if id(variable) not in assigned]
        if held:
            raise AssertionError(f"{self.cell}: the stack holds weights no run assigns, which a reused stack would "
                                 f"carry from one case to the next: {[variable.name for variable in held]}")
        return layers

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        variables, forward, key = self._prepare(native, xs, state, config, g, padding)
        return self._evaluate(variables, forward, xs, state, key)

    # --- chunked runs ---------------------------------------------------------------------
    def returned_state(self, outputs: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """The returned states (``return_state=True``), stacked as the next call's initial state."""
        if not config.option("return_state"):
            raise ValueError(f"{self.cell}: configuration {config} returns no state to carry; "
                             f"use ('return_state', True) or ('stateful', True)")
        D = config.num_directions
        return {key: np.stack([outputs[self._state_key(k, d, key)] for k in range(config.num_layers)
                               for d in range(D)]) for key in state_keys(self.family)}

    def run_chunks(self, params, chunks, state, config: LayerConfig) -> list[dict[str, np.ndarray]]:
        """``stateful=True``: the same layers called on every chunk carry their own state (the initial
        state, if any, given to the first call); otherwise each call from the returned states."""
        if not config.option("stateful"):
            return super().run_chunks(params, chunks, state, config)
        stack = StackParams.of(params)
        self.check_params(stack, config)
        return self.run_native_chunks(self.to_native(stack, config), [np.asarray(xs) for xs in chunks], state,
                                      config, stack.activation)

    def run_native_chunks(self, native: Native, chunks, state, config: LayerConfig, g: str) -> list[dict]:
        """One stateful stack called on each chunk in turn (in the child process where the backend is
        another's: the layers live there)."""
        dtype, H = self.check_call(native, chunks[0], state, config, g)
        layers, outputs, state = None, [], self._states(state)
        for xs in chunks:
            self.check_call(native, xs, None, config, g)
            x, mask = self._inputs(xs, config, None)(self._tensor(xs))
            layers = layers or self._built_layers(native, x.shape, config, H, g, dtype.name)
            outputs.append({key: self._numpy(value)
                            for key, value in self._call(layers, x, mask, state, config).items()})
            state = None  # later calls start from the layers' own states
        return outputs
