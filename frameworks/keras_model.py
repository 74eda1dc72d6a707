"""The functional Keras model a user writes around the suite's Keras layers, as the converters take it.

Shared by the converters that start from a Keras model (``rnn_equivalence.frameworks.tf2onnx_export``,
``rnn_equivalence.frameworks.tflite_export``): an ``Input`` for the sequence (batch first) and one for each initial
state the configuration gives, named ``x`` and ``initial_{key}_{index}``; the layers' outputs (the
sequence or the last output, then the final states with ``return_state``) as the model's outputs, in
``KerasLayer._call``'s order. The weights are the Keras layers' (``KerasLayer``'s mapping, unchanged).

Padded batches go in as a deployed model takes them, the mask the model's own computation, which the
converter has to carry into the converted graph: a ``Masking`` layer in front of the stack (the option
``("mask", "Masking")``), the padded steps of ``x`` set to its mask value; or an ``Embedding(mask_zero=True)``
in front (``("mask", "mask_zero")``), token 0 the padding, whose table holds the run's inputs (token
``1 + t * batch + b`` is step ``t`` of element ``b``, an exact lookup), so that the reference of the padded
batch is the reference of ``xs``. A ``mask`` argument (``("mask", "argument")``) is no input of a
functional model and is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from rnn_equivalence.frameworks.base import LayerConfig, Native, distribution_version, import_framework
from rnn_equivalence.frameworks.conversion_cache import weights_digests
from rnn_equivalence.frameworks.keras_adapters import KerasLayer
from rnn_equivalence.frameworks.keras_runner import MASK_VALUE
from rnn_equivalence.reference.params import state_keys


EMBEDDING = "embedding.embeddings"  # the mask_zero Embedding's table, among the model's variables


def masking_configs(configs) -> tuple[LayerConfig, ...]:
    """The padded configurations of the Keras layers that a converted model takes: those with a ``Masking``
    layer in front (the others pass a ``mask`` argument, no input of a model)."""
    kept = tuple(config for config in configs if config.option("mask") == "Masking")
    if not kept:
        raise ValueError(f"no padded configuration with a Masking layer among {configs}")
    return kept


def carried_state_configs(configs) -> tuple[LayerConfig, ...]:
    """The chunked configurations of the Keras layers that a converted model takes: the returned states fed
    back as the next call's initial states, as a deployed model carries them (not ``stateful=True``, whose
    carry lives in the layers' variables, which a converted graph does not keep between calls)."""
    kept = tuple(config for config in configs if not config.option("stateful"))
    if not kept:
        raise ValueError(f"no chunked configuration that returns its states among {configs}")
    return kept


@dataclass
class BuiltModel:
    """A functional model, its variables by native name, its inputs' specs and its outputs' names; what a
    converter traced of it (``traced``), kept with it."""

    model: object
    variables: dict
    specs: list
    output_names: list[str]
    traced: dict = field(default_factory=dict)


