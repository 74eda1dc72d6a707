"""litert-torch (0.10.0, in its own environment: ``nox -s litert-torch``) converting PyTorch's ``nn.LSTM``, ``nn.GRU``
and ``nn.RNN`` to TFLite, run in LiteRT's interpreter. frameworks/litert_torch_export.py.

The equivalence itself is the reference tests' (every design case of what the systems declare). Measured here:

- litert-torch#53 (an LSTM silently unrolled and split into basic ops), reproduced: no converted model holds a
  recurrent op (a fused sequence kernel or a WHILE loop); each holds the cell's nonlinearities once per step, layer
  and direction; and the unrolled model is within the float32 bound of the reference;
- litert-torch#808 (``nn.LSTM`` fails to convert), refuted: the issue's module, an unbatched ``nn.LSTM(20, 100)``
  called on a (1, 20) input, converts, and computes the layer within the float32 bound, as on a batch of one;
- refused loudly: a packed sequence (hence no padded batches).
"""

from collections import Counter

import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from tests.equivalence.test_converters import design_models

MODULE = "rnn_equivalence.frameworks.litert_torch_export"


def is_litert_torch(cls):
    return cls.__module__ == MODULE


@pytest.mark.applies_to(lambda cls: is_litert_torch(cls))
def test_litert_torch_unrolls_every_step(adapter, depth, design_seed):
    """litert-torch#53, reproduced: every converted model of the design (``design_models``: each activation, each
    configuration) and the mutations' configuration holds no recurrent op (no ``UNIDIRECTIONAL_SEQUENCE_LSTM`` /
    ``_RNN``, no ``BIDIRECTIONAL_SEQUENCE_*``, no ``WHILE``: ``recurrent_operators()`` empty, as the systems declare,
    ``operators``), and holds the cell's nonlinearities (``STEP_OPS``: an LSTM's 3 ``LOGISTIC`` and 2 ``TANH``; a relu
    RNN's relu fused into a ``FULLY_CONNECTED``, at least one a step) once per step, layer and direction (without an initial state, those of the first step that multiply the zero state
    are folded away): the recurrence is unrolled into basic ops, whatever the length. A release that
    emits a fused kernel or a loop turns this red."""
    from rnn_equivalence.frameworks.litert_torch_export import AT_LEAST, step_ops

    runs = design_models(adapter, depth, design_seed, adapter.mutation_config)
    assert runs
    for case in runs:
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        assert adapter.recurrent_operators() == set(adapter.operators), (case.config, adapter.last_operator_counts)
        chains = case.config.num_layers * (2 if case.config.bidirectional else 1)
        counts = adapter.last_operator_counts
        for op, n in step_ops(adapter.family, case.activation).items():
            # Without an initial state the first step's products with the zero state fold away (an LSTM's forget
            # gate times c0 = 0: 4 LOGISTIC fewer for two bidirectional layers): at most one step's ops fewer.
            most = n * case.steps * chains
            least = most if case.config.initial_state else most - n * chains
            most = float("inf") if op in AT_LEAST else most
            assert least <= counts[op] <= most, (op, case.activation, case.config, case.steps, counts)


@pytest.mark.applies_to(lambda cls: cls.name == "litert-torch-lstm")
def test_litert_torch_53_the_unrolled_lstm_grows_with_the_steps_and_is_right(adapter):
    """litert-torch#53, the figures: one two-layer bidirectional LSTM converted for 2 and for 12 steps. Both models
    hold no LSTM op and no loop; the second holds 6 times the first's LOGISTIC and TANH ops (3 LOGISTIC and 2 TANH
    per step, layer and direction: 24 and 144 LOGISTIC), so the model grows with the sequence. And it is silent in the other sense too: the unrolled model computes PyTorch's layer, each
    within the float32 bound of the float64 reference (err/bound printed with ``-s``)."""
    config = LayerConfig(2, True, options=(("batch_first", False),))
    counts = {}
    for T in (2, 12):
        case = case_of(adapter, 3, 4, 2, T, 53, config)
        actual = adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config)
        counts[T] = Counter(adapter.last_operator_counts)
        assert adapter.recurrent_operators() == set()
        comparison = compare_outputs(actual, adapter.arrange(case.reference(), config),
                                     adapter.arrange(case.bound_vs_reference("float32"), config),
                                     f"{adapter.describe()}, {T} steps (litert-torch#53)")
        print(f"litert-torch#53, {T} steps: {dict(counts[T])}; {comparison.message()}")
        assert_within_bound(comparison)
    assert counts[2]["LOGISTIC"] == 3 * 2 * 4 and counts[12]["LOGISTIC"] == 3 * 12 * 4, counts
    assert counts[2]["TANH"] == 2 * 2 * 4 and counts[12]["TANH"] == 2 * 12 * 4, counts


