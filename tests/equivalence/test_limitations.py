"""What a system refuses to compute is checked too: it must refuse loudly, never answer wrongly.

Each of these is a documented limitation of the installed version; if a release
lifts it, the test fails and the adapter's configurations should grow.
"""

import pytest

from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.harness.cases import Case
from rnn_equivalence.reference.padding import Padding


def rnn_case(config):
    return Case("rnn", 5, 4, batch=3, steps=50, config=config)


@pytest.mark.applies_to(lambda cls: cls.name == "onnx-ort")
def test_onnx_runtime_refuses_batch_first_layout(adapter):
    config = LayerConfig(1, False, options=(("direction", "forward"), ("layout", 1)))
    case = rnn_case(config)
    with pytest.raises(Exception, match=r"Batchwise recurrent operations \(layout == 1\) are not supported"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config)


@pytest.mark.applies_to(lambda cls: cls.name == "onnx-reference")
@pytest.mark.parametrize("missing", ["relu", "sigmoid"])
def test_onnx_reference_evaluator_refuses_activations_it_lacks(adapter, missing, monkeypatch):
    """onnx/reference/ops/op_rnn.py implements Tanh and Affine only, hence the adapter's list."""
    monkeypatch.setattr(adapter, "activations", adapter.activations + (missing,))
    config = LayerConfig(1, False, options=(("direction", "forward"), ("layout", 0)))
    case = rnn_case(config).with_(activation=missing)
    with pytest.raises(Exception, match=r"Unknown activation function"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-rnn")
def test_pytorch_refuses_zero_lengths_and_unsorted_lengths_when_sorting_is_enforced(adapter):
    """PyTorch packs only non-empty sequences, and by default (enforce_sorted=True) only lengths
    sorted longest first: both are refused by pack_padded_sequence itself, not answered wrongly.
    (The suite refuses zero lengths for every system, since frameworks disagree on them.)"""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence

    xs = torch.zeros(4, 2, 3)
    with pytest.raises(RuntimeError, match=r"Length of all samples has to be greater than 0"):
        pack_padded_sequence(xs, torch.tensor([4, 0]), enforce_sorted=False)
    with pytest.raises(RuntimeError,
                       match=r"`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"):
        pack_padded_sequence(xs, torch.tensor([2, 4]))
    sorted_config = next(c for c in adapter.padded_configs if c.option("enforce_sorted"))
    case = rnn_case(sorted_config).with_(batch=2, steps=4)
    with pytest.raises(RuntimeError, match=r"must be sorted in decreasing order"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), sorted_config,
                    Padding((2, 4)))
