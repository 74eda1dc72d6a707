"""Non-equivalences are results: where two systems compute different functions, prove it.

Each test measures the difference between two systems (or a system with and
without a conversion step) on the same canonical weights, and asserts that it
exceeds the rounding bound by orders of magnitude. The measured figures go to
the summary's "proved non-equivalences" table.
"""

import pytest
from packaging.version import Version

from rnn_equivalence.frameworks.base import distribution_version
from rnn_equivalence.harness.cases import Case, cases_for, padded_cases, padded_right_in_float32
from rnn_equivalence.reference.comparison import compare, compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import run_stack

ORDERS_OF_MAGNITUDE = 100  # "not equivalent": the difference exceeds the bound at least this many times


def long_case(family, **fields):
    return Case(family, 7, 5, batch=3, steps=50, seed=1, **fields)


def prove_different(record, a, other, out_a, out_b, bound, reason):
    comparison = compare(out_a["h"], out_b["h"], bound, f"{a.describe()} vs {other}")
    record("nonequivalence", a, other=other, dtype="float32", reason=reason, **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.applies_to(lambda cls: cls.family == "gru" and cls.variant == "reset_before" and not cls.layer)
def test_gru_reset_after_is_not_reset_before(adapter, load_system, record):
    """PyTorch's GRU (reset after) and a reset-before GRU, on the same weights."""
    torch_gru, dtype = load_system("torch-gru"), "float32"
    after, before = long_case("gru", variant="reset_after"), long_case("gru", variant="reset_before")
    xs, state = after.inputs(dtype), after.state(dtype)
    bound = pair_bound(after.bound(dtype)["output"], before.bound(dtype)["output"])
    prove_different(record, torch_gru, adapter.name, torch_gru.run(after.stack(dtype), xs, state),
                    adapter.run(before.stack(dtype), xs, state), bound,
                    "reset after applies r to (W_hn h + b_hn), reset before to h alone: different functions")


@pytest.mark.applies_to(lambda cls: cls.forget_bias != 0)
def test_tf1_lstm_needs_forget_bias_folded(adapter, record):
    """A TF1 LSTM loaded with PyTorch's summed biases as they are, forget_bias not folded out."""
    case, dtype = long_case("lstm", forget_bias=adapter.forget_bias), "float32"
    params, xs, state = case.stack(dtype), case.inputs(dtype), case.state(dtype)
    unfolded = adapter.mutations["forget_bias not folded"](adapter.to_native(params))
    folded = adapter.run_native(adapter.to_native(params), xs, state, case.config, "default")
    bound = pair_bound(case.bound(dtype)["output"], case.bound(dtype)["output"])
    prove_different(record, adapter, f"{adapter.name} without folding forget_bias", folded,
                    adapter.run_native(unfolded, xs, state, case.config, "default"), bound,
                    f"TF1 adds forget_bias ({adapter.forget_bias}) to the f gate in its forward pass; "
                    "unfolded, f is shifted by it")


@pytest.mark.applies_to(lambda cls: cls.zero_b_hn and not cls.layer)
def test_gru_without_a_b_hn_slot(adapter, load_system, record):
    """A GRU cell with no hidden bias (Flax nnx GRUCell) has no slot for b_hn, which r multiplies.
    The mapping refuses a non-zero b_hn; folding it into b_in, what a converter would do,
    computes another function than PyTorch's GRU."""
    torch_gru, dtype = load_system("torch-gru"), "float32"
    case = long_case("gru")
    params, xs, state = case.params(dtype), case.inputs(dtype), case.state(dtype)
    with pytest.raises(ValueError, match=r"no slot for b_hn .* expected b_hn = 0"):
        adapter.to_native(params)
    H = params.hidden_size
    b_x, b_h = params.b_x.copy(), params.b_h.copy()
    b_x[2 * H:] += b_h[2 * H:]
    b_h[2 * H:] = 0
    folded = adapter.run(params.replace(b_x=b_x, b_h=b_h), xs, state)
    bound = pair_bound(case.bound(dtype)["output"], case.bound(dtype)["output"])
    prove_different(record, torch_gru, f"{adapter.name} with b_hn folded into b_in", torch_gru.run(params, xs, state),
                    folded, bound, "a GRU without b_hn: folded into b_in, it escapes the reset gate r")


@pytest.mark.applies_to(lambda cls: hasattr(cls, "gru_operators") and cls.family == "gru")
def test_exported_gru_carries_linear_before_reset_1(adapter, request):
    """PyTorch's GRU is reset-after: an exported GRU operator with linear_before_reset=0 would be
    the other function (pytorch/pytorch#189225, microsoft/onnxscript#2852). The dynamo exporter
    may decompose the GRU instead of emitting the operator; then there is nothing to carry the
    flag, and the equivalence tests of the decomposed graph stand on their own."""
    if adapter.dynamo and Version(distribution_version("onnxscript")) <= Version("0.6.2"):
        # Reported with onnxscript 0.6.2 (torch 2.10); 0.7.2 is right. Between, unknown: the test runs.
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "onnxscript's aten_gru omits linear_before_reset=1: https://github.com/microsoft/onnxscript/issues/2852, "
            "https://github.com/pytorch/pytorch/issues/189225")))
    case = next(c for c in cases_for(adapter) if c.steps > 1)  # its reference test's export, reused
    adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
    flags = adapter.gru_operators()
    if not flags:
        assert adapter.dynamo, "the legacy exporter is expected to emit the ONNX GRU operator"
        pytest.skip("the dynamo exporter decomposed the GRU: no operator carries linear_before_reset; the "
                    "decomposed graph's equivalence tests stand on their own")
    assert all(flag == 1 for flag in flags), flags