class _Unbatched:
    """The module of litert-torch#808: an LSTM called on an unbatched (steps, features) input, its output and final
    states returned."""

    def __new__(cls, torch, layer):
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, x):
                output, (h, c) = self.layer(x)
                return output, h, c

        return Module().eval()


@pytest.mark.applies_to(lambda cls: cls.name == "litert-torch-lstm")
@pytest.mark.parametrize("unbatched", [True, False], ids=["unbatched", "batch-of-one"])
def test_litert_torch_808_the_issues_lstm_converts(adapter, unbatched):
    """litert-torch#808 ("failed to convert a LSTM module": an ``nn.LSTM(20, 100)`` called on a (1, 20) input, an
    unbatched sequence of one step, its output and both final states returned; the report's converter failed on a
    program whose outputs had no shape, ``tensor<*xf32>``): refuted on litert-torch 0.10.0. The issue's module
    converts, unbatched and on a batch of one, (1, 1, 20); its outputs have the module's shapes ((1, 100) each
    unbatched) and agree with PyTorch's (the largest difference printed with ``-s``); the same module with the
    suite's weights (10 units) is within the float32 bound of the float64 reference (err/bound printed). A release
    that fails again turns this red."""
    torch = adapter.torch
    torch.manual_seed(808)
    issue = torch.nn.LSTM(20, 100)  # the issue's module, its own initial weights
    x = torch.randn(1, 20) if unbatched else torch.randn(1, 1, 20)
    actual = adapter.run_flatbuffer(adapter.convert(_Unbatched(torch, issue), (x,)), (x,))
    assert [a.shape for a in actual] == [tuple(x.shape[:-1]) + (100,)] * 3, [a.shape for a in actual]
    assert adapter.recurrent_operators() == set()
    with torch.no_grad():
        expected = [t.numpy() for t in _Unbatched(torch, issue)(x)]
    print(f"litert-torch#808, the issue's LSTM(20, 100): max |TFLite - torch| "
          f"{max(float(abs(a - e).max()) for a, e in zip(actual, expected)):.3g}")
    # Held to the bound: the suite's weights (20 inputs, 10 units: the suite draws every weight distinct, which
    # 100 units' 48,000 float32 values do not allow), one step, unbatched or a batch of one.
    config = LayerConfig(1, False, initial_state=False, options=(("batch_first", False),))
    case = case_of(adapter, 20, 10, 1, 1, 808, config)
    xs = case.inputs("float32")  # (1 step, batch 1, 20)
    layer, _ = adapter.module(adapter.to_native(case.stack("float32"), config), xs, None, config, case.activation)
    x = torch.from_numpy(xs[:, 0, :].copy() if unbatched else xs.copy())
    actual = adapter.run_flatbuffer(adapter.convert(_Unbatched(torch, layer), (x,)), (x,))
    actual = {key: value.reshape(1, 1, 10) for key, value in zip(("output", "h_n", "c_n"), actual)}
    comparison = compare_outputs(actual, adapter.arrange(case.reference(), config),
                                 adapter.arrange(case.bound_vs_reference("float32"), config),
                                 f"{adapter.describe()}, litert-torch#808's module "
                                 f"({'unbatched' if unbatched else 'batch of one'}, 10 units)")
    print(f"litert-torch#808: {comparison.message()}")
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "litert-torch-lstm")
def test_litert_torch_refuses_a_packed_sequence(adapter):
    """A packed sequence (``pack_padded_sequence`` with the lengths as an input, as a user's model packs): refused
    loudly by the conversion (``torch.export`` cannot trace the data-dependent batch sizes), never converted
    wrongly; hence no padded configurations, and a padded batch is refused by name. A release that converts it
    turns this red."""
    torch = adapter.torch
    rnn = torch.nn.utils.rnn

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.LSTM(3, 4)

        def forward(self, x, lengths):
            output, _ = self.layer(rnn.pack_padded_sequence(x, lengths, enforce_sorted=False))
            return rnn.pad_packed_sequence(output, total_length=5)[0]

    with pytest.raises(TypeError, match="FakeTensor"):
        adapter.convert(Packed().eval(), (torch.zeros(5, 2, 3), torch.tensor([5, 3])))
    case = case_of(adapter, 3, 4, 2, 5, 54, adapter.configs[0])
    from rnn_equivalence.reference.padding import Padding

    with pytest.raises(ValueError, match="padded batches are not supported"):
        adapter.run_native(adapter.to_native(case.stack("float32"), case.config), case.inputs("float32"), None,
                           case.config, case.activation, Padding((5, 3)))
