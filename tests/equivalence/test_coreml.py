"""coremltools (9.0, in its own environment: ``nox -s coreml``) converting PyTorch's ``nn.LSTM``, ``nn.RNN`` and
``nn.GRU`` into MIL programs, checked at the level of the specification (no Core ML runtime on Linux).

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/coreml_export.py. Measured here:

- the ops the conversion emits: one fused ``lstm`` / ``rnn`` op per layer; ``nn.GRU`` a ``while_loop``, never
  the ``gru`` op (coremltools#1124: the op's documented equation keeps b_hn outside the reset product, which
  PyTorch's GRU cannot be written in; the converter compensates by unrolling);
- coremltools#824 (bidirectional LSTM differs): the program's weights are PyTorch's, bit for bit, in the
  documented layout, and its documented equations agree with the reference;
- refused loudly: a bidirectional ``nn.RNN``, ``nn.LSTM(proj_size=P)``; and by the reading itself, a program
  whose ops are not the ones the evaluation assumes.
"""

import re

import numpy as np
import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from tests.equivalence.test_converters import design_models

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect


def is_coreml(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.coreml_export"


def converted_ops(adapter, module, args, target="iOS15") -> set:
    """Every MIL op type of ``module`` traced on ``args`` and converted as the systems convert."""
    import contextlib
    import io

    from rnn_equivalence.frameworks.coreml_export import operator_types

    ct, traced = adapter.ct, adapter.torch.jit.trace(module.eval(), args)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        program = ct.convert(traced, inputs=[ct.TensorType(shape=tuple(a.shape)) for a in args],
                             convert_to="milinternal", compute_precision=ct.precision.FLOAT32,
                             minimum_deployment_target=getattr(ct.target, target))
    return operator_types(program.functions["main"])


class FirstOutput:
    """A layer called without a state, its output sequence returned (what a user's module returns)."""

    def __new__(cls, torch, layer):
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = layer

            def forward(self, x):
                return self.layer(x)[0]

        return Module()


@pytest.mark.applies_to(lambda cls: is_coreml(cls))
def test_coreml_emits_the_declared_ops(adapter, depth, design_seed):
    """Every converted program of the design (``design_models``: each activation, each configuration) and the
    mutations' configuration: its recurrent ops are one kind, the fused op the family's conversion emits
    (``OPERATORS``: ``lstm``, ``rnn``), no ``while_loop``; one per layer (``read_program`` refuses any other
    count). A release that unrolls them, or fuses the GRU, turns this red."""
    from rnn_equivalence.frameworks.coreml_export import OPERATORS, RECURRENT_OPS

    runs = design_models(adapter, depth, design_seed, adapter.mutation_config)
    assert runs
    for case in runs:
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        found = adapter.last_operators & {*RECURRENT_OPS, "while_loop"}
        assert found == {OPERATORS[adapter.family]}, (case.activation, case.config, sorted(adapter.last_operators))


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-lstm")
@pytest.mark.parametrize("target", ["iOS15", "iOS18"])
def test_coreml_converts_a_gru_to_a_loop_not_the_gru_op(adapter, target):
    """coremltools#1124, the converter's side: ``nn.GRU`` (bidirectional, with biases) becomes a ``while_loop`` of
    ``linear`` ops, never MIL's ``gru`` op, for the oldest ML program target and for iOS18, whose ``gru`` gained
    ``reset_after`` and ``input_bias``: the torch frontend does not use them (frontend/torch/ops.py,
    ``_add_gru_layer``: "the Core ML GRU has different definition from Torch, so we cannot use mb.gru"). The
    converter compensates; hence no GRU system at this level (the loop's body is no op with a documented
    equation). A release that emits ``gru`` turns this red, and a ``coreml-gru`` system becomes possible."""
    torch = adapter.torch
    ops = converted_ops(adapter, FirstOutput(torch, torch.nn.GRU(3, 4, bidirectional=True)), (torch.zeros(5, 2, 3),),
                        target)
    assert "while_loop" in ops and "linear" in ops and "gru" not in ops, sorted(ops)


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-lstm")
def test_the_documented_gru_op_keeps_b_hn_outside_the_reset_product(adapter):
    """coremltools#1124, the op's side. MIL's ``gru`` (iOS15's docstring, unchanged in iOS17) computes
    ``o_t = activation(W_io x_t + b_io + r_t * W_ho h_(t-1) + b_ho)`` with one bias of ``3*H``: b_ho outside the
    reset product, where PyTorch has ``r * (W_hn h + b_hn)``. So PyTorch's weights put in the op (``bias`` =
    bias_ih + bias_hh, what a one-bias converter writes) compute another function: the reset-after reference
    with b_hn folded into b_in, held to the float64 reference of PyTorch's GRU, is orders of magnitude beyond
    the float32 bound; with b_hn = 0 the two are one function, within the bound. The documentation is pinned
    (a release that changes the equation turns this red). The folding is torch-gru's mutation "b_hn moved into
    b_in", there caught. No upstream bug: the converter does not use the op
    (``test_coreml_converts_a_gru_to_a_loop_not_the_gru_op``)."""
    from coremltools.converters.mil.mil.ops.defs.iOS15.recurrent import gru
    from coremltools.converters.mil.mil.ops.defs.iOS17.recurrent import gru as gru_17

    from rnn_equivalence.frameworks import adapter_class
    from rnn_equivalence.reference.stack import run_stack

    documented = re.sub(r"\s+", " ", gru.__doc__)
    assert r"o_t = \rm{activation}(W_{io} x_t + b_{io} + r_t * W_{ho} h_{t-1} + b_{ho})" in documented
    assert "bias: const<3*H, T>" in documented
    assert "only difference" in gru_17.__doc__ and "support for fp16" in gru_17.__doc__  # the same equation
    torch_gru = adapter_class("torch-gru-rnn")()  # PyTorch's GRU layer's case; nothing is imported
    case = case_of(torch_gru, 5, 4, 3, 6, 980, LayerConfig(2, True, options=(("batch_first", False),)))
    bound = case.bound_vs_reference("float32")
    as_op = run_stack(case.stack("float32").map(_fold).astype("float64"), case.inputs("float64"),
                      case.state("float64"))
    comparison = compare_outputs(as_op, case.reference(), bound,
                                 "the MIL gru op's documented equation on PyTorch's GRU weights")
    print(f"coremltools#1124: {comparison.message()}")
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    without_b_hn = case.stack("float32").map(_without_b_hn)
    same = compare_outputs(run_stack(without_b_hn.map(_fold).astype("float64"), case.inputs("float64"),
                                     case.state("float64")),
                           run_stack(without_b_hn.astype("float64"), case.inputs("float64"), case.state("float64")),
                           bound, "the MIL gru op's equation, b_hn = 0")
    assert same.ratio <= 1, same.message()


def _n_slice(params):
    H = params.hidden_size
    return slice(2 * H, 3 * H)  # gates r z n: n is the third block


def _without_b_hn(params):
    from dataclasses import replace

    b_h = params.b_h.copy()
    b_h[_n_slice(params)] = 0
    return replace(params, b_h=b_h)


def _fold(params):
    """The op's one bias read back as the reference's reset-after GRU: b_in + b_hn, b_hn = 0."""
    from dataclasses import replace

    b_x, b_h = params.b_x.copy(), params.b_h.copy()
    b_x[_n_slice(params)] += b_h[_n_slice(params)]
    b_h[_n_slice(params)] = 0
    return replace(params, b_x=b_x, b_h=b_h)


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-lstm")
def test_bidirectional_lstm_is_pytorchs_in_the_program(adapter):
    """coremltools#824 (a bidirectional LSTM's outputs differ from PyTorch's, reported from a Mac's runtime): at
    the level of the specification, refuted. The program's ``lstm`` ops (two layers, both directions, with an
    initial state) hold exactly the weights the mapping lays out (``weight_ih_back`` the reverse direction's,
    gates i f o z, one summed bias), bit for bit, and their documented equations are within the float32 bound
    of the reference (err/bound printed with ``-s``). What Core ML's runtime computes is not checked here."""
    config = LayerConfig(2, True, options=(("batch_first", True),))
    case = case_of(adapter, 5, 4, 3, 6, 981, config)
    native = adapter.to_native(case.stack("float32"), config)
    xs, state = case.inputs("float32"), case.state("float32")
    read = adapter.read_program(adapter.program(native, xs, state, config, case.activation), config, True,
                                case.activation)
    assert sorted(read) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(read[name], native[name], err_msg=name, strict=True)
    actual = adapter.run_native(native, xs, state, config, case.activation)
    comparison = compare_outputs(actual, adapter.arrange(case.reference(), config),
                                 adapter.arrange(case.bound_vs_reference("float32"), config),
                                 f"{adapter.describe()}, {case.describe('float32')} (coremltools#824)")
    print(f"coremltools#824: {comparison.message()}")
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-rnn")
def test_coreml_refuses_a_bidirectional_rnn_loudly(adapter):
    """``nn.RNN(bidirectional=True)``: coremltools 9.0 refuses it ("Bidirectional simple RNN not supported"), never
    converting it wrongly. Hence the RNN system's configurations are unidirectional; a release that converts it
    turns this red."""
    torch = adapter.torch
    with pytest.raises(NotImplementedError, match="Bidirectional simple RNN not supported"):
        converted_ops(adapter, FirstOutput(torch, torch.nn.RNN(3, 4, bidirectional=True)), (torch.zeros(5, 2, 3),))


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-lstm")
def test_coreml_refuses_a_projection_loudly(adapter):
    """``nn.LSTM(proj_size=P)``: coremltools 9.0 refuses it (its weight list has weight_hr too: "Incorrect weights
    shape for lstm layer"), and the MIL ``lstm`` op has no projection. Hence the system refuses the option,
    naming why; a release that converts it turns this red."""
    torch = adapter.torch
    with pytest.raises(ValueError, match="Incorrect weights shape for lstm layer"):
        converted_ops(adapter, FirstOutput(torch, torch.nn.LSTM(3, 6, proj_size=4)), (torch.zeros(5, 2, 3),))
    case = case_of(adapter, 5, 4, 3, 6, 982, LayerConfig(1, False, options=(("batch_first", False),)),
                   options="projection")
    with pytest.raises(ValueError, match="option 'projection' refused: the MIL lstm op has no projection"):
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-rnn")
def test_reading_a_program_refuses_what_the_evaluation_does_not_assume(adapter):
    """``read_program`` checks every attribute the evaluation relies on, so that a program holding another op
    than the one evaluated is an error, never a silent pass: a tanh program read as relu, a program whose initial
    state is computed read as one of zeros (and the other way), a program of two layers read as three."""
    config = LayerConfig(2, False, options=(("batch_first", False),))
    case = case_of(adapter, 5, 4, 3, 6, 983, config, activation="tanh")
    native = adapter.to_native(case.stack("float32"), config)
    given = adapter.program(native, case.inputs("float32"), case.state("float32"), config, "tanh")
    zeros = adapter.program(native, case.inputs("float32"), None, config, "tanh")
    assert adapter.read_program(given, config, True, "tanh").keys() == native.keys()
    with pytest.raises(ValueError, match=r"holds \{'direction': 'forward', 'output_sequence': True, 'activation': "
                                         r"'tanh'\}, the evaluation assumes"):
        adapter.read_program(given, config, True, "relu")
    with pytest.raises(ValueError, match="initial_h is computed; expected zeros"):
        adapter.read_program(given, config, False, "tanh")
    with pytest.raises(ValueError, match="initial_h is a constant; expected the given state"):
        adapter.read_program(zeros, config, True, "tanh")
    with pytest.raises(ValueError, match=r"expected 3 MIL 'rnn' op\(s\), one per layer"):
        adapter.read_program(given, LayerConfig(3, False), True, "tanh")


@pytest.mark.applies_to(lambda cls: cls.name == "coreml-lstm")
def test_coremltools_2110_a_float16_program_holds_the_case_the_reference_locates(adapter):
    """coremltools#2110 (fp16 output wrong, fp32 right: an intermediate overflows), at the level of the
    specification: the two-layer LSTM of tests/equivalence/test_half_coreml_threads.py (a partial sum of layer 1's
    forget gate passes 65504 in float16, nothing else near it) converted with ``compute_precision=FLOAT16``.
    Measured (coremltools 9.0): for iOS15 and iOS16 the converter leaves the ``lstm`` ops in float32 (their
    weights float32; the program cannot overflow there: ``overflow`` in float32); from iOS17 they read and write
    float16 and hold the case's weights bit for bit (the biases summed in float16), so the reference's float16
    evaluation of that program locates the overflow where it does on the case (layer 1, step 2, gate f, unit 0,
    batch element 0, a partial sum). Whether Core ML's float16 kernels accumulate in half (and so overflow there)
    is the runtime's, not checked here (no Core ML on Linux)."""
    import contextlib
    import io

    from rnn_equivalence.reference.overflow_site import first_overflow
    from rnn_equivalence.reference.tolerance import overflow
    from tests.equivalence.test_half_coreml_threads import data, passing_cell_stack

    ct, torch = adapter.ct, adapter.torch
    stack, xs = passing_cell_stack(), data()
    config = LayerConfig(2, False, initial_state=False, options=(("batch_first", False),))
    native = adapter.to_native(stack.astype("float32"), config)
    module, args = adapter.torch_module(native, xs.astype(np.float32), None, config, "tanh")
    traced = torch.jit.trace(module, args)

    def read(target: str):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            program = ct.convert(traced, inputs=[ct.TensorType(shape=tuple(a.shape)) for a in args],
                                 convert_to="milinternal", compute_precision=ct.precision.FLOAT16,
                                 minimum_deployment_target=getattr(ct.target, target))
        return adapter.from_native(adapter.read_program(program, config, False, "tanh"), config)

    _, expected = first_overflow(stack, xs, None, "float16")
    for target in ("iOS15", "iOS16"):
        held = read(target)
        assert all(p.W_x.dtype == np.float32 for _, _, p in held.cells()), target
        assert not overflow(held.astype("float64"), xs, None, "float32").possible, target
    held = read("iOS17")
    for (k, _, p16), (_, _, p) in zip(held.cells(), stack.cells()):
        assert p16.W_x.dtype == np.float16, (k, p16.W_x.dtype)
        np.testing.assert_array_equal(p16.W_x.astype(np.float64), p.W_x, err_msg=f"layer {k} W_x")
        np.testing.assert_array_equal(p16.W_h.astype(np.float64), p.W_h, err_msg=f"layer {k} W_h")
        np.testing.assert_array_equal(p16.b_x.astype(np.float64),
                                      np.asarray(p.b_x + p.b_h, np.float16).astype(np.float64), err_msg=f"layer {k} b")
    _, site = first_overflow(held.astype("float64"), xs, None, "float16")
    print(f"coremltools#2110: the iOS17 FLOAT16 program overflows at {site}")
    assert site is not None and (site.layer, site.step, site.gate, site.unit, site.batch, site.operation) == \
        (expected.layer, expected.step, expected.gate, expected.unit, expected.batch, expected.operation) == \
        (1, 2, "f", 0, 0, "partial sum"), (site, expected)
