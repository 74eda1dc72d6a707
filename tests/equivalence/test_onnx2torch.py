"""onnx2torch (1.5.15, in its own environment: ``nox -s onnx2torch``) converting the ONNX RNN, LSTM and GRU nodes
the suite builds: it refuses each, loudly, by name (ENOT-AutoDL/onnx2torch#136). frameworks/onnx2torch_export.py.

A release that converts a node turns ``test_onnx2torch_refuses_the_node`` red: then the systems are to be built
(onnx2torch-rnn, -lstm, -gru: the ONNX mapping, run through the converted module, as onnx2tf's).

Where onnx2torch is not installed and the run is not its session's, these tests are deselected (the marker
``environment``), as a session system's are in a run that does not name it. In its session
(``RNN_EQ_ENVIRONMENT=onnx2torch``, with CI=true) a missing onnx2torch is an error; an onnx2torch that is
installed but fails to import is an error there and under CI=true, a skip with the reason elsewhere.
"""

import importlib.util
import os

import pytest

from rnn_equivalence.frameworks.onnx2torch_export import (
    ENVIRONMENT, NODES, REFUSAL, import_onnx2torch, registered_operators,
)
from rnn_equivalence.frameworks.onnx_rnn import OPSET
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.harness.selection import ENVIRONMENT_VAR, in_environment, is_ci

RECURRENT = ("RNN", "LSTM", "GRU")
pytestmark = pytest.mark.environment(ENVIRONMENT, "onnx2torch")


@pytest.fixture(scope="module")
def onnx2torch():
    """onnx2torch, imported; missing or failing to import: an error in its environment or under CI=true, else a
    skip."""
    try:
        if importlib.util.find_spec("onnx2torch") is None:
            raise ImportError("onnx2torch is not installed")
        module = import_onnx2torch()
    except ImportError as error:
        if in_environment(ENVIRONMENT, os.environ) or is_ci(os.environ):
            where = f"{ENVIRONMENT_VAR}={ENVIRONMENT}" if in_environment(ENVIRONMENT, os.environ) else "CI=true"
            pytest.fail(f"{error} (an error, not a skip, because {where}; nox -s {ENVIRONMENT} installs it)",
                        pytrace=False)
        pytest.skip(f"onnx2torch not available: {error} (its environment: nox -s {ENVIRONMENT})")
    return module


def test_the_nodes_are_every_recurrent_operator():
    """The refusal test below covers each ONNX recurrent operator, and each GRU variant the suite builds."""
    assert sorted(set(NODES.values())) == sorted(RECURRENT)
    assert len(NODES) == 4, NODES


@pytest.mark.parametrize("builder", list(NODES))
def test_onnx2torch_refuses_the_node(onnx2torch, builder, load_system):
    """``onnx2torch.convert`` of the node the ONNX system builds (its first configuration, with an initial state
    where it takes one) raises NotImplementedError naming the operator, before building any module
    (ENOT-AutoDL/onnx2torch#136). A release that converts it turns this red."""
    import onnx

    adapter = load_system(builder)
    op = NODES[builder]
    assert adapter.family.upper() == op, (builder, adapter.family)
    config = adapter.configs[0]
    case = case_of(adapter, 5, 4, 2, 3, 990, config)
    native = adapter.to_native(case.stack("float32"), config)
    model, _, _ = adapter.model(native, case.inputs("float32"), case.state("float32"), config, case.activation)
    assert [node.op_type for node in model.graph.node] == [op]
    version = onnx.defs.get_schema(op, max_inclusive_version=OPSET).since_version
    with pytest.raises(NotImplementedError) as refusal:
        onnx2torch.convert(model)
    assert str(refusal.value) == REFUSAL.format(op=op, version=version)


def test_onnx2torch_registers_no_recurrent_converter(onnx2torch):
    """onnx2torch's registry (its table of converters, by operator type and opset) holds none for RNN, LSTM or GRU
    at any opset, as its operators.md says ("N"); it holds the elementwise operators an unrolled cell would use,
    so the registry read is the one ``convert`` looks up."""
    registered = registered_operators(onnx2torch)
    types = {op for op, _ in registered}
    assert {"MatMul", "Gemm", "Add", "Mul", "Sigmoid", "Tanh"} <= types, sorted(types)
    assert not types & set(RECURRENT), sorted((op, v) for op, v in registered if op in RECURRENT)
