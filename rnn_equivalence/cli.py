"""``rnn-equivalence``: the suite on a user's own files, from the command line.

    rnn-equivalence inspect FILE [--as SYSTEM] [--json]
    rnn-equivalence verify A B [--a-as SYSTEM] [--b-as SYSTEM] [--seed N]
                               [--inputs X.npy [--lengths N,N,... | --mask M.npy]]
                               [--run/--no-run] [--json]
    rnn-equivalence convert FILE --to SYSTEM -o OUT [--module NAME] [--as SYSTEM] [--seed N] [--run/--no-run]
                            [--json]
    rnn-equivalence compare SYSTEM_A SYSTEM_B [--depth quick|default|full] [--seed N] [--json]

``inspect`` lists every recurrent module of a weight file (``rnn_equivalence.frameworks.files``: PyTorch .pt/.pth/.bin,
TorchScript archives, .safetensors, .npz; Keras .weights.h5, .keras, Keras 2 .h5; ONNX; Flax .msgpack; TF1
checkpoints; PaddlePaddle .pdparams, each layer's cell copies listed as copies; MLX's ``save_weights``, .safetensors
or .npz): where
it is, which system of the suite reads it, its family, GRU variant, sizes, layers, directions, bias
and projection, its weights in the framework's names and its canonical parameters; the file's other
weights are listed as skipped. ``--as SYSTEM`` reads a flat file (.npz, .safetensors) named as any
system names its weights (Keras's kernel/recurrent_kernel/bias, ONNX's W/R/B, ...).

``verify`` matches the recurrent modules of two files in order and settles each pair
(``rnn_equivalence.verify``: structure, canonical parameters, the reference's runs against the derived bound,
and each side's framework run on its own weights), on seeded inputs or the user's (``--inputs``), padded
(``--lengths``) or masked (``--mask``: any (T, batch) 0/1 mask, holes included, as Keras's masks); a pair
that differs is diagnosed (``rnn_equivalence.diagnose``: the porting mistakes that explain the difference). A file
stored in float16 or bfloat16 against its float32 (or float64) original is judged as that original's half model
(``rnn_equivalence.verify.half_verdict``: its tensors the original's rounded to nearest, its runs within the bound
of that rounding): "EQUIVALENT IN FLOAT16". An int8 model (ONNX Runtime's ``DynamicQuantizeLSTM``, from
``quantize_dynamic``) against its float original computes another function, so there is no equivalence claim: it is
judged within or beyond the bound its quantization grid implies (``rnn_equivalence.verify.quantized_verdict``: its
weights within half a grid step, the reference on them and, with ``--run``, the node itself within the derived bound):
"WITHIN ITS INT8 BOUND", exit 0, or "BEYOND ITS INT8 BOUND", exit 1.

``convert`` writes the file's recurrent module as another system's weights (``rnn_equivalence.frameworks.convert``),
in the format OUT's suffix names (``rnn_equivalence.frameworks.files.write_weights``), reads OUT back and verifies it
against FILE: the verdict with the derived bound. A target that cannot hold the same function
refuses, saying why, and writes nothing. A file of several modules (an encoder and a decoder): ``--module
NAME`` converts the one at that location, as ``inspect`` prints it (``rnn_equivalence.frameworks.files.select``).

``compare`` answers "are these two systems the same function?" on the versions installed here: it runs
the two systems' forward cases now, each against the float64 reference within the derived bound
(``rnn_equivalence.compare``, ``rnn_equivalence.engine``: no pytest, no tests/ needed), and prints Yes, No or
Only if, the mapping between them, and the evidence (cases, worst err/bound per dtype, versions, known issues).

Exit codes: 0 read (inspect: at least one recurrent module), equivalent (verify), or converted and
equivalent (convert), Yes (compare); 1 not equivalent, or refused, No or Only if (compare); 2 bad
input (a file that is not named weights, recurrent weights that do not read, inputs that do not fit;
compare: names that make no question, a framework not installed), with one line naming what was
expected and what was received, never a traceback. Human output fits 100 columns.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

WIDTH = 100  # human output fits 100 columns
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notices, where verify runs it


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": WIDTH})
def main():
    """Settle, with evidence, whether recurrent cells in different frameworks compute the same thing."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--as", "system", metavar="SYSTEM", help="read FILE as one module of SYSTEM (its weights' names)")
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def inspect(file, system, as_json):
    """Every recurrent module of FILE, read by the suite's mapping."""
    inspection = _inspection(file, system)
    if not inspection.modules:
        names = ", ".join(inspection.skipped[:5]) + (", ..." if len(inspection.skipped) > 5 else "")
        _refuse(f"{file}: no recurrent module found: expected PyTorch, Keras, ONNX, Flax, TF1, Paddle or MLX "
                f"recurrent weights (README: Check your own model), got {len(inspection.skipped)} other "
                f"weight(s): {names}")
    modules = [module.summary() for module in inspection.modules]
    if as_json:
        click.echo(json.dumps({"file": str(file), "modules": modules, "skipped": inspection.skipped,
                               "copies": inspection.copies}, indent=2))
        return
    # The file's name, not its path (which may be any length): the human output fits WIDTH columns.
    click.echo(f"{Path(file).name}: {len(modules)} recurrent module(s), {len(inspection.skipped)} other weight(s) "
               f"skipped")
    for m in modules:
        structure = (f"{m['num_layers']} layer(s), {'bidirectional' if m['bidirectional'] else 'unidirectional'}, "
                     f"{'with' if m['bias'] else 'no'} bias")
        variant = f", GRU {m['gru_variant']}" if m["gru_variant"] else ""
        projection = f", projection to {m['projection_size']}" if m["projection_size"] else ""
        click.echo(f"\n{m['location']}: {m['system']} ({m['family']}{variant})")
        click.echo(f"  input_size {m['input_size']}, hidden_size {m['hidden_size']}, {structure}{projection}")
        if "quantized" in m:
            q = m["quantized"]
            click.echo(f"  quantized: {q['op']}, {q['weights']} weights (largest level {q['largest_level']}), a scale "
                       f"{q['scales']}, biases float; canonical below: the dequantized weights it computes with")
        for name, shape in m["weights"].items():
            click.echo(f"  {name:<28} {tuple(shape)}")
        click.echo(_wrapped("  canonical: ", ", ".join(f"{k} {tuple(v['shape'])}" for k, v in m["canonical"].items())))
    if inspection.copies:  # Paddle's per-layer cells: the layers' own weights again, checked equal
        click.echo(_wrapped("\ncopies (equal to the layer's weights, read once): ",
                            ", ".join(_copy_groups(inspection.copies))))
    if inspection.skipped:
        click.echo(_wrapped("\nskipped (not recurrent): ", ", ".join(inspection.skipped)))


