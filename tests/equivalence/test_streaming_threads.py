"""Streaming a recurrent layer through a converter, one call per chunk: three public threads, each
reproduced or refuted against the chunked float64 reference
(``rnn_equivalence.reference.tolerance.chunked_reference_and_bound``, through ``Case.chunk_references``), judged
as tests/equivalence/test_padded.py's chunked test judges a run: each call's outputs against the whole run's
reference over the same steps, the worst call's ratio kept.

- onnx/keras-onnx#676, onnx/tensorflow-onnx#1152: a ``stateful=True`` Keras LSTM converted to ONNX.
- pytorch/pytorch#56883: a PyTorch LSTM exported to ONNX, streamed by feeding h and c back.
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.frameworks.tf2onnx_export import OPSET
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.harness.detection import ORDERS_OF_MAGNITUDE
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import CELL, LayerConfig

DTYPE = "float32"
CHUNKS = (3, 3)  # two calls; equal lengths, so one converted model (its input shape fixed) takes both
KERAS_OPTIONS = (("return_sequences", True), ("return_state", True))
# The stateful Keras layer: fixed batch, its carry in the layer's variables, no initial state given.
STATEFUL = LayerConfig(1, False, initial_state=False, options=KERAS_OPTIONS + (("stateful", True),))
# The same layer as the suite's tf2onnx system runs it in chunks: the returned h and c fed back as inputs.
CARRIED = LayerConfig(1, False, initial_state=False, options=KERAS_OPTIONS)


def judged(adapter, case, outputs, what):
    """The worst call's comparison with the whole run's float64 reference over the same steps (as
    test_padded.run_in_chunks judges a chunked run)."""
    return max(each_call(adapter, case, outputs, what), key=lambda c: np.inf if np.isnan(c.ratio) else c.ratio)


def each_call(adapter, case, outputs, what):
    """Each call's comparison with the whole run's float64 reference over its steps."""
    comparisons = []
    for j, (actual, (expected, bound)) in enumerate(zip(outputs, case.chunk_references(arithmetic_of(adapter, DTYPE)),
                                                        strict=True)):
        comparisons.append(compare_outputs(actual, adapter.arrange(expected, case.config),
                                           adapter.arrange(bound, case.config),
                                           f"{what} call {j + 1} of {len(outputs)} vs the whole run's float64 "
                                           f"reference, {case.describe(DTYPE)}"))
    return comparisons


def test_keras_onnx_676_tensorflow_onnx_1152_stateful_keras_lstm(load_system):
    """onnx/keras-onnx#676, onnx/tensorflow-onnx#1152: a ``stateful=True`` Keras LSTM converted to ONNX does
    not stream. Finding (tf2onnx 1.17, tf_keras): ``tf2onnx.convert.from_keras`` does not refuse the stateful
    model (fixed batch); its graph freezing fails on the layer's state assignments, which it removes
    ("Removed ... AssignVariableOp"), and it converts to one fused ONNX LSTM whose only input is x: the state
    variables are frozen to their values at conversion (zeros), so every call starts from zero. Over two
    chunks: the stateful tf_keras layer (the suite's ``run_native_chunks``) is within the bound of the
    chunked reference; the converted model called per chunk returns the same as on a fresh start and its
    second call is far beyond the bound (the state not carried); the suite's tf2onnx-keras2-lstm-rnn system,
    whose chunked run feeds the returned h and c back as explicit inputs, is within it."""
    # The tf_keras LSTM layer is the tf2onnx system's own (KerasLayer with tf_keras; no tf_keras LSTM layer
    # system stands alone): its run_chunks with stateful=True is KerasLayerRunner.run_native_chunks.
    converted = load_system("tf2onnx-keras2-lstm-rnn")
    case = case_of(converted, 3, 5, 2, sum(CHUNKS), 1152, STATEFUL, chunks=CHUNKS)
    chunks = case.chunk_inputs(DTYPE)

    # The stateful Keras layer over two chunks: its own carry (KerasLayerRunner.run_native_chunks).
    stateful = converted.run_chunks(case.stack(DTYPE), chunks, case.state(DTYPE), case.config)
    assert_within_bound(judged(converted, case, stateful, "tf_keras LSTM(stateful=True)"))

    # The same stateful model (batch fixed at 2) converted by tf2onnx: converted, not refused.
    native = converted.to_native(case.stack(DTYPE), case.config)
    model, specs, names = converted.functional_model(native, chunks[0], None, case.config, case.activation,
                                                     batch=case.batch)
    assert [layer.stateful for layer in model.layers if type(layer).__name__ == "LSTM"] == [True]
    proto, _ = converted.tf2onnx.convert.from_keras(model, input_signature=specs, opset=OPSET)
    assert [i.name for i in proto.graph.input] == ["x"]  # no state input, and no state kept in the graph
    assert "LSTM" in {node.op_type for node in proto.graph.node}
    session = converted.ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    per_call = [dict(zip(names, session.run(None, converted.feeds(xs, None, case.config)), strict=True))
                for xs in chunks]
    again = dict(zip(names, session.run(None, converted.feeds(chunks[1], None, case.config)), strict=True))
    for name in names:  # the second chunk, run twice: the same, nothing kept between runs
        np.testing.assert_array_equal(per_call[1][name], again[name], err_msg=name)
    # each call from zero: the first chunk is right, the stream is not
    first, _ = each_call(converted, case, per_call, "tf2onnx(stateful LSTM) per chunk, no state inputs")
    assert_within_bound(first)
    lost = judged(converted, case, per_call, "tf2onnx(stateful LSTM) per chunk, no state inputs")
    assert lost.ratio > ORDERS_OF_MAGNITUDE, f"the stateful model's conversion carried its state? {lost.message()}"

    # The suite's own converted system: the layer without stateful=True, h and c fed back as inputs.
    carried_case = case_of(converted, 3, 5, 2, sum(CHUNKS), 1152, CARRIED, chunks=CHUNKS)
    assert carried_case.chunk_inputs(DTYPE)[1].tobytes() == chunks[1].tobytes()  # the same chunks
    carried = converted.run_chunks(carried_case.stack(DTYPE), carried_case.chunk_inputs(DTYPE),
                                   carried_case.state(DTYPE), carried_case.config)
    assert_within_bound(judged(converted, carried_case, carried, f"{converted.describe()}, h and c fed back"))


def test_pytorch_56883_streaming_an_exported_lstm_by_feeding_h_and_c_back(load_system):
    """pytorch/pytorch#56883: a PyTorch LSTM exported to ONNX (the legacy exporter), streamed by feeding the
    returned h and c back as the next call's initial state. Finding: it streams correctly: over chunks of
    3 and 4 steps from a given initial state, the suite's torch-onnx-legacy-lstm chunked run (``run_chunks``:
    the exported graph takes h0 and c0 as inputs) is within the bound of the chunked reference; dropping the
    carry (every call from the initial state) is far beyond it, so the test can fail."""
    adapter = load_system("torch-onnx-legacy-lstm")
    case = case_of(adapter, 3, 5, 2, 7, 56883, CELL, chunks=(3, 4))
    stack, state, chunks = case.stack(DTYPE), case.state(DTYPE), case.chunk_inputs(DTYPE)
    assert state is not None and set(state) == {"h", "c"}

    carried = adapter.run_chunks(stack, chunks, state, case.config)
    assert_within_bound(judged(adapter, case, carried, f"{adapter.describe()}, h and c fed back"))

    dropped = [adapter.run(stack, xs, state, case.config) for xs in chunks]
    lost = judged(adapter, case, dropped, f"{adapter.describe()}, every call from the initial state")
    assert lost.ratio > ORDERS_OF_MAGNITUDE, f"state not carried went undetected: {lost.message()}"
