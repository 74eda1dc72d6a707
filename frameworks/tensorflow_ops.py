"""Plain TensorFlow ops: the lecture's concatenated formula as one tf.matmul per step.

No Keras involved, so the concatenated formula is checked in TensorFlow even
where ``tf_keras`` is absent. The mapping is the lecture's layout, inherited
from ``LectureConcatenatedMapping``: W_h = [W_hh | W_hx] (H, H+I), b = b_x + b_h.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import Adapter, Native, import_framework
from rnn_equivalence.frameworks.numpy_formulas import CONCATENATED_MUTATIONS, LectureConcatenatedMapping


class TensorflowOpsRunner:
    """The concatenated step in TensorFlow ops, differentiated by ``tf.GradientTape``."""

    def start(self):
        self.tf = import_framework("tensorflow", self.name)

    def _prepare(self, native: Native, xs, state, config, g: str):
        """Checks, then the tensors a run starts from: (weights by native name, inputs, state or None, H)."""
        tf = self.tf
        _, H = self.check_call(native, xs, state, config, g)
        weights = {name: tf.constant(value) for name, value in native.items()}
        start = None if state is None else {key: tf.constant(value) for key, value in state.items()}
        return weights, tf.constant(xs), start, H

    def _forward(self, weights, inputs, start, g: str, H: int) -> dict:
        """The lecture's step over the sequence, on tensors: run_native's outputs, as tensors."""
        tf = self.tf
        g_tf = {"tanh": tf.tanh, "relu": tf.nn.relu, "sigmoid": tf.sigmoid, "identity": tf.identity}[g]
        W_h, b = weights["W_h"], weights.get("b")
        h = start["h"][0] if start else tf.zeros((inputs.shape[1], H), inputs.dtype)
        outputs = []
        for x in tf.unstack(inputs):
            # Rows are batch elements, so [h_{t-1}; x_t] becomes concat along axis 1
            # and W_h [h; x] becomes [h, x] @ W_h^T.
            z = tf.matmul(tf.concat([h, x], axis=1), W_h, transpose_b=True)
            h = g_tf(z if b is None else z + b)
            outputs.append(h)
        return {"h": tf.stack(outputs)}

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        weights, inputs, start, H = self._prepare(native, xs, state, config, g)
        return {key: value.numpy() for key, value in self._forward(weights, inputs, start, g, H).items()}

    def gradients_native(self, native: Native, xs, state, config, g: str, cotangents: dict) -> dict:
        """tf.GradientTape over the weights, the inputs and the initial state (watched constants),
        the cotangents as output_gradients."""
        tf = self.tf
        weights, inputs, start, H = self._prepare(native, xs, state, config, g)
        sources = {"weights": weights, "inputs": inputs, "state": start or {}}
        _, grads = self.autodiff_runtime.vjp(lambda: self._forward(weights, inputs, start, g, H), sources, cotangents,
                                             self.check_cotangents)
        return tf.nest.map_structure(lambda value: np.asarray(value.numpy(), xs.dtype), grads)


class TensorflowConcatenated(TensorflowOpsRunner, LectureConcatenatedMapping, Adapter):
    name = "tf-concat"
    cell = "tf.matmul(tf.concat([h, x], 1), W_h, transpose_b=True)"
    family = "rnn"
    mutations = CONCATENATED_MUTATIONS
    distributions = ("tensorflow",)
    requires = ("tensorflow",)
    autodiff = "tf.GradientTape"