@main.command()
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--a-as", metavar="SYSTEM", help="read A as one module of SYSTEM")
@click.option("--b-as", metavar="SYSTEM", help="read B as one module of SYSTEM")
@click.option("--seed", default=0, show_default=True, help="seed of the inputs and initial state both run on")
@click.option("--run/--no-run", "run_frameworks", default=True, show_default=True,
              help="also run each file's framework on its own weights (imports it)")
@click.option("--inputs", "inputs_file", type=click.Path(dir_okay=False),
              help="a .npy of inputs (T, batch, input_size) to run on instead of seeded ones")
@click.option("--lengths", help="with --inputs: each element's real steps, comma-separated (post-padded)")
@click.option("--mask", "mask_file", type=click.Path(dir_okay=False),
              help="with --inputs: a .npy (or .npz) of (T, batch) booleans or 0/1, 1 on a real step; "
                   "masked steps anywhere (holes too) leave the state as it was")
@click.option("--layer", "layers", multiple=True, metavar="A_LOCATION=B_LOCATION",
              help="pair these modules (their locations, as inspect prints them) instead of pairing in order")
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def verify(a, b, a_as, b_as, seed, run_frameworks, inputs_file, lengths, mask_file, layers, as_json):
    """Whether the recurrent modules of A and B compute the same function, pair by pair."""
    from rnn_equivalence.frameworks.files import FileRefused
    from rnn_equivalence.verify import verify_modules

    first, second = _paired(_inspection(a, a_as).modules, _inspection(b, b_as).modules)
    if layers:
        first, second = _by_location(first, second, layers)
    if not first or not second or len(first) != len(second):
        _refuse(f"expected the same number of recurrent modules in both files (at least one), got "
                f"{len(first)} in {Path(a).name} and {len(second)} in {Path(b).name}")
    inputs, steps, mask = _user_inputs(inputs_file, lengths, mask_file)
    try:
        verdicts = [verify_modules(x, y, seed, run_frameworks=run_frameworks, inputs=inputs, lengths=steps, mask=mask)
                    for x, y in zip(first, second)]
    except FileRefused as error:
        _refuse(str(error))
    passed = all(v.equivalent for v in verdicts)  # an int8 pair's: within its bound (no equivalence claim)
    quantized = [v for v in verdicts if v.quantized]
    if as_json:
        click.echo(json.dumps({"a": str(a), "b": str(b), "seed": seed, "passed": passed,
                               "equivalent": None if quantized else passed,
                               "pairs": [v.as_dict() for v in verdicts]}, indent=2))
    else:
        for v in verdicts:
            click.echo(_wrapped("", f"{v.headline}: {v.b} vs {v.a}: {v.reason}"))
            for line in v.parameters:
                click.echo(_wrapped("  parameters: ", line))
            for side, found in v.frameworks.items():
                click.echo(_wrapped(f"  {side}'s framework: ", "; ".join(
                    f"{key}: {value}" if isinstance(value, str) else
                    f"{key} err/bound {value.ratio:.3g} ({'within' if value.equivalent else 'EXCEEDS'})"
                    for key, value in found.items())))
            for sentence in v.explanations():
                click.echo(_wrapped("  explained: ", sentence))
            if not v.equivalent and v.runs and not v.diagnosis and not v.quantized:
                click.echo("  no single porting mistake of rnn_equivalence/diagnose.py explains the difference")
        if quantized:
            word = "within" if passed else "beyond"
            click.echo(f"verdict: {word} the int8 bound{'s' if len(verdicts) > 1 else ''} (seed {seed}; "
                       f"no equivalence claim for a quantized model)")
        else:
            click.echo(f"verdict: {'equivalent' if passed else 'not equivalent'} (seed {seed})")
    sys.exit(0 if passed else 1)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--to", "target", required=True, metavar="SYSTEM", help="the system to write the weights for")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="OUT: .npz, .safetensors (any system), .pt (PyTorch), .weights.h5 or .keras (Keras), "
                   ".onnx (ONNX), .msgpack (Flax), .ckpt (TF1)")
