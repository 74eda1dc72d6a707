"""onnx2torch: ``onnx2torch.convert`` of the ONNX ``RNN``, ``LSTM`` and ``GRU`` nodes the ONNX systems build
(``rnn_equivalence.frameworks.onnx_rnn``, ``OnnxNodeRunner.model``), to a PyTorch module.

onnx2torch 1.5.15 (its newest release) has no converter for any of the three: its registry
(``onnx2torch.node_converters.registry``) holds none at any opset, its own table of operators
(operators.md: "RNN | N", "LSTM | N", "GRU | N") says so, and ``convert`` refuses each node loudly, by name,
before building anything: ``NotImplementedError: Converter is not implemented
(OperationDescription(domain='', operation_type='LSTM', version=22))`` (ENOT-AutoDL/onnx2torch#136; the open
pull request ENOT-AutoDL/onnx2torch#256 adds the three, reordering ONNX's i, o, f, c gates). The refusal is the
finding, measured by tests/equivalence/test_onnx2torch.py, which turns red when a release converts a node:
then this module gets its systems, onnx2torch-rnn, -lstm, -gru, the ONNX systems' mapping run through the
converted module, as onnx2tf's (frameworks/onnx2tf_export.py). Until then there are none: no system here
registers itself, and the module is not among ``rnn_equivalence.frameworks.systems.MODULES``.

onnx2torch imports torchvision (for its NonMaxSuppression and RoiAlign converters). The torchvision wheels
on PyPI are CUDA builds whose compiled ops need a torch with CUDA: the environment is nobuco's pair, torch 2.14.1
(a CUDA build that runs on the CPU) and torchvision 0.29.1, made by the nox session ``onnx2torch`` (noxfile.py),
apart from the main run, where torchvision could change what torch.onnx and onnxscript do.
"""

from __future__ import annotations

import importlib

ENVIRONMENT = "onnx2torch"  # the nox session whose environment holds onnx2torch
DISTRIBUTIONS = ("onnx2torch", "torch", "torchvision", "onnx")

# The ONNX systems whose nodes are converted (the suite's models, OnnxNodeRunner.model), and each one's operator.
# onnx2torch 1.5.15 refuses every one (measured: tests/equivalence/test_onnx2torch.py).
NODES = {"onnx-ort": "RNN", "onnx-ort-lstm": "LSTM", "onnx-ort-gru": "GRU", "onnx-ort-gru-reset-before": "GRU"}
REFUSAL = "Converter is not implemented (OperationDescription(domain='', operation_type='{op}', version={version}))"
ISSUE = "ENOT-AutoDL/onnx2torch#136"  # "Can we increase the function of rnn structures such as lstm" (open)
PULL_REQUEST = "ENOT-AutoDL/onnx2torch#256"  # "feat: add LSTM, GRU, and RNN ONNX node converters" (open)


def import_onnx2torch():
    """onnx2torch, imported (with torchvision, which it imports)."""
    return importlib.import_module("onnx2torch")


def registered_operators(onnx2torch) -> set[tuple[str, int]]:
    """(operator type, opset version) of every converter in onnx2torch's registry, the ONNX domain's."""
    registry = importlib.import_module("onnx2torch.node_converters.registry")
    return {(key.operation_type, key.version) for key in registry._CONVERTER_REGISTRY if key.domain == ""}
