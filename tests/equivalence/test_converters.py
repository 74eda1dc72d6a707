"""What the converters make of the layers, beyond the numbers (which the reference tests compare on every
design case): the ONNX nodes tf2onnx emits, fused or a loop, since that decides what downstream runtimes
do; and the models a converter refuses, loudly."""

from dataclasses import replace

import pytest

from rnn_equivalence.frameworks.tf2onnx_export import OPSET
from rnn_equivalence.harness.cases import case_of, cases_for, padded_cases
from rnn_equivalence.reference.comparison import assert_within_bound


def is_tf2onnx(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.tf2onnx_export"


def design_case(adapter, depth, seed, config, g, fallback_seed):
    """The run's design case of ``config`` (its initial state given or not) and activation ``g``, a
    whole or a padded one, whose converted model the reference or padded test converts too (one
    conversion per structure: rnn_equivalence.harness.depth); a small case of its own where the design has none."""
    designed = cases_for(adapter, depth, seed) + (padded_cases(adapter, depth, seed) if adapter.padded_configs else [])
    same = [c for c in designed
            if replace(c.config, initial_state=config.initial_state) == config and c.activation == g]
    return same[0] if same else case_of(adapter, 5, 4, 2, 3, fallback_seed, config, activation=g)


def design_models(adapter, depth, seed, *more_configs):
    """The converted models the reference and padded tests convert (one per structure of the design:
    rnn_equivalence.harness.depth), one case per (activation, configuration) among them, then a case of
    each of ``more_configs`` the design lacks (its first activation, a conversion of its own). The design
    meets every activation and every configuration (asserted), so what is checked on these models holds
    for each level without converting any model for it alone."""
    designed = cases_for(adapter, depth, seed) + (padded_cases(adapter, depth, seed) if adapter.padded_configs else [])
    runs = list({(c.activation, c.config): c for c in reversed(designed)}.values())[::-1]
    assert {c.activation for c in runs} == set(adapter.activations), "the design lacks an activation"
    met = {replace(c.config, initial_state=True) for c in runs}
    assert {replace(c, initial_state=True) for c in adapter.configs} <= met, "the design lacks a configuration"
    runs += [design_case(adapter, depth, seed, config, adapter.activations[0], 990 + k)
             for k, config in enumerate(more_configs) if replace(config, initial_state=True) not in met]
    return runs


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls))
def test_tf2onnx_emits_the_declared_nodes(adapter, depth, design_seed):
    """Every converted model of the design (``design_models``: each activation, each configuration, the padded
    (Masking) ones): it holds one kind of recurrent node, the fused node the system declares (``FUSED``: an
    LSTM always, a reset-after GRU with the default activations; never with a Masking layer in front) or a
    Loop. A release that fuses more, or less, turns this red."""
    assert adapter.padded_configs
    for case in design_models(adapter, depth, design_seed):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config, case.padding)
        assert adapter.recurrent_operators() == {adapter.expected_operator(case.config, case.activation)}, (
            case.activation, case.config, adapter.recurrent_operators())


@pytest.mark.applies_to(lambda cls: cls.name == "tf2onnx-keras2-lstm-rnn")
def test_tf2onnx_refuses_a_keras_3_model(adapter):
    """tf2onnx 1.17 reads Keras 2's internals: a Keras 3 model (tensorflow backend) is refused with a
    KeyError on its input tensor's name, never converted wrongly. Hence the tf2onnx systems are Keras 2's;
    a release that converts Keras 3 models turns this red."""
    import os

    import keras
    import tensorflow as tf

    assert os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow", "Keras 3 must run on tensorflow here"
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4, return_sequences=True)])
    with pytest.raises(KeyError, match="keras_tensor"):
        adapter.tf2onnx.convert.from_keras(model, input_signature=(tf.TensorSpec((None, 6, 3), tf.float32),),
                                           opset=17)


def is_tflite(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.tflite_export"


@pytest.mark.applies_to(lambda cls: is_tflite(cls))
def test_tflite_emits_the_declared_ops(adapter, depth, design_seed):
    """Every converted model of the design (``design_models``: each activation, each configuration, the
    padded ones) and the mutations' configuration: the converted model's main graph holds one recurrent op,
    TFLite's fused LSTM kernel where the system declares it (Keras 2's LSTM with its default activations,
    neither go_backwards nor return_state nor a Masking layer) or a WHILE loop. A release that fuses more,
    or less, turns this red."""
    assert adapter.padded_configs
    for case in design_models(adapter, depth, design_seed, adapter.mutation_config):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config, case.padding)
        assert adapter.recurrent_operators() == {adapter.expected_operator(case.config, case.activation)}, (
            case.activation, case.config, adapter.recurrent_operators())


