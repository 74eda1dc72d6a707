"""What TorchScript and torch.export make of PyTorch's layers, beyond the numbers (which the reference, pair,
padded, chunked, gradient and optimizer tests compare on every design case, through the saved and loaded
program): the kernels the programs hold, and what each tool refuses or gets wrong, each against the public
thread that reported it (reproduced, or refuted on the installed version).

- pytorch/pytorch#17656, "a traced LSTM gives wrong values after save and load": every torchscript-trace case
  runs the loaded trace, made from an example of zeros, on the case's inputs; here also on another length and
  batch than its example's, from no initial state (the zeros a trace could freeze).
- pytorch/pytorch#151200, "an exported LSTM's h_n and c_n get an extra dimension" (in the program's recorded
  shapes): the recorded shapes against the run's.
- pytorch/executorch#8468, "a dynamic sequence length blocks the export" (and pytorch#115092, executorch#5176).
- pytorch/pytorch#74534, "half precision differs between the first and later runs" of a TorchScript program (its
  profiling executor optimises the graph after the first runs): one loaded program run five times in float16 and
  bfloat16.
"""

from __future__ import annotations

import numpy as np
import pytest

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.frameworks.pytorch import as_array, as_tensor
from rnn_equivalence.harness.cases import LENGTHS, case_of, cases_for, padding_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.formats import HALF_FORMATS
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound

PROGRAMS = "rnn_equivalence.frameworks.torch_programs"


def is_program(cls, tool: str = "") -> bool:
    return cls.__module__ == PROGRAMS and cls.converter.endswith(tool)


@pytest.mark.applies_to(lambda cls: is_program(cls))
def test_the_program_holds_the_layers_fused_kernel(adapter, depth, design_seed):
    """Each activation on the first configuration, then every configuration and padded configuration: the
    loaded program holds one recurrent kernel, PyTorch's fused one (aten::lstm, aten::gru, aten::rnn_tanh or
    aten::rnn_relu), never an unrolled loop. A release that unrolls turns this red."""
    designed = {(c.config, c.activation): c for c in cases_for(adapter, depth, design_seed)}
    runs = [(g, adapter.configs[0]) for g in adapter.activations]
    runs += [(adapter.activations[0], config) for config in (*adapter.configs[1:], *adapter.padded_configs)]
    assert len(runs) >= 2
    for k, (g, config) in enumerate(runs):
        padding = {}
        if config in adapter.padded_configs:  # a batch of mixed lengths, sorted where the configuration asks
            lengths = tuple(sorted(LENGTHS, reverse=True)) if config.option("enforce_sorted") else LENGTHS
            case = case_of(adapter, 3, 4, len(LENGTHS), 9, 980 + k, config, activation=g,
                           padding=padding_of(lengths, "post"))
            padding = {"padding": case.padding}
        else:
            case = designed.get((config, g)) or case_of(adapter, 3, 4, 2, 5, 990 + k, config, activation=g)
        adapter.run(case.stack("float32"), case.inputs("float32"), case.state("float32"), case.config, **padding)
        assert adapter.recurrent_operators() == {adapter.expected_operator(config, g)}, (
            g, config, adapter.recurrent_operators())


@pytest.mark.applies_to(lambda cls: is_program(cls, "trace"))
def test_a_loaded_trace_runs_other_lengths_and_batches_than_its_example(adapter):
    """pytorch#17656 (refuted here): the trace made from zeros of 6 steps and batch 2, saved and loaded, run on
    9 steps and batch 3 from no initial state, is within the bound of the float64 reference."""
    torch = adapter.torch
    config = LayerConfig(2, True, initial_state=False, options=(("batch_first", False),))
    case = case_of(adapter, 3, 4, 3, 9, 17656, config)
    native = adapter.to_native(case.stack("float32"), config)
    layer, _, _ = adapter.build(native, np.zeros((6, 2, 3), np.float32), None, config, case.activation)
    program = adapter.programs[(False, False, adapter.family == "lstm")](layer, False, False, 6)
    loaded = adapter.make(program, (torch.zeros(6, 2, 3),))
    with torch.no_grad():
        output, final = loaded(torch.from_numpy(case.inputs("float32")))
    actual = {"output": output.numpy(), "h_n": (final[0] if adapter.family == "lstm" else final).numpy()}
    expected = adapter.arrange(case.reference(), config)
    bounds = adapter.arrange(case.bound_vs_reference("float32"), config)
    assert_within_bound(compare_outputs(actual, {k: expected[k] for k in actual}, {k: bounds[k] for k in actual},
                                        f"{adapter.name}: a trace of 6 x 2 run on 9 x 3"))


