"""nobuco (0.17.0, in its own environment: ``nox -s nobuco``) converting PyTorch's ``nn.LSTM`` and ``nn.GRU``
into Keras models: what it refuses, and what it computes differently.

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/nobuco_export.py. Measured here:

- refused loudly: ``nn.RNN`` and ``nn.RNNCell`` (no converter: "Unimplemented nodes"), ``nn.LSTM(proj_size=P)``
  (a Keras LSTM built without the projection refuses ``weight_hr``'s shape) and a packed sequence;
- computed differently: a float64 module becomes a float32 Keras model, silently (its outputs are float32,
  within float32's bound and far outside float64's), which refuses a float64 initial state;
- and the Keras model agrees with the PyTorch module it was converted from, not only with the reference.
"""

import numpy as np
import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.padding import Padding

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect


def is_nobuco(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.nobuco_export"


def first_case(adapter, seed, dtype="float32", initial_state=True):
    """Two layers, both directions, batch first, with an initial state (or none: ``configs[3]``)."""
    config = adapter.configs[1] if initial_state else adapter.configs[3]
    case = case_of(adapter, 5, 4, 3, 6, seed, config)
    assert config.bidirectional and config.num_layers == 2 and config.initial_state == initial_state, config
    return case, adapter.to_native(case.stack(dtype), case.config)


@pytest.mark.applies_to(lambda cls: is_nobuco(cls))
def test_the_keras_model_agrees_with_the_pytorch_module(adapter, record):
    """The converted model against the module nobuco converted (PyTorch's own run of the same weights), in
    float32: within the sum of both bounds."""
    from rnn_equivalence.frameworks.pytorch import TorchLayer

    case, native = first_case(adapter, 970)
    args = (native, case.inputs("float32"), case.state("float32"), case.config, case.activation)
    converted, module = adapter.run_native(*args), TorchLayer.run_native(adapter, *args)
    bound = adapter.arrange(pair_bound(case.bound("float32"), case.bound("float32")), case.config)
    comparison = compare_outputs(converted, module, bound,
                                 f"{adapter.describe()} vs {adapter.cell} (torch), {case.describe('float32')}")
    record("pair", adapter, other=f"{adapter.cell} (torch)", dtype="float32", **comparison.as_record())
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: is_nobuco(cls) and cls.family == "lstm")
@pytest.mark.parametrize("module", ["RNN", "RNNCell"])
def test_nobuco_refuses_a_vanilla_rnn_loudly(adapter, module):
    """``nn.RNN`` and ``nn.RNNCell``: nobuco has no converter for them and says so ("Unimplemented nodes"),
    never converting them wrongly. Hence no nobuco system of the vanilla family; a release that converts them
    turns this red."""
    import torch

    layer = getattr(torch.nn, module)(4, 6)
    x = torch.zeros((5, 3, 4) if module == "RNN" else (3, 4))
    with pytest.raises(Exception, match="Unimplemented nodes"):
        adapter.keras_model(layer, [x])


@pytest.mark.applies_to(lambda cls: is_nobuco(cls) and cls.family == "lstm")
def test_nobuco_refuses_a_projection_loudly(adapter, monkeypatch):
    """``nn.LSTM(proj_size=P)``: nobuco builds a Keras LSTM of hidden size H without the projection, and Keras
    refuses ``weight_hr``'s shape (or, given one, the initial state of size P). Hence the system refuses the
    projection, naming this."""
    case = case_of(adapter, 5, 4, 3, 6, 971, LayerConfig(1, False, options=(("batch_first", False),)),
                   options="projection")
    with pytest.raises(ValueError, match="option 'projection' refused: nobuco"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
    monkeypatch.setattr(adapter, "refused_options", {})  # past the system's own refusal: the tool itself
    monkeypatch.setattr(adapter, "supported_options", frozenset({"projection"}))
    with pytest.raises(ValueError, match="is not compatible with"):  # weight_hr's shape, or h0 of size P
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)


@pytest.mark.applies_to(lambda cls: is_nobuco(cls))
def test_nobuco_refuses_a_packed_sequence_loudly(adapter):
    """A padded batch as PyTorch users pass it (``pack_padded_sequence``): nobuco refuses the call. Hence no
    padded configurations, and the system refuses a padded batch itself."""
    config = LayerConfig(1, False, options=(("batch_first", False), ("enforce_sorted", False)))
    case = case_of(adapter, 5, 4, 4, 9, 972, config, padding=Padding((5, 9, 1, 7), "post"))
    native = adapter.to_native(case.stack("float32"), config)
    module, args = adapter.module(native, case.inputs("float32"), case.state("float32"), config, case.activation,
                                  case.padding)
    assert type(args[0]).__name__ == "PackedSequence"
    with pytest.raises(AssertionError, match="Expected data to be a list or tuple of length 2"):
        adapter.keras_model(module, args)
    with pytest.raises(ValueError, match="padded batches are not supported"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config, case.padding)


@pytest.mark.applies_to(lambda cls: is_nobuco(cls))
def test_nobuco_converts_float64_into_float32(adapter, monkeypatch, record):
    """A float64 module becomes a float32 Keras model, with no warning: its outputs are float32, within the
    float32 bound of the reference and far outside the float64 one; given a float64 initial state, the model
    refuses to run (a float32 kernel meets a float64 state). Hence the systems are float32 only; the size of
    the difference is recorded."""
    monkeypatch.setattr(adapter, "dtypes", ("float32", "float64"))  # past the system's own refusal
    case, native = first_case(adapter, 973, "float64", initial_state=False)
    actual = adapter.run_native(native, case.inputs("float64"), None, case.config, case.activation)
    assert {np.asarray(value).dtype.name for value in actual.values()} == {"float32"}
    expected = adapter.arrange(case.reference(), case.config)
    actual = {name: np.asarray(value, np.float64) for name, value in actual.items()}
    in_float32 = compare_outputs(actual, expected, adapter.arrange(case.bound_vs_reference("float32"), case.config),
                                 f"{adapter.describe()} of a float64 module vs float32's bound")
    in_float64 = compare_outputs(actual, expected, adapter.arrange(case.bound_vs_reference("float64"), case.config),
                                 f"{adapter.describe()} of a float64 module vs float64's bound")
    assert in_float32.ratio <= 1, in_float32.message()
    assert in_float64.ratio > ORDERS_OF_MAGNITUDE, in_float64.message()
    record("nonequivalence", adapter, other=f"{adapter.cell} in float64", dtype="float64",
           reason="nobuco converts a float64 module into a float32 Keras model", **in_float64.as_record())
    with_state, native = first_case(adapter, 974, "float64")
    with pytest.raises(Exception, match="expected to be a double tensor but is a float tensor"):
        adapter.run_native(native, with_state.inputs("float64"), with_state.state("float64"), with_state.config,
                           with_state.activation)
