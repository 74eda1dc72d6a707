"""Non-equivalences are results: where two systems compute different functions, prove it.

Each test measures the difference between two systems (or a system with and
without a conversion step) on the same canonical weights, and asserts that it
exceeds the rounding bound by orders of magnitude. The measured figures go to
the summary's "proved non-equivalences" table.
"""

import pytest
from packaging.version import Version

from frameworks.base import distribution_version

from harness.cases import GATED_CASES
from harness.compare import compare
from harness.tolerance import pair_bound

CASE = GATED_CASES["gru"][1]  # 50 steps
ORDERS_OF_MAGNITUDE = 100  # "not equivalent": the difference exceeds the bound at least this many times


def prove_different(record, a, other, out_a, out_b, bound, reason):
    comparison = compare(out_a["h"], out_b["h"], bound, f"{a.describe()} vs {other}")
    record("nonequivalence", a, other=other, dtype="float32", reason=reason, **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.parametrize("reset_before", ["keras-tf-gru-reset-before", "tf1-gru", "tf-keras-gru-reset-before",
                                          "onnx-ort-gru-reset-before", "onnx-reference-gru-reset-before"])
def test_gru_reset_after_is_not_reset_before(request, record, reset_before):
    """PyTorch's GRU (reset after) and a reset-before GRU, on the same weights."""
    from conftest import load_adapter

    torch_gru, other = load_adapter(request.config, "torch-gru"), load_adapter(request.config, reset_before)
    dtype = "float32"
    args = (CASE.params(dtype), CASE.inputs(dtype), CASE.h0(dtype))
    bound = pair_bound(CASE.bound(dtype, "reset_after")["h"], CASE.bound(dtype, "reset_before")["h"])
    prove_different(record, torch_gru, other.name, torch_gru.run(*args), other.run(*args), bound,
                    "reset after applies r to (W_hn h + b_hn), reset before to h alone: different functions")


@pytest.mark.parametrize("tf1_lstm", ["tf1-basic-lstm", "tf1-lstm"])
def test_tf1_lstm_needs_forget_bias_folded(request, record, tf1_lstm):
    """A TF1 LSTM loaded with PyTorch's summed biases as they are, forget_bias not folded out."""
    from conftest import load_adapter

    cell = load_adapter(request.config, tf1_lstm)
    case, dtype = GATED_CASES["lstm"][1], "float32"
    params, xs, h0, c0 = case.params(dtype), case.inputs(dtype), case.h0(dtype), case.c0(dtype)
    unfolded = cell.mutations["forget_bias not folded"](cell.to_native(params))
    folded = cell.run_native(cell.to_native(params), xs, h0, c0)
    bound = pair_bound(case.bound(dtype, forget_bias=1.0)["h"], case.bound(dtype, forget_bias=1.0)["h"])
    prove_different(record, cell, f"{cell.name} without folding forget_bias", folded,
                    cell.run_native(unfolded, xs, h0, c0), bound,
                    "TF1 adds forget_bias (1.0) to the f gate in its forward pass; unfolded, f is shifted by 1")


def test_flax_nnx_gru_cannot_hold_b_hn(request, record):
    """nnx GRUCell has no hidden bias, so no slot for b_hn, which r multiplies. The mapping
    refuses a non-zero b_hn; folding it into b_in, what a converter would do, computes
    another function than PyTorch's GRU."""
    from conftest import load_adapter

    nnx_gru, torch_gru = load_adapter(request.config, "flax-nnx-gru"), load_adapter(request.config, "torch-gru")
    dtype = "float32"
    params, xs, h0 = CASE.params(dtype), CASE.inputs(dtype), CASE.h0(dtype)
    with pytest.raises(ValueError, match=r"no slot for b_hn .* expected b_hn = 0"):
        nnx_gru.to_native(params)
    H = params.hidden_size
    b_x, b_h = params.b_x.copy(), params.b_h.copy()
    b_x[2 * H:] += b_h[2 * H:]
    b_h[2 * H:] = 0
    folded = nnx_gru.run(params.replace(b_x=b_x, b_h=b_h), xs, h0)
    bound = pair_bound(CASE.bound(dtype)["h"], CASE.bound(dtype)["h"])
    prove_different(record, torch_gru, f"{nnx_gru.name} with b_hn folded into b_in", torch_gru.run(params, xs, h0),
                    folded, bound, "nnx GRUCell has no b_hn; folded into b_in it escapes the reset gate r")


@pytest.mark.only_adapters(lambda cls: cls.name.startswith("torch-onnx-") and cls.name.endswith("-gru"))
def test_exported_gru_carries_linear_before_reset_1(gated, request):
    """PyTorch's GRU is reset-after: an exported GRU operator with linear_before_reset=0 would be
    the other function (pytorch/pytorch#189225, microsoft/onnxscript#2852). The dynamo exporter
    may decompose the GRU instead of emitting the operator; then there is nothing to carry the
    flag, and the equivalence tests of the decomposed graph stand on their own."""
    if gated.dynamo and Version(distribution_version("onnxscript")) <= Version("0.6.2"):
        # Reported with onnxscript 0.6.2 (torch 2.10); 0.7.2 is right. Between, unknown: the test runs.
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "onnxscript's aten_gru omits linear_before_reset=1: https://github.com/microsoft/onnxscript/issues/2852, "
            "https://github.com/pytorch/pytorch/issues/189225")))
    case = GATED_CASES["gru"][1]
    gated.run(case.params("float32"), case.inputs("float32"), case.h0("float32"))
    assert all(flag == 1 for flag in gated.gru_operators()), gated.gru_operators()
    if not gated.dynamo:
        assert gated.gru_operators(), "the legacy exporter is expected to emit the ONNX GRU operator"
