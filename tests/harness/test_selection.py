"""Framework selection: names from the option or the environment, validated."""

import pytest

from rnn_equivalence.frameworks import ADAPTERS, adapter_class
from rnn_equivalence.harness import selection


def test_default_is_every_framework_and_not_explicit():
    """Every system of the main environment; those of a tool in its own (a nox session) left to it."""
    chosen = selection.select(None, {})
    own = tuple(n for n in ADAPTERS if adapter_class(n).environment)
    assert own and chosen.names == tuple(n for n in ADAPTERS if n not in own)
    assert not chosen.explicit and not chosen.missing_is_error
    assert selection.elsewhere(chosen.names) == {
        session: [n for n in own if adapter_class(n).environment == session]
        for session in ("mlx", "torch-programs", "onnx2tf", "nobuco", "coreml", "paddle", "mnn", "ncnn", "litert-torch",
                        "executorch")}


def test_a_system_of_another_environment_runs_when_named():
    assert selection.select("onnx2tf-lstm", {}).names == ("onnx2tf-lstm",)


def test_option_wins_over_environment_and_is_explicit():
    chosen = selection.select("torch, keras-tf", {selection.ENV_VAR: "tf1"})
    assert chosen.names == ("torch", "keras-tf") and chosen.missing_is_error


def test_environment_variable_selects():
    assert selection.select(None, {selection.ENV_VAR: "tf1"}).names == ("tf1",)


@pytest.mark.parametrize("ci", ["true", "TRUE", "1", "yes"])
def test_ci_makes_a_missing_framework_an_error(ci):
    assert selection.select(None, {"CI": ci}).missing_is_error


def test_ci_false_does_not():
    assert not selection.select(None, {"CI": "false"}).missing_is_error


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        selection.select("torch,pytorch", {})
    assert "--systems: unknown system(s) 'pytorch'" in str(error.value)
    assert ", ".join(ADAPTERS) in str(error.value)


def test_unknown_name_from_environment_names_the_variable():
    with pytest.raises(ValueError, match=selection.ENV_VAR):
        selection.select(None, {selection.ENV_VAR: "jax"})


def test_uninstalled_module_is_found_without_importing(monkeypatch):
    monkeypatch.setattr(selection.importlib.util, "find_spec",
                        lambda module: None if module == "tf_keras" else object())
    assert selection.uninstalled_modules(["torch", "tf1"]) == [("tf1", "tf_keras")]


def test_every_registered_name_loads_the_class_of_that_name():
    """The classes are the registry: each name leads to the class that declares it, in an adapter module."""
    from rnn_equivalence.frameworks import MODULES, adapter_class

    modules = {f"rnn_equivalence.frameworks.{m}" for m in MODULES}
    assert ADAPTERS
    wrong = [(name, adapter_class(name).__name__, adapter_class(name).__module__) for name in ADAPTERS
             if adapter_class(name).name != name or "name" not in vars(adapter_class(name))
             or adapter_class(name).__module__ not in modules]
    assert not wrong, wrong


def test_a_second_class_with_a_taken_name_is_refused():
    from rnn_equivalence.frameworks.base import Adapter

    with pytest.raises(TypeError, match=r"adapter name 'torch' is taken by TorchRNNCell"):
        type("Again", (Adapter,), {"name": "torch", "family": "rnn"})


def test_a_tool_without_systems_is_tested_in_its_session_or_where_installed():
    """The marker ``environment(session, module)`` (tests/equivalence/test_onnx2torch.py): its tests run in the nox
    session that names itself, or where the module is installed; elsewhere they are deselected."""
    assert selection.in_environment("onnx2torch", {selection.ENVIRONMENT_VAR: "onnx2torch"})
    assert not selection.in_environment("onnx2torch", {selection.ENVIRONMENT_VAR: "nobuco"})
    assert not selection.in_environment("onnx2torch", {})
    missing = "rnn_equivalence_no_such_module"
    assert selection.tested_here("onnx2torch", missing, {selection.ENVIRONMENT_VAR: "onnx2torch"})
    assert not selection.tested_here("onnx2torch", missing, {"CI": "true"})
    assert selection.tested_here("onnx2torch", "numpy", {})