@pytest.mark.applies_to(lambda cls: is_tflite(cls) and cls.family == "lstm")
def test_tflite_refuses_a_free_batch_dimension(adapter):
    """With the batch dimension free (``None``), TFLite's builtin-ops converter refuses the recurrent layer
    ("Lowering tensor list ops is failed"), loudly: hence the systems convert a model of the run's batch
    size. A release that converts it turns this red."""
    case = case_of(adapter, 5, 4, 2, 3, 995, adapter.configs[0])
    converter, _ = adapter.tflite_converter(adapter.to_native(case.stack("float32"), case.config), case.inputs("float32"),
                                     case.state("float32"), case.config, adapter.activations[0], batch=None)
    with pytest.raises(Exception, match="Lowering tensor list ops is failed"):
        converter.convert()


@pytest.mark.applies_to(lambda cls: cls.name == "tflite-keras2-lstm-rnn")
def test_tflite_keras2_conversion_is_from_keras_models(adapter):
    """The Keras 2 systems convert the model's call with its weights in a ``tf.Module``; ``from_keras_model``
    (what users call, 5 times slower: it saves the whole tf_keras object graph first) gives the same ops,
    the fused LSTM among them, and the same outputs, bit for bit. One layer, one direction, no initial
    state: ``from_keras_model`` takes half a minute for the two-layer bidirectional stack here."""
    import numpy as np

    from rnn_equivalence.reference.config import LayerConfig

    config = LayerConfig(1, False, initial_state=False)
    case = case_of(adapter, 5, 4, 2, 3, 996, config, activation=adapter.activations[0])
    native = adapter.to_native(case.stack("float32"), case.config)
    xs, state = case.inputs("float32"), case.state("float32")
    ours = adapter.run_native(native, xs, state, case.config, case.activation)
    ops = adapter.last_operators
    model, _, output_names = adapter.functional_model(native, xs, state, case.config, case.activation,
                                                      batch=xs.shape[1])
    converter = adapter.tf.lite.TFLiteConverter.from_keras_model(model)
    converter.target_spec.supported_ops = [adapter.tf.lite.OpsSet.TFLITE_BUILTINS]
    # from_keras_model names the signature's outputs after tf_keras's output_names (the layers'), in order.
    # Not kept in the conversion cache: those names are this process's (tf_keras numbers its layers).
    theirs = adapter.run_flatbuffer(converter.convert(), adapter.feeds(xs, state, case.config), output_names,
                                    model.output_names)
    assert adapter.last_operators == ops and "UNIDIRECTIONAL_SEQUENCE_LSTM" in ops
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls) or is_tflite(cls),
                        short_of_full=lambda cls: (is_tf2onnx(cls) or is_tflite(cls)) and cls.family == "lstm")
def test_a_model_converted_again_holds_the_new_weights(adapter):
    """The Keras converters build one model per structure and assign each run's weights to its variables before
    converting (``rnn_equivalence.frameworks.keras_model``): two cases of one structure, run in turn (and the
    first again), each match their own reference, which the first's weights converted again would not. The
    comparison is the reference test's, its record left out of the report (not a design case). Short of full
    depth, on the LSTM of each converter and Keras (3 systems, two conversions each): the assignment is
    ``keras_model``'s, one code path for every layer (rnn_equivalence.harness.depth)."""
    from tests.equivalence.test_reference import check_reference

    first = case_of(adapter, 5, 4, 2, 3, 997, adapter.configs[0])
    second = first.with_(seed=998)
    assert first.stack().first.W_hx[0, 0] != second.stack().first.W_hx[0, 0]
    for case in (first, second, first):
        check_reference(adapter, "float32", case, record=lambda *args, **kwargs: None,
                        how=" after another case of its structure")


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls))
def test_tf2onnx_from_a_tf_function_is_from_keras(adapter):
    """The systems call ``tf2onnx.convert.from_keras``; users also wrap the model in a ``tf.function`` and
    call ``from_function``: on the first configuration, the same ONNX node types come out and compute the
    same outputs, bit for bit. A release in which the two paths part turns this red."""
    import collections

    import numpy as np

    case = case_of(adapter, 5, 4, 2, 3, 993, adapter.configs[0])
    native = adapter.to_native(case.stack("float32"), case.config)
    xs, state = case.inputs("float32"), case.state("float32")
    ours = adapter.run_native(native, xs, state, case.config, case.activation)
    nodes = collections.Counter(node.op_type for node in adapter.last_model.graph.node)
    model, specs, output_names = adapter.functional_model(native, xs, state, case.config, case.activation)
    call = adapter.tf.function(lambda *tensors: model(list(tensors)), input_signature=specs)
    proto, _ = adapter.tf2onnx.convert.from_function(call, input_signature=specs, opset=OPSET)
    assert collections.Counter(node.op_type for node in proto.graph.node) == nodes
    session = adapter.ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = adapter.feeds(xs, state, case.config)
    theirs = dict(zip(output_names, session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()}),
                      strict=True))
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def with_mask_zero(config):
    """A padded configuration with an ``Embedding(mask_zero=True)`` in front instead of a Masking layer."""
    options = tuple((key, "mask_zero" if key == "mask" else value) for key, value in config.options)
    assert ("mask", "mask_zero") in options, config
    return replace(config, options=options)


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls) or is_tflite(cls),
                        short_of_full=lambda cls: (is_tf2onnx(cls) or is_tflite(cls)) and cls.family == "lstm")