@pytest.mark.applies_to(lambda cls: is_program(cls, "script"))
def test_scripting_a_bare_layer_gives_a_module_without_forward(adapter):
    """``torch.jit.script(nn.LSTM(...))`` compiles, and the module it returns has no ``forward``: the layer's
    forward is overloaded (packed or padded input), which only a calling module resolves. Hence the systems
    script the calling module. A release that scripts the bare layer whole turns this red."""
    torch = adapter.torch
    layer = adapter._module_class()(3, 4)
    scripted = torch.jit.script(layer)
    with pytest.raises(AttributeError, match="forward"):
        scripted(torch.zeros(5, 2, 3))


@pytest.mark.applies_to(lambda cls: is_program(cls, "export"))
def test_export_refuses_a_packed_batch(adapter):
    """The program a user writes for a padded batch (``pack_padded_sequence`` on the lengths, the layer,
    ``pad_packed_sequence``) is refused by ``torch.export``, loudly: the packed layer needs the data-dependent
    ``batch_sizes``, as in the dynamo ONNX exporter (test_padded_onnx.py). Hence no padded configurations."""
    torch = adapter.torch
    layer = adapter._module_class()(3, 4)
    program = adapter.programs[(True, False, adapter.family == "lstm")](layer, False, False, 6)
    with pytest.raises(Exception, match="size|data-dependent|guard"):
        adapter.make(program, (torch.zeros(6, 2, 3), torch.tensor([6, 6])))


@pytest.mark.applies_to(lambda cls: is_program(cls, "export") and cls.family == "lstm")
def test_exported_lstm_records_the_shapes_it_returns(adapter):
    """pytorch#151200 (refuted on the installed torch; fixed by pytorch#185716): the shapes the exported
    program records for output, h_n and c_n are the shapes its run returns, (L*D, batch, H) for the states,
    with no extra dimension."""
    case = case_of(adapter, 3, 4, 2, 6, 151200, LayerConfig(2, True, initial_state=False,
                                                            options=(("batch_first", True),)))
    actual = adapter.run(case.stack("float32"), case.inputs("float32"), None, case.config)
    output = next(node for node in adapter.last_exported.graph.nodes if node.op == "output")
    recorded = [tuple(value.meta["val"].shape) for value in output.args[0]]
    assert recorded == [actual[key].shape for key in ("output", "h_n", "c_n")]


@pytest.mark.applies_to(lambda cls: is_program(cls, "export"))
def test_a_dynamic_sequence_length_is_refused_by_the_export(adapter):
    """executorch#8468 (reproduced): exporting the layer with the sequence length declared dynamic
    (``torch.export.Dim``) is refused: the export specialises the length (the decomposition it infers the
    shapes with steps through the sequence), and says so. Each program is therefore made for one length. A
    release that exports a dynamic length turns this red; its runs would then join the reference tests."""
    torch = adapter.torch
    layer = adapter._module_class()(3, 4)
    program = adapter.programs[(False, False, adapter.family == "lstm")](layer, False, False, 6)
    steps = torch.export.Dim("steps", min=2, max=64)
    with pytest.raises(Exception, match="steps"):
        torch.export.export(program, (torch.zeros(6, 2, 3),), dynamic_shapes=({0: steps},))


# Made in a child process: in a process that has exported an LSTM already (the other tests here), the patch
# no longer takes effect and the dynamic length is refused again (measured; a cached decomposition).
DYNAMIC_EXPORT = """
import sys, warnings
import numpy as np, torch
from torch.export._patches import register_lstm_while_loop_decomposition
warnings.simplefilter("ignore")
kind, weights, out = sys.argv[1], np.load(sys.argv[2]), sys.argv[3]
layer = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True)
layer.load_state_dict({k: torch.from_numpy(weights[k]) for k in weights.files})

class Program(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)

steps = torch.export.Dim("steps", min=2, max=64)
try:
    with register_lstm_while_loop_decomposition():
        program = torch.export.export(Program(), (torch.zeros(6, 2, 3),), dynamic_shapes=({0: steps},))
except Exception as error:
    print(type(error).__name__, str(error).splitlines()[0])
    sys.exit(3)
torch.export.save(program, out)
"""