# --- padded batches -----------------------------------------------------------------------------
def padded_difference(record, adapter, case, actual, expected_results, other, reason):
    """The system's outputs against another function's results on the same padded batch."""
    dtype = "float32"
    expected = adapter.arrange(expected_results, case.config)
    bound = adapter.arrange(case.bound_vs_reference(dtype), case.config)
    comparison = compare_outputs(actual, expected, bound, f"{adapter.describe()} vs {other}, {case.describe(dtype)}")
    record("nonequivalence", adapter, other=other, dtype=dtype, reason=reason, **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.applies_to(lambda cls: padded_right_in_float32(cls)
                        and cls.padded_configs[0].option("return_sequences", True))  # padded_cases quick: the first
def test_padded_step_conventions_differ(adapter, record):
    """Zeros against the last real output on padded steps (PyTorch, ONNX, Keras Bidirectional
    against a plain Keras layer with a mask): the same real steps and final states, another output
    on every padded step. Each system is held to its own convention; here, the other one is shown
    to be far outside its bound. Not generated where the first padded configuration returns no sequence
    (the converted Keras models' gated layers: their only padded configuration returns final states)."""
    case = padded_cases(adapter, "quick")[0]
    mine = case.padded_output
    other = "repeat" if mine == "zeros" else "zeros"
    actual = adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config,
                         case.padding)
    theirs = run_stack(case.stack(), case._read(case.inputs()), case.state(), case.padding, other)
    padded_difference(record, adapter, case, actual, theirs, f"padded steps reporting {other}",
                      f"{adapter.name} reports {mine} on padded steps, not {other}: outputs differ on every "
                      "padded step (real steps and final states agree)")


@pytest.mark.applies_to(lambda cls: bool(cls.padded_configs) and "pre" not in cls.padding_sides
                        and padded_right_in_float32(cls))
def test_pre_padded_batch_where_post_padding_is_assumed(adapter, record):
    """Lengths say how many steps are real, not where: a framework that takes lengths runs each
    element over its first steps, so a pre-padded batch runs over its padding and stops before its
    last real steps (the adapter refuses pre-padding for this reason; run_native here bypasses it)."""
    case = padded_cases(adapter, "quick")[0]
    pre = case.with_(padding=Padding(case.padding.lengths, "pre"))
    native = adapter.to_native(case.stack("float32"), case.config)
    actual = adapter.run_native(native, pre.inputs("float32"), pre.state("float32"), pre.config,
                                pre.stack().activation, padding=case.padding)
    padded_difference(record, adapter, pre, actual, pre.reference(), "the pre-padded batch's reference",
                      f"{adapter.name} takes lengths and assumes post-padding: a pre-padded batch runs over its "
                      "padding instead of its last real steps")