@click.option("--module", "location", metavar="NAME",
              help="convert the module at NAME (its location, as inspect prints it) of a file of several")
@click.option("--as", "system", metavar="SYSTEM", help="read FILE as one module of SYSTEM")
@click.option("--seed", default=0, show_default=True, help="seed of the inputs the check runs on")
@click.option("--run/--no-run", "run_frameworks", default=True, show_default=True,
              help="also run both systems' frameworks in the check (imports them)")
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def convert(file, target, output, location, system, seed, run_frameworks, as_json):
    """FILE's recurrent module written as SYSTEM's weights to OUT, then checked against FILE."""
    from rnn_equivalence.frameworks.convert import ConversionRefused, mapping
    from rnn_equivalence.frameworks.convert import convert as convert_weights
    from rnn_equivalence.frameworks.files import FileRefused, load_weights, location_of, read_as, select, write_weights
    from rnn_equivalence.verify import verify_modules

    modules = _inspection(file, system).modules
    if location is not None:  # the one the user names
        try:
            modules = [select(modules, location, Path(file).name)]
        except FileRefused as error:
            _refuse(f"--module: {error}")
    elif len(modules) > 1:  # a Keras model's stacked layers: one stack, where they stack
        from rnn_equivalence.frameworks.files import stacked

        try:
            modules = [stacked(modules)]
        except FileRefused:
            pass
    if len(modules) != 1:
        _refuse(f"{Path(file).name}: expected one recurrent module to convert, got {len(modules)} "
                f"({', '.join(map(location_of, modules))})" + ("; choose one with --module NAME" if modules else ""))
    (source,) = modules
    try:
        native = convert_weights(source.weights, source.system, target, config=source.config)
    except ConversionRefused as error:
        click.echo(f"rnn-equivalence: refused: {error}", err=True)
        sys.exit(1)
    except ValueError as error:  # an unknown target system
        _refuse(str(error))
    try:
        written = write_weights(native, target, source.config, output)
        back = [read_as(load_weights(written), target)] if Path(output).suffix.lower() in (".npz", ".safetensors") \
            else _inspection(written).modules
        (back,) = _paired([source], back)[1]
    except FileRefused as error:
        _refuse(str(error))
    verdict = verify_modules(source, back, seed, run_frameworks=run_frameworks)
    if as_json:
        click.echo(json.dumps({"file": str(file), "output": str(output), "target": target,
                               "check": verdict.as_dict()}, indent=2))
    else:
        click.echo(f"wrote {Path(output).name}: {back.system}, {len(native)} weight(s)")
        for system, verb in ((source.system, "read from"), (target, "written for")):
            forget_bias = getattr(mapping(system), "forget_bias", 0.0)
            if forget_bias:
                click.echo(_wrapped("  ", f"{system} adds forget_bias={forget_bias} to the f gate: the weights "
                                          f"{verb} it hold the f bias without it (folded), so the function "
                                          f"is the same"))
        click.echo(_wrapped("", f"{verdict.headline}: {verdict.reason}"))
    sys.exit(0 if verdict.equivalent else 1)