@pytest.mark.applies_to(lambda cls: is_program(cls, "export"))
def test_the_while_loop_decomposition_exports_a_dynamic_lstm_only(adapter, tmp_path):
    """The way round executorch#8468 that PyTorch offers, privately: inside
    ``torch.export._patches.register_lstm_while_loop_decomposition()`` an LSTM exports with a dynamic sequence
    length, and the saved program, loaded and run on 2, 9 and 50 steps, is within the bound of the float64
    reference; a GRU or a vanilla RNN is still refused (the patch decomposes the LSTM alone). Only in a process
    that has not exported an LSTM before (``DYNAMIC_EXPORT``). A release that changes either turns this red."""
    import subprocess
    import sys

    torch = adapter.torch
    config = LayerConfig(2, True, initial_state=False, options=(("batch_first", False),))
    g = adapter.activations[0]
    case = case_of(adapter, 3, 4, 2, 6, 8468, config, activation=g)
    native = adapter.to_native(case.stack("float32"), config)
    np.savez(tmp_path / "weights.npz", **native)
    kind = adapter.cell.rsplit(".", 1)[1]
    done = subprocess.run([sys.executable, "-c", DYNAMIC_EXPORT, kind, str(tmp_path / "weights.npz"),
                           str(tmp_path / "program.pt2")], capture_output=True, text=True, timeout=300)
    if adapter.family != "lstm":
        assert done.returncode == 3 and "steps" in done.stdout, (done.returncode, done.stdout, done.stderr[-2000:])
        return
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    program = torch.export.load(str(tmp_path / "program.pt2")).module()
    for T in (2, 9, 50):  # one seed: the same weights (a case's weights depend on its seed and sizes), T inputs
        other = case_of(adapter, 3, 4, 2, T, 8468, config, activation=g)
        assert all(np.array_equal(value, native[key]) for key, value in
                   adapter.to_native(other.stack("float32"), config).items())
        with torch.no_grad():
            output, final = program(torch.from_numpy(other.inputs("float32")))
        actual = {"output": output.numpy(), "h_n": final[0].numpy(), "c_n": final[1].numpy()}
        bounds = adapter.arrange(other.bound_vs_reference("float32"), config)
        assert_within_bound(compare_outputs(actual, adapter.arrange(other.reference(), config), bounds,
                                            f"{adapter.name}: one export with a dynamic length, run on {T} steps"))


@pytest.mark.applies_to(lambda cls: is_program(cls, "trace") or is_program(cls, "script"))
@pytest.mark.parametrize("half", HALF_FORMATS)
def test_a_loaded_program_in_half_computes_the_same_on_every_run(adapter, half):
    """pytorch#74534 (refuted on the CPU, the installed torch): TorchScript's profiling executor runs a loaded
    program's first calls as recorded and optimises its graph after them, which was reported to change half
    precision results between the first and later runs (on CUDA, where the fuser is on). One program, made,
    saved and loaded in ``half``, called five times on one input: every call's outputs are bitwise the first's,
    and the first is within the bound of the arithmetic PyTorch runs in ``half`` (float32 within each operation)
    of the float64 reference of the same data. A release whose optimised graph computes otherwise turns this
    red, by the bitwise comparison, whatever the size of the change."""
    torch = adapter.torch
    config = LayerConfig(2, True, initial_state=False, options=(("batch_first", False),))
    case = case_of(adapter, 3, 4, 3, 9, 74534, config)
    adapter.run(case.stack(half), case.inputs(half), None, config)  # makes, saves and loads the program
    program, x = adapter.last_program, as_tensor(torch, case.inputs(half))
    keys = ("output", "h_n", "c_n") if adapter.family == "lstm" else ("output", "h_n")
    runs = []
    with torch.no_grad():
        for _ in range(5):
            output, final = program(x)
            finals = final if adapter.family == "lstm" else (final,)
            runs.append(dict(zip(keys, (as_array(t) for t in (output, *finals)))))
    assert len(runs) == 5 and all(np.dtype(a.dtype).name == half for a in runs[0].values())
    for k, later in enumerate(runs[1:], 2):
        for key in keys:
            np.testing.assert_array_equal(later[key].view(np.uint16), runs[0][key].view(np.uint16),
                                          err_msg=f"{adapter.name} in {half}: call {k}'s {key} is not the first's")
    stack, xs, _ = case.exact_data(half)
    exact, bound = reference_and_bound(stack, xs, None, arithmetic_of(adapter, half))
    bound = pair_bound(bound, reference_and_bound(stack, xs, None, "float64")[1])
    actual = {key: runs[0][key].astype(np.float64) for key in keys}
    expected, bounds = adapter.arrange(exact, config), adapter.arrange(bound, config)
    assert_within_bound(compare_outputs(actual, {k: expected[k] for k in keys}, {k: bounds[k] for k in keys},
                                        f"{adapter.name}: a loaded program's first call in {half}"))