def keras3_twin(name: str) -> str:
    """The Keras 3 (TensorFlow backend) system of a Keras 2 (tf_keras) one: tf-keras-lstm -> keras-tf-lstm."""
    return "keras-tf" + name[len("tf-keras"):]


@pytest.mark.applies_to(lambda cls: cls.name.startswith("tf-keras") and not cls.layer
                        and any("hard_sigmoid_0.2" in g for g in cls.activations))
def test_keras2_hard_sigmoid_is_not_keras3_hard_sigmoid_by_name(adapter, load_system, record):
    """A Keras 2 model using "hard_sigmoid" (the default recurrent_activation of LSTM and GRU before
    Keras 2.3) rebuilt in Keras 3 under the same name: clip(0.2 z + 0.5, 0, 1) becomes
    relu6(z + 3) / 6. Same weights, same name, another function."""
    keras3, dtype = load_system(keras3_twin(adapter.name)), "float32"
    keras2_spec = next(g for g in adapter.activations if "hard_sigmoid_0.2" in g)
    keras3_spec = keras2_spec.replace("hard_sigmoid_0.2", "hard_sigmoid_relu6")
    assert keras3_spec in keras3.activations, f"{keras3.name} does not compute {keras3_spec}"
    assert adapter.native_activation("hard_sigmoid_0.2") == keras3.native_activation("hard_sigmoid_relu6") \
        == "hard_sigmoid", "both Kerases call their function 'hard_sigmoid'"
    keras2_case = long_case(adapter.family, activation=keras2_spec, variant=adapter.variant)
    keras3_case = keras2_case.with_(activation=keras3_spec)
    xs, state = keras2_case.inputs(dtype), keras2_case.state(dtype)
    bound = pair_bound(keras2_case.bound(dtype)["output"], keras3_case.bound(dtype)["output"])
    prove_different(record, adapter, keras3.name, adapter.run(keras2_case.stack(dtype), xs, state),
                    keras3.run(keras3_case.stack(dtype), xs, state), bound,
                    "'hard_sigmoid' is clip(0.2 z + 0.5, 0, 1) in Keras 2 and relu6(z + 3) / 6 in Keras 3")


@pytest.mark.applies_to(lambda cls: "cell_clip" in cls.supported_options and not cls.layer)
def test_tf1_cell_clip_is_not_the_onnx_clip(adapter, load_system, record):
    """TF1's cell_clip clips the state c; ONNX's clip clips the argument of every activation (the
    state stays unclipped): at the same threshold, different functions. Measured against the ONNX
    function (the reference), and against ONNX Runtime's clip (which clips less than the spec:
    microsoft/onnxruntime#27224), both on the same weights."""
    dtype, threshold = "float32", 0.3
    case = long_case("lstm", forget_bias=adapter.forget_bias)
    xs, state = case.inputs(dtype), case.state(dtype)
    tf1_params = case.stack(dtype).map(lambda p: p.replace(cell_clip=threshold))
    onnx_params = case.stack(dtype).map(lambda p: p.replace(gate_clip=threshold))
    _, tf1_bound = reference_and_bound(tf1_params.astype("float64"), case.inputs(), case.state(), dtype,
                                       adapter.forget_bias)
    onnx_values, onnx_bound = reference_and_bound(onnx_params.astype("float64"), case.inputs(), case.state(), dtype)
    tf1 = adapter.run(tf1_params, xs, state)
    prove_different(record, adapter, "the ONNX clip (reference)", tf1, {"h": onnx_values["output"]},
                    pair_bound(tf1_bound["output"], onnx_bound["output"]),
                    f"cell_clip={threshold} clips the state c; ONNX clip={threshold} clips every activation's "
                    "argument and keeps c")
    # ONNX Runtime's clip is another function again (the adapter refuses it as the spec's), so the
    # node is built directly: what a converter emitting clip=0.3 gets.
    ort = load_system("onnx-ort-lstm")
    ort_h = ort.run_native(ort.to_native(onnx_params), xs, state, case.config, "default")
    comparison = compare(tf1["h"], ort_h["h"], pair_bound(tf1_bound["output"], onnx_bound["output"]),
                         f"{adapter.describe()} cell_clip vs ONNX Runtime clip")
    record("nonequivalence", adapter, other="onnx-ort-lstm (clip)", dtype=dtype,
           reason=f"cell_clip={threshold} vs ONNX Runtime clip={threshold}", **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