@main.command()
@click.argument("system_a")
@click.argument("system_b")
@click.option("--depth", type=click.Choice(["quick", "default", "full"]), default="quick", show_default=True,
              help="how deep the run goes (harness/depth.py)")
@click.option("--seed", default=0, show_default=True, help="seed of the weights and data of the design's cases")
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def compare(system_a, system_b, depth, seed, as_json):
    """Are SYSTEM_A and SYSTEM_B the same function? Both systems' forward cases, run now."""
    from rnn_equivalence.compare import CompareRefused, answer, text

    try:
        result = answer(system_a, system_b, depth, seed)
    except CompareRefused as error:
        _refuse(str(error))
    lead = _page_lead(system_a, system_b)
    if as_json:
        click.echo(json.dumps({**result.as_dict(), "page_lead": dict(zip(("anchor", "lead"), lead)) if lead else None},
                              indent=2))
    else:
        click.echo("\n".join(text(result, WIDTH, lead)))
    sys.exit(0 if result.equivalent else 1)


def _page_lead(system_a: str, system_b: str) -> tuple[str, str] | None:
    """docs/ANSWERS.md's lead (its anchor and text) where a question is about this pair, from the committed
    report. In a checkout only: an installed package has neither the page's generator (docgen/) nor the report."""
    try:
        from docgen.answers import lead_for, plain
    except ImportError:
        return None
    page = lead_for(system_a, system_b)
    return (page[0].anchor, plain(page[1])) if page else None


def _by_location(first: list, second: list, layers) -> tuple[list, list]:
    """The pairs ``--layer A=B`` names, each location as ``inspect`` prints it ("(top level)" for none)."""
    from rnn_equivalence.frameworks.files import FileRefused, select

    def where(modules, location, side):
        try:
            return select(modules, location, side)
        except FileRefused as error:
            _refuse(f"--layer: {error}")

    pairs = []
    for layer in layers:
        if layer.count("=") != 1:
            _refuse(f"--layer: expected A_LOCATION=B_LOCATION, got {layer!r}")
        a, b = layer.split("=")
        pairs.append((where(first, a, "A"), where(second, b, "B")))
    return [a for a, _ in pairs], [b for _, b in pairs]


