"""PyTorch's one LSTM option, the projection (``nn.LSTM(proj_size=P)``), measured where the designs do
not reach, and what the ONNX exporters make of it.

- ``nn.LSTM`` itself: its weights with a projection are the ones native_spec declares (weight_hr_l{k}
  (P, H), weight_hh (4H, P), layer k > 0 reading D*P inputs), the mapping round-trips bitwise, and a
  projected layer runs packed (padded) batches and chunked runs within the bound (the padded and chunked
  designs stay without options). The reference test holds the projection to the reference in float32
  and float64, stacked and bidirectional (the covering design pairs "projection" with every config).
- The exporters (ONNX's LSTM has no projection): the legacy exporter refuses the module; the dynamo
  exporter writes a model that drops weight_hr and sizes the LSTM operator by P, which no runtime runs.
  So neither exporter has the option. ``nn.LSTMCell`` has none either; these systems refuse projected
  parameters by name (test_refusals.py::test_an_option_the_system_lacks_is_refused_by_name).
"""

import re

import numpy as np
import pytest

from rnn_equivalence.harness.cases import case_of, chunked_cases, padded_cases
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.params import projection_size

PROJECTION = "projection"


def is_exported_lstm(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.torch_export" and cls.family == "lstm"


def against_reference(adapter, case, dtype, actual, expected=None, bounds=None):
    expected = adapter.arrange(case.reference() if expected is None else expected, case.config)
    bounds = adapter.arrange(case.bound_vs_reference(dtype) if bounds is None else bounds, case.config)
    return compare_outputs(actual, expected, bounds,
                           f"{adapter.describe()} vs float64 reference, {case.describe(dtype)}")


# --- nn.LSTM(proj_size=P) -----------------------------------------------------------------------
@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_projected_layout_is_torchs_own(adapter):
    """native_spec with a projection against an nn.LSTM(proj_size=P) torch built: weight_hr_l{k}
    (P, H), weight_hh_l{k} (4H, P), weight_ih_l1 (4H, 2P) in a bidirectional stack."""
    import torch

    I, H, config = 3, 5, adapter.layout_config
    P = projection_size(H)
    module = torch.nn.LSTM(I, H, num_layers=config.num_layers, bidirectional=config.bidirectional, proj_size=P)
    own = {name: tuple(p.shape) for name, p in module.named_parameters()}
    spec = adapter.native_spec(config, I, H, (PROJECTION,), P)
    assert own == {name: shape for name, (shape, _) in spec.items()}
    assert own["weight_hr_l0"] == (P, H) and own["weight_ih_l1"] == (4 * H, 2 * P)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_projection_round_trip_is_bitwise(adapter, dtype):
    """W_proj is weight_hr as is, both ways, in every cell of the mutation configuration's stack."""
    config = adapter.mutation_config
    stack = case_of(adapter, 3, 5, 2, 4, 11, config, options=PROJECTION).stack(dtype)
    native = adapter.to_native(stack, config)
    assert sorted(n for n in native if n.startswith("weight_hr")) == sorted(
        f"weight_hr{adapter.tag(k, d)}" for k, d, _ in stack.cells())
    back = adapter.from_native(native, config)
    for (k, d, before), (_, _, after) in zip(stack.cells(), back.cells()):
        assert after.options == (PROJECTION,)
        for name in ("W_x", "W_h", "b_x", "b_h", "W_proj"):
            np.testing.assert_array_equal(getattr(after, name), getattr(before, name),
                                          err_msg=f"{name}, layer {k} direction {d}", strict=True)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_projected_state_of_the_wrong_width_names_proj_size(adapter):
    """With a projection h0 has P units and c0 H: an h0 H wide is blamed on proj_size."""
    case = case_of(adapter, 3, 5, 2, 4, 11, adapter.configs[0], options=PROJECTION)
    state = case.state("float32")
    state["h"] = np.zeros(state["c"].shape, np.float32)
    with pytest.raises(ValueError, match=r"h0: expected shape \(num_layers\*num_directions, batch, proj_size\) = "
                                         r"\(1, 2, 3\) .*proj_size=3 from the projection weights\), got \(1, 2, 5\)"):
        adapter.run(case.stack("float32"), case.inputs("float32"), state, case.config)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_projected_layer_on_padded_batches(adapter, dtype, record):
    """pack_padded_sequence / pad_packed_sequence with proj_size: each element over its own real steps,
    zeros on padded steps (h P wide), final states after each element's last real step."""
    for case in padded_cases(adapter):
        case = case.with_(options=PROJECTION)
        actual = adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config, case.padding)
        assert actual["output"].shape[-1] == case.config.num_directions * projection_size(case.hidden_size)
        comparison = against_reference(adapter, case, dtype, actual)
        record("padded", adapter, dtype=dtype, **comparison.as_record())
        assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_projected_layer_in_chunks(adapter, dtype, record):
    """h_n (P wide) and c_n (H wide) fed back as the next call's h0 and c0."""
    for case in chunked_cases(adapter):
        case = case.with_(options=PROJECTION)
        outputs = adapter.run_chunks(case.stack(dtype), case.chunk_inputs(dtype), case.state(dtype), case.config)
        for actual, (expected, bound) in zip(outputs, case.chunk_references(dtype)):
            comparison = against_reference(adapter, case, dtype, actual, expected, bound)
            record("chunked", adapter, dtype=dtype, **comparison.as_record())
            assert_within_bound(comparison)