def test_an_embedding_with_mask_zero_masks_the_converted_model(adapter, depth, record):
    """The other way Keras users mask: an ``Embedding(mask_zero=True)`` in front, token 0 the padding. Its table
    holds the case's inputs (``rnn_equivalence.frameworks.keras_model``: an exact lookup), so the converted
    model of a padded batch of tokens is held to the float64 reference of the padded batch, on every side of
    padding the system takes at full depth (post-padding otherwise: the design cases' Masking layer covers every
    side), in the system's own padded configuration; and its recurrent op is a loop, as with a Masking layer. A
    converter that dropped the mask would run the padded steps: far outside the bound. Short of full depth, on
    the LSTM of each converter and Keras (3 systems, a conversion of 4-10 s each): the mask the Embedding makes
    reaches the recurrent layer as a Masking layer's does, which every converted system's padded tests check
    in each family (rnn_equivalence.harness.depth)."""
    from rnn_equivalence.harness.cases import LENGTHS, PADDED_STEPS, padding_of
    from tests.equivalence.test_padded import against_reference

    config = with_mask_zero(adapter.padded_configs[0])
    sides = adapter.padding_sides if depth == "full" else adapter.padding_sides[:1]
    assert sides
    for k, side in enumerate(sides):
        case = case_of(adapter, 3, 6, len(LENGTHS), PADDED_STEPS, 960 + k, config, padding=padding_of(LENGTHS, side))
        actual = adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config,
                             case.padding)
        assert adapter.recurrent_operators() == {adapter.expected_operator(config, case.activation)}
        comparison = against_reference(adapter, case, "float32", actual, what=" (Embedding(mask_zero=True))")
        record("padded", adapter, dtype="float32", **comparison.as_record())
        assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: is_tflite(cls))
@pytest.mark.parametrize("resolver", ["BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF"])
def test_tflite_kernels_without_the_default_delegate(adapter, resolver, monkeypatch, depth, design_seed):
    """The systems run LiteRT as users get it, its builtin kernels with the XNNPACK delegate; the builtin
    kernels alone, and LiteRT's reference kernels, compute the same converted model within the same bound
    of the reference (the design's case of the system's first configuration and its first padded case:
    the models the reference and padded tests convert). The largest difference from the default's
    outputs is printed (``-s``), not recorded: the report's rows are the default's."""
    import numpy as np

    from tests.equivalence.test_padded import against_reference

    cases = [design_case(adapter, depth, design_seed, adapter.configs[0], adapter.activations[0], 940),
             padded_cases(adapter, depth, design_seed)[0]]
    for case in cases:
        args = (case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config, case.padding)
        default = adapter.run(*args)
        with monkeypatch.context() as patch:
            patch.setattr(adapter, "op_resolver", resolver)
            actual = adapter.run(*args)
        assert_within_bound(against_reference(adapter, case, "float32", actual, what=f" ({resolver})"))
        print(f"{adapter.name} {resolver} {case.config}: max |difference| from the default delegate's "
              f"{max(float(np.max(np.abs(actual[k] - default[k]))) for k in default):.3g}")


@pytest.mark.applies_to(lambda cls: is_tf2onnx(cls) and bool(cls.fused))
def test_tf2onnx_fused_nodes_refuse_float64(adapter, monkeypatch):
    """A float64 Keras model whose layer tf2onnx fuses (the LSTM, the reset-after GRU) converts, and ONNX
    Runtime refuses to run the fused node in double, loudly: hence these systems are float32 only. A release
    that runs them turns this red."""
    monkeypatch.setattr(adapter, "dtypes", ("float32", "float64"))  # past the system's own refusal
    case = case_of(adapter, 5, 4, 2, 3, 992, adapter.configs[0])
    assert adapter.expected_operator(case.config, case.activation) in ("LSTM", "GRU")
    with pytest.raises(Exception, match="operator does not support double"):
        adapter.run(case.stack("float64"), case.inputs("float64"), case.state("float64"), case.config)
