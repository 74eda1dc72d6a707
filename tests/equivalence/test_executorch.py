"""ExecuTorch (1.5.1 with torch 2.13.0, in its own environment: ``nox -s executorch``): ``torch.export`` of PyTorch's
``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` lowered to an ExecuTorch program (.pte) and run by its Python runtime.
frameworks/executorch_export.py.

The equivalence itself is the reference tests' (every design case of what the systems declare). Measured here:

- the program holds no recurrent operator: every step of every layer and direction is unrolled into kernel calls;
- pytorch#151200 (an exported LSTM's h_n and c_n get an extra dimension), refuted in the .pte: its declared output
  shapes and its outputs are (L*D, batch, H);
- executorch#8468 (a dynamic sequence length blocks the export), reproduced; PyTorch's private way round it exports
  an LSTM, which ExecuTorch then refuses to lower (executorch#20008);
- executorch#10104 (a GRU fails under static quantization, XNNPACK quantizer, pt2e), refuted as a failure: the
  quantizer quantizes nothing in the GRU, silently, and the program is the float GRU;
- refused loudly: a packed sequence (hence no padded batches).
"""

import subprocess
import sys

import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from tests.equivalence.test_converters import design_models

MODULE = "rnn_equivalence.frameworks.executorch_export"


def is_executorch(cls):
    return cls.__module__ == MODULE


@pytest.mark.applies_to(lambda cls: is_executorch(cls))
def test_executorch_program_unrolls_every_step(adapter, depth, design_seed):
    """Every program of the design (``design_models``: each activation, each configuration) and the mutations'
    configuration: its kernel calls include no recurrent operator (``aten::lstm``, ``aten::gru``, ``aten::rnn_*``:
    ``recurrent_operators()`` empty, as the systems declare, ``operators``), and the cell's nonlinearities
    (``STEP_CALLS``: an LSTM's 3 ``aten::sigmoid`` and 2 ``aten::tanh``) once per step, layer and direction
    (without an initial state, those of the first step that multiply the zero state may be folded away). A release
    that keeps a recurrent operator turns this red."""
    from rnn_equivalence.frameworks.executorch_export import step_calls

    runs = design_models(adapter, depth, design_seed, adapter.mutation_config)
    assert runs
    for case in runs:
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config)
        assert adapter.recurrent_operators() == set(adapter.operators), (case.config, adapter.last_kernel_calls)
        chains = case.config.num_layers * (2 if case.config.bidirectional else 1)
        calls = adapter.last_kernel_calls
        for op, n in step_calls(adapter.family, case.activation).items():
            most = n * case.steps * chains
            least = most if case.config.initial_state else most - n * chains
            assert least <= calls[op] <= most, (op, case.activation, case.config, case.steps, calls)


@pytest.mark.applies_to(lambda cls: cls.name == "executorch-lstm")
def test_executorch_151200_the_programs_states_have_the_layers_shape(adapter):
    """pytorch#151200 ("an exported LSTM's h_n and c_n have an extra dimension": 4-D, (L*D, 1, batch, H), in the
    exported program), refuted in the .pte on torch 2.13.0: the issue's layer (13 inputs, 20 units, one
    bidirectional layer, batch first, no bias, a batch of 4, 10 steps) and a two-layer one; the program's declared
    output shapes (the method's metadata, which the runtime's memory plan follows) and its outputs are the layer's,
    (L*D, batch, H) for h_n and c_n, and within the float32 bound of the reference (err/bound printed with
    ``-s``)."""
    for config in (LayerConfig(1, True, bias=False, initial_state=False, options=(("batch_first", True),)),
                   LayerConfig(2, True, initial_state=False, options=(("batch_first", True),))):
        case = case_of(adapter, 13, 20, 4, 10, 151200, config)
        actual = adapter.run(case.stack("float32"), case.inputs("float32"), None, config)
        D = 2 * config.num_layers
        meta = adapter.last_program.load_method("forward").metadata
        declared = [tuple(meta.output_tensor_meta(i).sizes()) for i in range(meta.num_outputs())]
        assert declared == [(4, 10, 40), (D, 4, 20), (D, 4, 20)], declared
        assert [actual[k].shape for k in ("output", "h_n", "c_n")] == declared
        comparison = compare_outputs(actual, adapter.arrange(case.reference(), config),
                                     adapter.arrange(case.bound_vs_reference("float32"), config),
                                     f"{adapter.describe()}, {config} (pytorch#151200)")
        print(f"pytorch#151200: {comparison.message()}")
        assert_within_bound(comparison)


# Made in a child process: in a process that has exported an LSTM already, PyTorch's patch no longer takes effect
# (measured; a cached decomposition). Exit 3: the export refused; 4: the lowering refused; 0: the .pte written.
DYNAMIC_LOWERING = """
import sys, warnings
import torch
from torch.export import Dim
from torch.export._patches import register_lstm_while_loop_decomposition
from executorch.exir import to_edge
warnings.simplefilter("ignore")
layer = getattr(torch.nn, sys.argv[1])(3, 4)

class Program(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)

steps = Dim("steps", min=2, max=64)
try:
    with register_lstm_while_loop_decomposition():
        exported = torch.export.export(Program().eval(), (torch.zeros(6, 2, 3),), dynamic_shapes=({0: steps},))
except Exception as error:
    print(type(error).__name__, error)
    sys.exit(3)
try:
    program = to_edge(exported).to_executorch()
except Exception as error:
    print(type(error).__name__, error)
    sys.exit(4)
open(sys.argv[2], "wb").write(program.buffer)
"""


