"""An ONNX system's node run in the dtype of the arrays it is given (float16 here, or a quantized model's float32
inputs), outside the systems' own float32-only input check: shared by the tests of ONNX Runtime in lower
precision (tests/equivalence/test_half_onnx.py, test_quantized_onnx.py). Not a base of any system, so that it is not
part of a converted model's cache digest."""

from __future__ import annotations

import numpy as np


def node_outputs(adapter, native, xs, state, config, g) -> dict:
    """The node of ``native`` run on ``xs`` as ``run_native`` runs it, in the arrays' own dtype: the ONNX model
    is typed by its data (float16 here), which the systems' float32-only input check would refuse."""
    if not adapter.layerwise(config):  # the gated cells always feed their initial states: zeros where not given
        H = native["R"].shape[-1]
        state = {key: value[None] for key, value in adapter.cell_state(state, xs.shape[1], H, xs.dtype).items()}
    model, feeds, outputs = adapter.model(native, xs, state, config, g)
    results = {name: np.asarray(value) for name, value in zip(outputs, adapter.evaluate(model, feeds, outputs))}
    return adapter.outputs(results, config)
