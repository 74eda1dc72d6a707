"""Depth as a choice: the designs each depth asks for, over every system's factors."""

import itertools
import math
from dataclasses import replace

import pytest

from rnn_equivalence.frameworks import ADAPTERS
from rnn_equivalence.frameworks.plan import dtypes_for
from rnn_equivalence.harness.cases import (STRUCTURE_FACTORS, cases_for, chunked_cases, factors, mutations_for,
                                           padded_cases, structure_seed)
from rnn_equivalence.harness.depth import design, uncovered_pairs
from tests.harness.test_pytest_run import run_pytest

SYSTEMS = sorted(ADAPTERS)


@pytest.mark.parametrize("name", SYSTEMS)
def test_default_depth_covers_every_pair_of_levels(name):
    levels = factors(ADAPTERS[name])
    assert uncovered_pairs(levels, design(levels, "default")) == []


@pytest.mark.parametrize("name", SYSTEMS)
def test_quick_depth_meets_every_level_and_full_depth_is_the_product(name):
    levels = factors(ADAPTERS[name])
    quick, full = design(levels, "quick"), design(levels, "full")
    for factor, values in levels.items():
        assert {id(row[factor]) for row in quick} == {id(v) for v in values}, factor
    assert len(full) == math.prod(map(len, levels.values()))
    assert len(quick) <= len(design(levels, "default")) <= len(full)


def test_uncovered_pairs_sees_a_missing_pair():
    levels = {"a": (0, 1), "b": ("x", "y")}
    rows = [dict(zip(levels, combo)) for combo in itertools.product(*levels.values())][:-1]
    assert uncovered_pairs(levels, rows) == [(("a", 1), ("b", 1))]


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_system_has_the_same_factors_and_every_level_by_default(name):
    """Every level of every factor at default depth; at least six cases for a framework's own run (a
    converted system has one per structure: test_a_converted_system_converts_once_per_structure)."""
    cls = ADAPTERS[name]
    assert set(factors(cls)) == {"activation", "options", "config", "shape", "batch", "steps", "initial_state"}
    cases = cases_for(cls, "default")
    assert cls.converter or len(cases) >= 6, [str(c) for c in cases]
    assert {c.activation for c in cases} == set(cls.activations) and {c.options for c in cases} == set(cls.options)
    assert {replace(c.config, initial_state=True) for c in cases} == set(factors(cls)["config"])
    assert {d for c in cases for d in c.dtypes} == set(dtypes_for(cls, "whole", "default"))  # full_depth_dtypes later
    shapes = {(c.input_size, c.hidden_size) for c in cases}
    assert any(i > h for i, h in shapes) and any(i < h for i, h in shapes)
    # An initial state given and omitted, where the system takes one (frameworks/plan.py: initial_states).
    assert {c.batch for c in cases} >= {1, 3} and {c.config.initial_state for c in cases} == set(cls.initial_states)
    assert min(c.steps for c in cases) == 1 and max(c.steps for c in cases) == min(50, cls.max_steps or 50)


def test_a_seed_draws_other_data_for_the_same_design():
    cls = ADAPTERS["torch-lstm"]
    a, b = cases_for(cls, "default", seed=0), cases_for(cls, "default", seed=1)
    assert [c.with_(seed=0) for c in a] == [c.with_(seed=0) for c in b]
    assert not (a[0].inputs() == b[0].inputs()).all()


def test_unknown_depth_is_refused():
    """The option's choices are argparse's; the environment variable is checked by conftest."""
    with pytest.raises(ValueError, match=r"depth: expected one of \('quick', 'default', 'full'\), got 'deep'"):
        design({"a": (1,)}, "deep")
    code, out = run_pytest("tests/reference/test_params.py", "-q", env={"RNN_EQ_DEPTH": "deep"})
    assert code == pytest.ExitCode.USAGE_ERROR and "RNN_EQ_DEPTH: expected one of quick, default, full" in out, out


def test_depth_and_seed_are_in_the_header():
    code, out = run_pytest("--depth=quick", "tests/reference/test_params.py", env={"RNN_EQ_SEED": "7"})
    assert code == pytest.ExitCode.OK, out
    assert "rnn-equivalence: depth quick, seed 7" in out