@pytest.mark.applies_to(lambda cls: is_executorch(cls))
def test_executorch_8468_a_dynamic_sequence_length_is_refused(adapter):
    """executorch#8468 (a model with LSTMs cannot be exported with a dynamic sequence length), reproduced on torch
    2.13.0 for each family: ``torch.export`` with the length declared dynamic (``torch.export.Dim``) refuses the
    layer ("Constraints violated (steps)! ... your code specialized it to be a constant (6)"), so no .pte is made;
    each program is made for one length (the systems convert one per length). A release that exports it turns this
    red."""
    torch = adapter.torch
    module = adapter._module_class()(3, 4)
    steps = torch.export.Dim("steps", min=2, max=64)
    with pytest.raises(Exception, match=r"Constraints violated \(steps\)"):
        torch.export.export(module.eval(), (torch.zeros(6, 2, 3),), dynamic_shapes=({0: steps},))


@pytest.mark.applies_to(lambda cls: is_executorch(cls))
def test_executorch_8468_the_while_loop_decomposition_does_not_reach_a_pte(adapter, tmp_path):
    """PyTorch's private way round executorch#8468, ``torch.export._patches.register_lstm_while_loop_decomposition``,
    taken on to a .pte (in a fresh process, ``DYNAMIC_LOWERING``): for an LSTM the export with a dynamic length
    succeeds and ``to_edge`` takes it, but ``to_executorch()`` refuses it ("_ViewSpec is incompatible with its base on
    creation. It has shape_dynamism=0, but its base has shape_dynamism=1": executorch#20008); for a GRU or a vanilla
    RNN the export itself is refused (the patch decomposes the LSTM alone). So on ExecuTorch 1.5.1 no .pte takes a
    dynamic sequence length (``WHILE_LOOP_8468``). A release that lowers it turns this red."""
    kind = adapter.cell.rsplit(".", 1)[1]
    done = subprocess.run([sys.executable, "-c", DYNAMIC_LOWERING, kind, str(tmp_path / "dynamic.pte")],
                          capture_output=True, text=True, timeout=600)
    code, message = WHILE_LOOP_8468[adapter.family]
    assert done.returncode == code and message in done.stdout, (done.returncode, done.stdout, done.stderr[-2000:])
    assert not (tmp_path / "dynamic.pte").exists()


# What register_lstm_while_loop_decomposition gives on ExecuTorch 1.5.1 / torch 2.13.0, per family: (the child's exit
# code, 3 the export refused or 4 the lowering refused; what it prints).
WHILE_LOOP_8468 = {"lstm": (4, "_ViewSpec is incompatible with its base on creation"),
                   "gru": (3, "Constraints violated (steps)"), "rnn": (3, "Constraints violated (steps)")}


@pytest.mark.applies_to(lambda cls: cls.name == "executorch-gru")
def test_executorch_10104_a_gru_under_static_quantization_stays_float(adapter):
    """executorch#10104 ("GRU static quantization fails": ``prepare_pt2e`` with ``XNNPACKQuantizer`` and its symmetric
    static configuration, on the graph of ``nn.GRU(10, 20, batch_first=True)`` called on (1, 20, 10)), refuted as a
    failure on ExecuTorch 1.5.1 / torch 2.13.0, but silently: ``torch.export`` keeps the layer as one
    ``aten.gru.input`` node, which the quantizer does not annotate, so ``prepare_pt2e`` and ``convert_pt2e`` succeed
    and insert no quantize or dequantize node at all; the program lowered with ``XnnpackPartitioner`` runs, and it is
    the float GRU, within the float32 bound of the float64 reference (err/bound printed with ``-s``). A user asking
    for a quantized GRU gets a float one, without a word. A release that quantizes the GRU turns this red."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch = adapter.torch
    config = LayerConfig(1, False, initial_state=False, options=(("batch_first", True),))
    case = case_of(adapter, 10, 20, 1, 20, 10104, config)
    module, flat = adapter.flat_program(adapter.to_native(case.stack("float32"), config), case.inputs("float32"),
                                        None, config, case.activation)
    graph = torch.export.export(module, flat).module()
    assert "aten.gru.input" in {str(n.target) for n in graph.graph.nodes}
    prepared = prepare_pt2e(graph, XNNPACKQuantizer().set_global(get_symmetric_quantization_config()))
    prepared(*flat)  # calibration
    converted = convert_pt2e(prepared)
    quantizing = [str(n.target) for n in converted.graph.nodes if "quantize" in str(n.target)]
    assert quantizing == [], quantizing
    pte = adapter.lower(converted, flat, XnnpackPartitioner())
    actual = dict(zip(("output", "h_n"), adapter.run_program(pte, flat), strict=True))
    comparison = compare_outputs(actual, adapter.arrange(case.reference(), config),
                                 adapter.arrange(case.bound_vs_reference("float32"), config),
                                 f"{adapter.describe()}, pt2e static quantization, XNNPACK (executorch#10104)")
    print(f"executorch#10104: no quantize node; {comparison.message()}")
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.name == "executorch-lstm")
def test_executorch_refuses_a_packed_sequence(adapter):
    """A packed sequence (``pack_padded_sequence`` with the lengths as an input, as a user's model packs): refused
    loudly by ``torch.export``, never lowered wrongly; hence no padded configurations, and a padded batch is refused
    by name. A release that exports it turns this red."""
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
        adapter.lower(Packed().eval(), (torch.zeros(5, 2, 3), torch.tensor([5, 3])))
    from rnn_equivalence.reference.padding import Padding

    case = case_of(adapter, 3, 4, 2, 5, 54, adapter.configs[0])
    with pytest.raises(ValueError, match="padded batches are not supported"):
        adapter.run_native(adapter.to_native(case.stack("float32"), case.config), case.inputs("float32"), None,
                           case.config, case.activation, Padding((5, 3)))
