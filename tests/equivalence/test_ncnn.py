"""ncnn through pnnx (pnnx 20261020, ncnn 1.0.20261020, in their own environment: ``nox -s ncnn``; issue 36):
PyTorch's ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` traced, converted by pnnx into an ncnn ``.param``/``.bin``, run
by ncnn's Python API.

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/ncnn_export.py. Measured here:

- the layers the conversion emits: one fused ncnn ``LSTM`` / ``GRU`` / ``RNN`` per PyTorch layer, both
  directions in one (``2=2``), never unrolled;
- ncnn#2562 (a bidirectional LSTM differs from PyTorch) and ncnn#3665 (a GRU differs when h0 is passed), each
  with its err/bound;
- refused loudly, each by name: ``nn.RNN(nonlinearity="relu")`` (pnnx converts it to tanh, saying so only in its
  log), a batch > 1 in one model, padded batches; and by the reading itself, a ``.param`` whose layers are not
  the ones the run assumes;
- and the ncnn model agrees with the PyTorch module it was converted from, not only with the reference.
"""

import numpy as np
import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.tolerance import pair_bound
from tests.equivalence.test_converters import design_models

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect


def is_ncnn(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.ncnn_export"


def compared(adapter, case, actual, what):
    """``actual`` (PyTorch's layout) against the float64 reference of the case, with its float32 bound."""
    config = case.config
    return compare_outputs(actual, adapter.arrange(case.reference(), config),
                           adapter.arrange(case.bound_vs_reference("float32"), config),
                           f"{what}: {adapter.describe()}, {case.describe('float32')}")


@pytest.mark.applies_to(lambda cls: is_ncnn(cls))
def test_ncnn_emits_the_declared_layers(adapter, depth, design_seed):
    """Every converted model of the design (``design_models``: each activation, each configuration) and the
    mutations' configuration: its ``.param`` holds one recurrent layer type, the fused one of the family
    (``OPERATORS``: ``LSTM``, ``GRU``, ``RNN``), one per PyTorch layer, each with the configuration's direction and
    sizes (``read_param`` refuses anything else); besides them only ``Input``, ``Slice`` (a given state split per
    layer) and ``Concat`` (the final states joined). A release that unrolls them turns this red."""
    from rnn_equivalence.frameworks.ncnn_export import OPERATORS, param_layers

    runs = design_models(adapter, depth, design_seed, adapter.mutation_config)
    assert runs
    for case in runs:
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        layers = param_layers(adapter.last_param)
        recurrent = [layer for layer in layers if layer["type"] not in ("Input", "Slice", "Concat")]
        assert [layer["type"] for layer in recurrent] == [OPERATORS[adapter.family]] * case.config.num_layers, (
            case.activation, case.config, [layer["type"] for layer in layers])
        assert {layer["params"]["2"] for layer in recurrent} == {"2" if case.config.bidirectional else "0"}


@pytest.mark.applies_to(lambda cls: is_ncnn(cls))
def test_the_ncnn_model_agrees_with_the_pytorch_module(adapter, record):
    """The ncnn model against the module pnnx converted (PyTorch's own run of the same weights), in float32, two
    layers, both directions, batch first, with an initial state: within the sum of both bounds."""
    from rnn_equivalence.frameworks.pytorch import TorchLayer

    config = LayerConfig(2, True, options=(("batch_first", True),))
    case = case_of(adapter, 5, 4, 3, 6, 960, config)
    native = adapter.to_native(case.stack("float32"), config)
    args = (native, case.inputs("float32"), case.state("float32"), config, case.activation)
    converted, module = adapter.run_native(*args), TorchLayer.run_native(adapter, *args)
    bound = adapter.arrange(pair_bound(case.bound("float32"), case.bound("float32")), config)
    comparison = compare_outputs(converted, module, bound,
                                 f"{adapter.describe()} vs {adapter.cell} (torch), {case.describe('float32')}")
    record("pair", adapter, other=f"{adapter.cell} (torch)", dtype="float32", **comparison.as_record())
    assert_within_bound(comparison)


# --- ncnn#2562: a bidirectional LSTM differs from PyTorch ---------------------------------------------------


def _pnnx_defaults(adapter, native, xs, state, config, g):
    """The same model converted and run with the tools' defaults: pnnx's fp16=1 (float16 weights in the .bin) and
    ncnn's default options (fp16 / bf16 storage where the CPU has it)."""
    module, args = adapter.traced_module(native, xs, state, config, g)
    param, weights, _ = adapter.convert(module, args, fp16=True)
    result = adapter.run_model(param, weights, xs, state, config, fp16=True)
    return {key: value.astype(np.float32) for key, value in result.items()}


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-lstm")
def test_bidirectional_lstm_2562(adapter):
    """ncnn#2562 (a bidirectional ``nn.LSTM(10, 5, batch_first=True, bidirectional=True)`` on a (1, 3, 10) input
    computes other outputs in ncnn than in PyTorch; reported through ONNX, 2021): through pnnx, **refuted**. The
    thread's model (its sizes and layout, the suite's weights and inputs) converts to one ``LSTM`` layer with
    ``2=2`` and its outputs are within the float32 bound of the reference (err/bound printed with ``-s``). With the
    tools' defaults (pnnx ``fp16=1``: the ``.bin`` holds float16 weights) the same model is beyond the float32
    bound: float16 weights, not the bidirectional layer, are what such a comparison sees (``RUNS_WITH``)."""
    config = LayerConfig(1, True, initial_state=False, options=(("batch_first", True),))
    case = case_of(adapter, 10, 5, 1, 3, 961, config)
    native = adapter.to_native(case.stack("float32"), config)
    xs = case.inputs("float32")
    actual = adapter.run_native(native, xs, None, config, case.activation)
    assert [layer["type"] for layer in adapter.read_param(adapter.last_param, config, 5)] == ["LSTM"]
    comparison = compared(adapter, case, actual, "ncnn#2562")
    print(f"ncnn#2562, fp16=0: {comparison.message()}")
    assert_within_bound(comparison)
    defaults = compared(adapter, case, _pnnx_defaults(adapter, native, xs, None, config, case.activation),
                        "ncnn#2562 with pnnx's default fp16=1")
    print(f"ncnn#2562, pnnx's defaults: {defaults.message()}")
    assert defaults.ratio > 1, defaults.message()


# --- ncnn#3665: a GRU differs when h0 is passed ------------------------------------------------------------

# The thread's nn.GRU(464, 512), a tenth: the float64 reference and its bound cost minutes at the thread's sizes.
THREAD_SIZES = (46, 51)


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-gru")
def test_gru_with_h0_of_one_sequence_3665(adapter):
    """ncnn#3665 (``nn.GRU(464, 512)`` called with ``h_0`` differs in ncnn): for one sequence, **refuted**. The
    thread's GRU, its sizes a tenth (``THREAD_SIZES``), with a given h0, 60 steps of one sequence, is within the
    float32 bound of the reference (err/bound printed with ``-s``); so is the same GRU from zeros."""
    for given in (True, False):
        config = LayerConfig(1, False, initial_state=given, options=(("batch_first", False),))
        case = case_of(adapter, *THREAD_SIZES, 1, 60, 962, config)
        native = adapter.to_native(case.stack("float32"), config)
        actual = adapter.run_native(native, case.inputs("float32"), case.state("float32"), config, case.activation)
        comparison = compared(adapter, case, actual, f"ncnn#3665, one sequence, h0 {'given' if given else 'zeros'}")
        print(f"ncnn#3665, one sequence of 60 steps, h0 {'given' if given else 'zeros'}: {comparison.message()}")
        assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-gru")
def test_gru_of_the_threads_shapes_reads_the_batch_as_time_3665(adapter):
    """ncnn#3665 as posted (its sizes a tenth), **reproduced**, and its cause: ``x_0`` (1, 60, 464) and ``h_0``
    (1, 60, 512) with
    ``batch_first=False`` are one step of a batch of 60 to PyTorch. pnnx converts the model traced on them (no
    error, one ``GRU`` layer) and ncnn, which has no batch axis, runs it as 60 steps of one sequence: the output's
    size is PyTorch's, its values are not (measured: err/bound 1.9e5, orders of magnitude beyond the float32
    bound). The systems convert a batch-1 model and run each sequence by itself
    (``BATCH``), which ``test_gru_with_h0_of_one_sequence_3665`` finds right."""
    torch = adapter.torch
    config = LayerConfig(1, False, options=(("batch_first", False),))
    I, H = THREAD_SIZES
    case = case_of(adapter, I, H, 60, 1, 963, config)
    native = adapter.to_native(case.stack("float32"), config)
    xs, state = case.inputs("float32"), case.state("float32")
    layer, _ = adapter.module(native, xs, state, config, case.activation)

    class Thread(torch.nn.Module):  # the thread's GRU_l1: forward(x_0, h_0) -> (x_0, h_0)
        def __init__(self):
            super().__init__()
            self.gru = layer

        def forward(self, x, h):
            return self.gru(x, h)

    args = (torch.from_numpy(xs), torch.from_numpy(state["h"]))
    param, weights, _ = adapter.convert(Thread().eval(), args)
    assert [layer["type"] for layer in adapter.read_param(param, config, H)] == ["GRU"]
    net = adapter.net(param, weights)
    output, h_n = adapter.extract(net, param, [xs[0], state["h"][0]], 2)  # as the thread feeds them: (60, 464)
    assert output.size == 60 * H and h_n.size == 60 * H, (output.shape, h_n.shape)
    actual = {"output": output.reshape(1, 60, H), "h_n": h_n.reshape(1, 60, H)}
    comparison = compared(adapter, case, actual, "ncnn#3665 as posted (T=1, batch 60)")
    print(f"ncnn#3665 as posted: {comparison.message()}")
    assert not np.isfinite(comparison.ratio) or comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


# --- the refusals ------------------------------------------------------------------------------------------


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-rnn")
def test_pnnx_converts_a_relu_rnn_to_tanh_and_the_system_refuses_it(adapter, monkeypatch):
    """``nn.RNN(nonlinearity="relu")``: pnnx 20261020 says "RNN nonlinearity=relu not supported" in its log, exits
    0 and writes ncnn's ``RNN`` layer, which computes tanh (it has no activation parameter): the converted model is
    orders of magnitude beyond the float32 bound of the relu reference. Hence the system refuses relu, naming
    this (``RELU``); a release that converts it turns this red."""
    config = LayerConfig(1, False, options=(("batch_first", False),))
    case = case_of(adapter, 4, 6, 1, 7, 964, config, activation="relu")
    from rnn_equivalence.frameworks.mapping import mapping_of
    from rnn_equivalence.frameworks.pytorch import TorchRNN

    native = mapping_of(TorchRNN).to_native(case.stack("float32"), config)
    xs, state = case.inputs("float32"), case.state("float32")
    monkeypatch.setattr(adapter, "activations", ("tanh", "relu"))  # past the system's own refusal: the tool itself
    module, args = adapter.traced_module(native, xs, state, config, "relu")
    param, weights, log = adapter.convert(module, args)
    assert "RNN nonlinearity=relu not supported" in log, log
    (rnn,) = adapter.read_param(param, config, 6)
    assert rnn["type"] == "RNN" and set(rnn["params"]) == {"0", "1", "2"}, rnn  # no activation among them
    actual = adapter.run_model(param, weights, xs, state, config)
    comparison = compared(adapter, case, actual, "pnnx's relu RNN")
    print(f"relu RNN through pnnx: {comparison.message()}")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    with pytest.raises(ValueError, match="nonlinearity='relu' refused: ncnn's RNN layer computes tanh only"):
        adapter.run_native(native, xs, state, config, "relu")


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-lstm")
def test_a_model_traced_on_a_batch_does_not_return_the_batch(adapter):
    """``BATCH``: pnnx converts a two-layer LSTM traced on a batch of 3 (6 steps, h0 and c0 given) without error,
    but ncnn's layers have no batch axis: fed the (6, 3, 4) input and (2, 3, 5) states, the model's output is
    (3, 5), not PyTorch's (6, 3, 5). Hence the systems convert the batch-1 model and run each sequence of a batch
    by itself; a release whose model keeps the batch turns this red."""
    config = LayerConfig(2, False, options=(("batch_first", False),))
    case = case_of(adapter, 4, 5, 3, 6, 965, config)
    native = adapter.to_native(case.stack("float32"), config)
    xs, state = case.inputs("float32"), case.state("float32")
    module, args = adapter.module(native, xs, state, config, case.activation)
    torch = adapter.torch

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = module

        def forward(self, x, h, c):
            out, (h_n, c_n) = self.layer(x, (h, c))
            return out, h_n, c_n

    param, weights, _ = adapter.convert(Flat().eval(), (args[0], *args[1]))
    assert [layer["type"] for layer in adapter.read_param(param, config, 5)] == ["LSTM", "LSTM"]
    output, _, _ = adapter.extract(adapter.net(param, weights), param, [xs, state["h"], state["c"]], 3)
    assert output.shape == (3, 5), output.shape  # PyTorch's: (6, 3, 5)


@pytest.mark.applies_to(lambda cls: is_ncnn(cls))
def test_ncnn_refuses_a_padded_batch_loudly(adapter):
    """ncnn's recurrent layers take no lengths (``PADDING``): a padded batch is refused, naming the system's
    argument, never run as if every sequence were whole."""
    config = LayerConfig(1, False, options=(("batch_first", False),))
    case = case_of(adapter, 4, 5, 2, 6, 966, config)
    with pytest.raises(ValueError, match="padded batches are not supported by this system"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config,
                    Padding((6, 3), "post"))


@pytest.mark.applies_to(lambda cls: cls.name == "ncnn-gru")
def test_reading_a_param_refuses_what_the_run_does_not_assume(adapter):
    """``read_param`` checks the layers' count, type, direction and sizes, so that a ``.param`` holding another
    model than the one run is an error, never a silent pass."""
    config = LayerConfig(2, True, options=(("batch_first", False),))
    case = case_of(adapter, 4, 5, 1, 3, 967, config)
    adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), config)
    param = adapter.last_param
    assert len(adapter.read_param(param, config, 5)) == 2
    with pytest.raises(ValueError, match=r"expected 3 ncnn 'GRU' layer\(s\), one per layer"):
        adapter.read_param(param, LayerConfig(3, True), 5)
    with pytest.raises(ValueError, match=r"holds \{'direction': 'bidirectional'.*the run assumes \{'direction': "
                                         r"'forward'"):
        adapter.read_param(param, LayerConfig(2, False), 5)
    with pytest.raises(ValueError, match="the run assumes"):
        adapter.read_param(param, config, 6)
