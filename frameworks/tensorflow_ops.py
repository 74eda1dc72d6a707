"""Plain TensorFlow ops: the lecture's concatenated formula as one tf.matmul per step.

No Keras involved, so the concatenated formula is checked in TensorFlow even
where ``tf_keras`` is absent. The mapping is the lecture's layout, inherited
from ``LectureConcatenatedLayout``: W_h = [W_hh | W_hx] (H, H+I), b = b_x + b_h.
"""

from __future__ import annotations

from frameworks.base import Native, import_framework
from frameworks.numpy_formulas import LectureConcatenatedLayout


class TensorflowConcatenated(LectureConcatenatedLayout):
    name = "tf-concat"
    cell = "tf.matmul(tf.concat([h, x], 1), W_h, transpose_b=True)"
    distributions = ("tensorflow",)
    requires = ("tensorflow",)

    def __init__(self):
        self.tf = import_framework("tensorflow", self.name)

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        tf = self.tf
        dtype, H = self.check_call(native, xs, state, config, g)
        g_tf = {"tanh": tf.tanh, "relu": tf.nn.relu, "sigmoid": tf.sigmoid, "identity": tf.identity}[g]
        W_h = tf.constant(native["W_h"])
        b = tf.constant(native["b"]) if "b" in native else None
        h, outputs = tf.constant(self.cell_state(state, xs.shape[1], H, dtype)["h"]), []
        for x in tf.unstack(tf.constant(xs)):
            # Rows are batch elements, so [h_{t-1}; x_t] becomes concat along axis 1
            # and W_h [h; x] becomes [h, x] @ W_h^T.
            z = tf.matmul(tf.concat([h, x], axis=1), W_h, transpose_b=True)
            h = g_tf(z if b is None else z + b)
            outputs.append(h)
        return {"h": tf.stack(outputs).numpy()}