# --- the ONNX exporters ----------------------------------------------------------------------------
def projected_module(adapter, case, dtype="float32"):
    """``nn.LSTM(proj_size=P)`` with the case's weights (PyTorch's mapping), and its arguments."""
    import torch

    from rnn_equivalence.frameworks.pytorch import load_parameters

    P = projection_size(case.hidden_size)
    module = torch.nn.LSTM(case.input_size, case.hidden_size, proj_size=P)
    load_parameters(torch, module, adapter.to_native(case.stack(dtype), case.config))
    state = case.state(dtype)
    args = (torch.from_numpy(case.inputs(dtype)), (torch.from_numpy(state["h"]), torch.from_numpy(state["c"])))
    return module, args


def exported_case(adapter):
    return case_of(adapter, 3, 5, 2, 4, 11, options=PROJECTION)  # P = 3, H = 5


@pytest.mark.applies_to(lambda cls: is_exported_lstm(cls) and not cls.dynamo)
def test_legacy_exporter_refuses_lstm_with_projection(adapter):
    """The TorchScript exporter's symbolic for aten::lstm has no projection, and says so."""
    from torch.onnx.errors import SymbolicValueError

    case = exported_case(adapter)
    module, args = projected_module(adapter, case)
    with pytest.raises(SymbolicValueError, match=r"Unsupported: ONNX export of operator LSTM, LSTMs with projections"):
        adapter.export(module, args, ["x", "h0", "c0"])


@pytest.mark.applies_to(lambda cls: is_exported_lstm(cls) and cls.dynamo)
def test_dynamo_exporter_drops_the_projection_into_a_model_no_runtime_runs(adapter):
    """The dynamo exporter does not refuse: onnxscript's aten_lstm (torch_lib, microsoft/onnxscript#2674)
    reads hidden_size from h0, which is P wide, takes four parameters per direction and ignores weight_hr.
    The model's LSTM operator has hidden_size = P, W the first 4P of weight_ih's 4H rows (gate blocks of
    P rows: the gates mixed), and no weight_hr; its c0 stays H wide. ONNX Runtime refuses it at run time
    (initial_c's shape), onnx.reference fails to broadcast, and the ONNX checker's shape inference flags it:
    loud, but only after a silent export."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    case = exported_case(adapter)
    I, H, P, B = case.input_size, case.hidden_size, projection_size(case.hidden_size), case.batch
    module, args = projected_module(adapter, case)
    model = onnx.load_from_string(adapter.export(module, args, ["x", "h0", "c0"]))
    (lstm,) = [node for node in model.graph.node if node.op_type == "LSTM"]
    assert onnx.helper.get_node_attr_value(lstm, "hidden_size") == P
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    W = weights[lstm.input[1]]
    assert W.shape == (1, 4 * P, I)
    weight_ih = module.weight_ih_l0.detach().numpy()
    np.testing.assert_array_equal(W[0, :P], weight_ih[:P])  # ONNX's gate i: torch's first P rows, not H
    weight_hr = module.weight_hr_l0.detach().numpy()
    assert not any(np.isin(weight_hr, w).any() for w in weights.values())  # weight_hr is nowhere in the model

    feeds = {name: tensor.numpy() for name, tensor in zip(["x", "h0", "c0"], [args[0], *args[1]])}
    session = adapter.ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=re.escape(f"Input initial_c must have shape {{1,{B},{P}}}. "
                                                  f"Actual:{{1,{B},{H}}}")):
        session.run(None, feeds)
    with pytest.raises(ValueError, match=re.escape(f"operands could not be broadcast together with shapes ({P},) "
                                                   f"({B},{H})")):
        ReferenceEvaluator(model).run(None, feeds)
    with pytest.raises(onnx.shape_inference.InferenceError,
                       match=re.escape(f"Inferred shape and existing shape differ in dimension 2: ({P}) vs ({H})")):
        onnx.checker.check_model(model, full_check=True)
