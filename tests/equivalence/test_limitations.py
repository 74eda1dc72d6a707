"""What a system refuses to compute is checked too: it must refuse loudly, never answer wrongly.

Each of these is a documented limitation of the installed version; if a release
lifts it, the test fails and the adapter's configurations should grow.
"""

import pytest

from frameworks.base import LayerConfig
from harness.cases import SequenceCase


@pytest.mark.only_adapters(lambda cls: cls.name == "onnx-ort")
def test_onnx_runtime_refuses_batch_first_layout(layer):
    config = LayerConfig(1, False, options=(("direction", "forward"), ("layout", 1)))
    case = SequenceCase(config)
    with pytest.raises(Exception, match=r"Batchwise recurrent operations \(layout == 1\) are not supported"):
        layer.run(case.stack("float32"), case.inputs("float32"), case.h0("float32"), "tanh", config)


@pytest.mark.only_adapters(lambda cls: cls.name == "onnx-reference")
@pytest.mark.parametrize("missing", ["relu", "sigmoid"])
def test_onnx_reference_evaluator_refuses_activations_it_lacks(layer, missing, monkeypatch):
    """onnx/reference/ops/op_rnn.py implements Tanh and Affine only, hence the adapter's list."""
    monkeypatch.setattr(layer, "activations", layer.activations + (missing,))
    config = LayerConfig(1, False, options=(("direction", "forward"), ("layout", 0)))
    case = SequenceCase(config)
    with pytest.raises(Exception, match=r"Unknown activation function"):
        layer.run(case.stack("float32"), case.inputs("float32"), case.h0("float32"), missing, config)