class KerasModelExport(KerasLayer):
    """``KerasLayer``'s stack in a functional model, for a converter to take."""

    def start(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        super().start()
        self.tf = import_framework("tensorflow", self.name)

    def versions(self) -> dict[str, str]:
        """The Keras and its backend (``KerasImplementation``), and the converter and runtime that ran the model."""
        return {**super().versions(), **{d: distribution_version(d) for d in self.distributions}}

    def input_names(self, state, config: LayerConfig) -> list[str]:
        """The model's inputs, in order: ``x``, then the initial states (layer-major, direction, key)."""
        if state is None:
            return ["x"]
        D, keys = config.num_directions, state_keys(self.family)
        return ["x"] + [f"initial_{key}_{index}" for index in range(config.num_layers * D) for key in keys]

    def functional_model(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None = None):
        """The model holding ``native``, the ``tf.TensorSpec`` of each input (``batch`` None: any batch
        size) and the names of its outputs. Built once per structure and batch (``structure_key``), the
        weights of ``native`` assigned to its variables every time: a converter reads the values the
        variables hold when it converts (a test converts one model with two sets of weights)."""
        self.check_call(native, xs, state, config, g)
        built = self.built_model(native, xs, state, config, g, batch)
        weights = self.model_weights(native, xs, config)
        for name, variable in built.variables.items():
            variable.assign(weights[name])
        return built.model, built.specs, built.output_names

    def model_weights(self, native: Native, xs, config: LayerConfig) -> Native:
        """The model's weights by name: ``native``, and with ``mask_zero`` the embedding table of ``xs`` (row 0,
        the padding token's, zeros; row ``1 + t * batch + b``, step ``t`` of element ``b``)."""
        if self._masking(config) != "mask_zero":
            return native
        T, batch, I = xs.shape
        return {**native, EMBEDDING: np.concatenate([np.zeros((1, I), xs.dtype), xs.reshape(T * batch, I)])}

    def built_model(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None) -> "BuiltModel":
        """The model of ``functional_model`` for the structure of this run, built on first use; what a
        converter traces of it may be kept in its ``traced``."""
        key = ("model", batch, self.structure_key(native, xs, state, config, g))
        return self.built_once(key, lambda: self._build_model(native, xs, state, config, g, batch))

    def _build_model(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None) -> "BuiltModel":
        keras, tf = self.keras, self.tf
        dtype, H = self.check_call(native, xs, state, config, g)
        T, run_batch, I = xs.shape
        layers = self._built_layers(native, (run_batch, T, I), config, H, g, dtype.name)
        names = self.input_names(state, config)
        how = self._masking(config)
        x_shape, x_dtype = ((T,), "int32") if how == "mask_zero" else ((T, I), dtype.name)
        inputs = [keras.Input(x_shape, batch_size=batch, dtype=x_dtype, name="x")]
        inputs += [keras.Input((H,), batch_size=batch, dtype=dtype.name, name=name) for name in names[1:]]
        specs = [tf.TensorSpec((batch, *x_shape), x_dtype, name="x")]
        specs += [tf.TensorSpec((batch, H), dtype.name, name=name) for name in names[1:]]
        x, variables = inputs[0], self._variables(layers, config)
        if how == "Masking":
            x = keras.layers.Masking(MASK_VALUE, dtype=dtype.name)(x)
        elif how == "mask_zero":
            embedding = keras.layers.Embedding(1 + T * run_batch, I, mask_zero=True, dtype=dtype.name)
            x = embedding(x)
            variables[EMBEDDING] = embedding.embeddings
        states = None
        if state is not None:
            keys, tensors = state_keys(self.family), iter(inputs[1:])
            states = {key: [] for key in keys}
            for _ in range(config.num_layers * config.num_directions):
                for key in keys:
                    states[key].append(next(tensors))
        outputs = self._call(layers, x, None, states, config)
        assert list(outputs) == self.output_names(config), (list(outputs), self.output_names(config))
        return BuiltModel(keras.Model(inputs, list(outputs.values())), variables, specs, list(outputs))

    def output_names(self, config: LayerConfig) -> list[str]:
        """The model's outputs, in order, as ``KerasLayer._call`` names them: each layer's final states
        (``return_state``: direction, then key), then the output (checked at every build)."""
        keys = state_keys(self.family)
        names = [self._state_key(k, d, key) for k in range(config.num_layers) for d in range(config.num_directions)
                 for key in keys] if config.option("return_state") else []
        return names + ["output"]

    def conversion_key(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None) -> tuple:
        """What the converted model depends on (``rnn_equivalence.frameworks.conversion_cache``): the structure,
        the batch the model fixes (None: any) and the weights' values."""
        return (repr(self.structure_key(native, xs, state, config, g)), batch,
                weights_digests(self.model_weights(native, xs, config)))

    def _masking(self, config: LayerConfig) -> str | None:
        """What computes the model's mask: "Masking" (a Masking layer), "mask_zero" (an Embedding), or None."""
        how = config.option("mask")
        if how not in (None, "Masking", "mask_zero"):
            raise ValueError(f"{self.describe()}: option mask: expected 'Masking' (a Masking layer in the model) or "
                             f"'mask_zero' (an Embedding), got {how!r}; a converted model takes no mask argument")
        return how

    def feeds(self, xs, state, config: LayerConfig, padding=None) -> dict:
        """The model's inputs by name, from a time-major run's inputs (the model is batch first); a padded
        batch's padded steps set to the ``Masking`` layer's mask value (the suite's random inputs never
        equal it), or with ``mask_zero``, ``x`` the tokens of the embedding table's rows, 0 where padded."""
        how = self._masking(config)
        if padding is not None and how is None:
            raise ValueError(f"{self.describe()}: configuration {config} has no Masking layer; a padded batch "
                             f"needs the option ('mask', 'Masking') or ('mask', 'mask_zero')")
        T, batch, _ = xs.shape
        if how == "mask_zero":  # the rows of model_weights' table
            x = (1 + np.arange(T * batch, dtype=np.int32).reshape(T, batch)).T.copy()
            fill = 0
        else:
            x, fill = xs.transpose(1, 0, 2).copy(), MASK_VALUE
        if padding is not None:
            x[~padding.mask(T).T] = fill
        feeds = {"x": x}
        if state is not None:
            names, keys = iter(self.input_names(state, config)[1:]), state_keys(self.family)
            for index in range(config.num_layers * config.num_directions):
                for key in keys:
                    feeds[next(names)] = state[key][index].copy()
        return feeds