CONVERTED = sorted(name for name, cls in ADAPTERS.items() if cls.converter)


def structure(case):
    """A case's structure, as the design's factors name it (rnn_equivalence.harness.cases.STRUCTURE_FACTORS)."""
    return (case.activation, case.options, replace(case.config, initial_state=True), case.config.initial_state,
            case.dtypes)


def row_level(name, level):
    return (level,) if name == "dtype" else level


def row_structure(row):
    return tuple(row_level(name, row[name]) for name in STRUCTURE_FACTORS)


def test_the_converted_systems_are_the_converters():
    """The rule follows ``TestPlan.converter``: every TFLite, tf2onnx, torch.onnx.export, onnx2tf, nobuco,
    coremltools, MNNConvert, pnnx (ncnn), TorchScript, torch.export, litert-torch and ExecuTorch system declares it,
    as the name of the converter (a string: a method of the same name once hid TFLite's)."""
    assert all(isinstance(cls.converter, str) for cls in ADAPTERS.values())
    assert {name.split("-")[0] for name in CONVERTED} == {"tflite", "tf2onnx", "torch", "onnx2tf", "nobuco", "coreml",
                                                            "mnn", "ncnn", "torchscript", "litert", "executorch"}
    assert len(CONVERTED) == 8 + 4 + 6 + 4 + 2 + 2 + 3 + 3 + 9 + 3 + 3 and all(
        name.startswith(("torch-onnx", "torch-export")) for name in CONVERTED if name[:6] == "torch-")


@pytest.mark.parametrize("name", CONVERTED)
def test_a_converted_system_converts_once_per_structure_by_default(name):
    """One case per structure of the quick design (every level of every factor once), not of the covering
    design, every level of every factor met, each case's weights drawn from its structure; the full depth as
    every system's."""
    cls = ADAPTERS[name]
    cases, levels = cases_for(cls, "default"), factors(cls, "default")
    structures = [structure(c) for c in cases]
    assert set(structures) >= {row_structure(row) for row in design(levels, "quick")}
    assert len(set(structures)) < len({row_structure(row) for row in design(levels, "default")}) or (
        len(set(structures)) == max(len(levels[f]) for f in STRUCTURE_FACTORS)), structures
    assert len(set(structures)) == len(structures) or len(cases) == max(map(len, levels.values())), structures
    for i, factor in enumerate(STRUCTURE_FACTORS):
        assert {s[i] for s in structures} == {row_level(factor, level) for level in levels[factor]}, factor
    for factor, key in (("shape", lambda c: (c.input_size, c.hidden_size)), ("batch", lambda c: c.batch),
                        ("steps", lambda c: c.steps)):
        assert {key(c) for c in cases} == set(levels[factor]), factor
    assert all(c.seed == structure_seed(c, 0) for c in cases)
    assert [c.seed for c in cases_for(cls, "default", seed=2)] == [structure_seed(c, 2) for c in cases]
    full = cases_for(cls, "full")
    assert len(full) == math.prod(map(len, factors(cls, "full").values())) and len({c.seed for c in full}) == len(full)


def _systems_at(test, depth):
    """The systems a test of tests/equivalence generates for, at ``depth`` (its ``applies_to`` marker)."""
    from rnn_equivalence.harness.parametrize import predicate_at

    (marker,) = [m for m in test.pytestmark if m.name == "applies_to"]
    predicate = predicate_at(marker, depth)
    return {name for name, cls in ADAPTERS.items() if predicate(cls)}