def _user_inputs(inputs_file, lengths, mask_file=None):
    """--inputs (a .npy, read without pickle), --lengths (integers) and --mask (an array, read without pickle:
    ``rnn_equivalence.verify.load_mask``), or None each; bad ones exit 2."""
    import numpy as np

    from rnn_equivalence.frameworks.files import FileRefused
    from rnn_equivalence.verify import load_mask

    if lengths is not None and inputs_file is None:
        _refuse("--lengths: needs --inputs (the padded batch they describe)")
    if mask_file is not None and inputs_file is None:
        _refuse("--mask: needs --inputs (the batch it masks)")
    if lengths is not None and mask_file is not None:
        _refuse("--lengths and --mask: expected one of them (both say which steps are real), got both")
    if inputs_file is None:
        return None, None, None
    try:
        inputs = np.load(inputs_file, allow_pickle=False)
    except (OSError, ValueError) as error:
        _refuse(f"--inputs {inputs_file}: expected a .npy array of floats (T, batch, input_size) ({error})")
    try:
        steps = None if lengths is None else [int(n) for n in lengths.split(",")]
    except ValueError:
        _refuse(f"--lengths: expected comma-separated integers, got {lengths!r}")
    try:
        mask = None if mask_file is None else load_mask(mask_file)
    except FileRefused as error:
        _refuse(str(error))
    return inputs, steps, mask


def _paired(first: list, second: list) -> tuple[list, list]:
    """The two files' modules, a stack on one side matched with the same number of stacked one-layer modules
    on the other (a PyTorch ``num_layers=2`` module and a Keras model's two layers) by stacking those."""
    from rnn_equivalence.frameworks.files import FileRefused, stacked

    try:
        if len(first) == 1 and len(second) == first[0].config.num_layers > 1:
            return first, [stacked(second)]
        if len(second) == 1 and len(first) == second[0].config.num_layers > 1:
            return [stacked(first)], second
    except FileRefused as error:
        _refuse(str(error))
    return first, second


def _inspection(file, system=None):
    """The file's recurrent modules (``--as SYSTEM``: the file as one module of that system); bad input
    exits 2 with one line."""
    from rnn_equivalence.frameworks.files import FileRefused, Inspection, find_recurrent, load_weights, read_as

    try:
        weights = load_weights(file)
        return Inspection([read_as(weights, system)]) if system else find_recurrent(weights)
    except FileRefused as error:
        _refuse(str(error))


def _copy_groups(copies: dict[str, str]) -> list[str]:
    """Paddle's cell copies, one entry a cell: "0.cell_bw.* = *_l0_reverse" where each of the cell's weights is
    the layer's of the same name (``weight_ih`` = ``weight_ih_l0_reverse``), else "copy = own" one by one."""
    groups: dict[str, set[str]] = {}
    for copy, own in copies.items():
        cell, name = copy.rsplit(".", 1)
        head, _, last = own.rpartition(".")
        groups.setdefault(cell, set()).add(f"{head + '.' if head else ''}*{last[len(name):]}"
                                           if last.startswith(name) else f"{own} ({name})")
    if all(len(patterns) == 1 for patterns in groups.values()):
        return [f"{cell}.* = {patterns.pop()}" for cell, patterns in groups.items()]
    return [f"{copy} = {own}" for copy, own in copies.items()]


def _wrapped(prefix: str, text: str) -> str:
    import textwrap

    return textwrap.fill(text, WIDTH, initial_indent=prefix, subsequent_indent="    ")


def _refuse(message: str):
    click.echo(f"rnn-equivalence: {message}", err=True)
    sys.exit(2)


if __name__ == "__main__":
    main()
