"""The functional Keras model a user writes around the suite's Keras layers, as the converters take it.

Shared by the converters that start from a Keras model (``frameworks.tf2onnx_export``,
``frameworks.tflite_export``): an ``Input`` for the sequence (batch first) and one for each initial
state the configuration gives, named ``x`` and ``initial_{key}_{index}``; the layers' outputs (the
sequence or the last output, then the final states with ``return_state``) as the model's outputs, in
``KerasLayer._call``'s order. The weights are the Keras layers' (``KerasLayer``'s mapping, unchanged).
"""

from __future__ import annotations

import os

from frameworks.base import LayerConfig, Native, distribution_version, import_framework
from frameworks.keras3 import KerasLayer
from reference.cells import state_keys


class KerasModelExport(KerasLayer):
    """``KerasLayer``'s stack in a functional model, for a converter to take."""

    def start(self):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        super().start()
        self.tf = import_framework("tensorflow", self.name)

    def versions(self) -> dict[str, str]:
        """The Keras and its backend (``KerasFamily``), and the converter and runtime that ran the model."""
        return {**super().versions(), **{d: distribution_version(d) for d in self.distributions}}

    def input_names(self, state, config: LayerConfig) -> list[str]:
        """The model's inputs, in order: ``x``, then the initial states (layer-major, direction, key)."""
        if state is None:
            return ["x"]
        D, keys = config.num_directions, state_keys(self.family)
        return ["x"] + [f"initial_{key}_{index}" for index in range(config.num_layers * D) for key in keys]

    def functional_model(self, native: Native, xs, state, config: LayerConfig, g: str, batch: int | None = None):
        """The model holding ``native``, the ``tf.TensorSpec`` of each input (``batch`` None: any batch
        size) and the names of its outputs."""
        keras, tf = self.keras, self.tf
        dtype, H = self.check_call(native, xs, state, config, g)
        T, run_batch, I = xs.shape
        layers = self._built_layers(native, (run_batch, T, I), config, H, g, dtype.name)
        names = self.input_names(state, config)
        inputs = [keras.Input((T, I), batch_size=batch, dtype=dtype.name, name="x")]
        inputs += [keras.Input((H,), batch_size=batch, dtype=dtype.name, name=name) for name in names[1:]]
        specs = [tf.TensorSpec((batch, T, I), dtype.name, name="x")]
        specs += [tf.TensorSpec((batch, H), dtype.name, name=name) for name in names[1:]]
        states = None
        if state is not None:
            keys, tensors = state_keys(self.family), iter(inputs[1:])
            states = {key: [] for key in keys}
            for _ in range(config.num_layers * config.num_directions):
                for key in keys:
                    states[key].append(next(tensors))
        outputs = self._call(layers, inputs[0], None, states, config)
        return keras.Model(inputs, list(outputs.values())), specs, list(outputs)

    def feeds(self, xs, state, config: LayerConfig) -> dict:
        """The model's inputs by name, from a time-major run's inputs (the model is batch first)."""
        feeds = {"x": xs.transpose(1, 0, 2).copy()}
        if state is not None:
            names, keys = iter(self.input_names(state, config)[1:]), state_keys(self.family)
            for index in range(config.num_layers * config.num_directions):
                for key in keys:
                    feeds[next(names)] = state[key][index].copy()
        return feeds
