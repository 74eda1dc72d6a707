"""TFLite's float16 quantization of a Keras model (issue 37): ``TFLiteConverter`` with
``optimizations = [tf.lite.Optimize.DEFAULT]`` and ``target_spec.supported_types = [tf.float16]``, the
conversion TFLite's documentation calls "post-training float16 quantization", run in LiteRT as the float32
model is (``rnn_equivalence.frameworks.tflite_export``).

What it computes, measured (tests/equivalence/test_half_tflite.py, TensorFlow 2.21, LiteRT's default kernels on
a CPU): every float constant of the model, each Keras weight (kernel, recurrent kernel, bias) as the layer holds
it, stored in float16 with a ``DEQUANTIZE`` to float32 in front of its use, and everything else float32. So the
function is the float32 model's on the weights rounded to float16, native tensor by native tensor:

    Keras (native):    kernel (I, G*H), recurrent_kernel (H, G*H), bias (G*H), or (2, 3H) for a GRU reset after
    in the model:      round_to(kernel, float16), round_to(recurrent_kernel, float16), round_to(bias, float16)

``float16_weights`` is that rounding, NumPy only: its canonical parameters (the Keras mapping's ``from_native``
of the rounded tensors) are the float64 reference's, and the float32 bound of those is the derived bound of the
run. Rounding the canonical parameters instead would be wrong where Keras keeps a sum (an LSTM's one bias is
b_x + b_h, rounded once as a sum).

A separate module, not a method of the TFLite systems, so that the float32 conversions' cache entries (keyed by
the digest of the systems' own modules: ``conversion_cache.code_digest``) stay valid; the float16 conversion's
key adds this file's digest.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import Native
from rnn_equivalence.frameworks.conversion_cache import converted_once, files_digest
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.formats import round_to

WEIGHTS_FORMAT = "float16"  # what the conversion stores its float constants in


def float16_weights(native: Native) -> Native:
    """The native weights as the float16 model holds them: each rounded once to float16 (to nearest, ties to
    even), as float32 arrays (the DEQUANTIZE's output)."""
    return {name: round_to(np.asarray(value, np.float64), WEIGHTS_FORMAT).astype(np.float32)
            for name, value in native.items()}


def run_with_float16_weights(adapter, native: Native, xs, state, config: LayerConfig, g: str) -> dict:
    """``adapter`` (a TFLite system) converted with float16 quantization and run on ``xs`` (float32): its
    native outputs, as ``run_native`` gives the float32 model's. The converted model is cached as the float32
    ones are (``converted_once``), its key the float32 model's plus the weights' format and this file's digest."""
    adapter.check_call(native, xs, state, config, g)
    batch = xs.shape[1]

    def convert() -> bytes:
        converter, _ = adapter.tflite_converter(native, xs, state, config, g, batch=batch)
        converter.optimizations = [adapter.tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [adapter.tf.float16]
        with contextlib.redirect_stdout(io.StringIO()):  # Keras 3's export prints its endpoints
            return converter.convert()

    key = (*adapter.conversion_key(native, xs, state, config, g, batch), f"weights in {WEIGHTS_FORMAT}",
           files_digest([Path(__file__)]))
    flatbuffer = converted_once(adapter, key, convert, suffix=".tflite")
    return adapter.run_flatbuffer(flatbuffer, adapter.feeds(xs, state, config, None), adapter.output_names(config))