@pytest.mark.parametrize("name", CONVERTED)
def test_a_converted_system_runs_one_wrong_mapping_by_default(name):
    """One wrong mapping of the weights (a conversion each) short of full depth, every one at full; an option
    dropped and activations exchanged (made in the source Keras layer) on the source systems only short of
    full depth, on the converted ones too at full depth."""
    from tests.equivalence.test_mutations import (
        test_activation_arguments_exchanged_are_detected, test_options_dropped_or_confused_are_detected,
    )

    cls = ADAPTERS[name]
    assert (mutations_for(cls, "default") == list(cls.mutations)[:1]
            and mutations_for(cls, "full") == list(cls.mutations))
    for test in (test_options_dropped_or_confused_are_detected, test_activation_arguments_exchanged_are_detected):
        assert name not in _systems_at(test, "default") and name not in _systems_at(test, "quick")
        full, default = _systems_at(test, "full"), _systems_at(test, "default")
        assert default == {n for n in full if not ADAPTERS[n].converter} and default
    assert {n for n in CONVERTED if n in _systems_at(test_options_dropped_or_confused_are_detected, "full")}


@pytest.mark.parametrize("test", ["test_a_model_converted_again_holds_the_new_weights",
                                  "test_an_embedding_with_mask_zero_masks_the_converted_model"])
def test_a_keras_converter_check_runs_on_each_converters_lstm_by_default(test):
    """Short of full depth the test runs on one LSTM per converter and Keras; at full depth on every Keras
    converted system."""
    import tests.equivalence.test_converters as module

    test = getattr(module, test)
    assert _systems_at(test, "default") == {"tflite-keras2-lstm-rnn", "tflite-keras-tf-lstm-rnn",
                                            "tf2onnx-keras2-lstm-rnn"}
    assert len(_systems_at(test, "full")) == 12


@pytest.mark.parametrize("name", CONVERTED)
def test_cases_of_one_structure_share_their_weights(name):
    """A padded batch on each side of padding, and the chunkings of one configuration, get one set of
    weights: one converted model (a model per chunk length, shared by the chunkings)."""
    cls = ADAPTERS[name]
    for cases in (padded_cases(cls) if cls.padded_configs else [], chunked_cases(cls) if cls.chunked_configs else []):
        by_config = {}
        for case in cases:
            by_config.setdefault(case.config, set()).add(case.seed)
        assert all(len(seeds) == 1 for seeds in by_config.values()), by_config


def test_the_rule_follows_the_attribute_not_the_name():
    """A system that declares a converter (a subclass, unregistered: no name of its own) follows the rule;
    its framework's own run keeps its whole covering design and every mutation."""
    source = ADAPTERS["tf-keras-rnn"]
    # float32 and float64, as the Keras systems' converters declare (not the source layer's half formats)
    converter = type("SomeConverter", (source,), {"converter": "some.converter", "__module__": __name__,
                                                  "dtypes": ("float32", "float64"), "full_depth_dtypes": ()})
    levels = factors(source, "default")
    assert len(cases_for(source, "default")) == len(design(levels, "default"))
    assert len(cases_for(converter, "default")) == len({row_structure(r) for r in design(levels, "quick")})
    assert len(cases_for(converter, "default")) < len(cases_for(source, "default"))
    assert mutations_for(source, "default") == list(source.mutations) and len(source.mutations) > 1
    assert mutations_for(converter, "default") == list(source.mutations)[:1]


def test_a_test_at_full_depth_only_is_deselected_short_of_it_and_checked_at_it():
    """``applies_to(predicate, short_of_full=False)``: short of full depth no system (the test is deselected, not an
    error); at full depth its predicate, which must admit a system like any other (a renamed one is an error)."""
    from rnn_equivalence.harness.parametrize import applicable, full_depth_only, predicate_at
    from tests.equivalence.test_quantized_tflite import (
        test_model_optimization_1090_calibrating_a_recurrent_loop_crashes as full_only,
    )

    (marker,) = [m for m in full_only.pytestmark if m.name == "applies_to"]
    assert predicate_at(marker, "default") is full_depth_only and predicate_at(marker, "quick") is full_depth_only
    assert _systems_at(full_only, "full") == {"tflite-keras2-rnn"}
    assert applicable(full_depth_only, list(ADAPTERS), "t") == []
    renamed = pytest.mark.applies_to(lambda cls: cls.name == "tflite-keras2-rnnn", short_of_full=False).mark
    with pytest.raises(ValueError, match="admits none"):
        applicable(predicate_at(renamed, "full"), list(ADAPTERS), "t")
