"""``rnn-equivalence``: the suite on a user's own files, from the command line.

    rnn-equivalence inspect FILE [--as SYSTEM] [--json]
    rnn-equivalence verify A B [--a-as SYSTEM] [--b-as SYSTEM] [--seed N] [--json]

``inspect`` lists every recurrent module of a weight file (``frameworks.files``: PyTorch state_dicts
as .safetensors, .pt/.pth/.bin or .npz): where it is, which system of the suite reads it, its
family, GRU variant, sizes, layers, directions, bias and projection, its weights in the
framework's names and its canonical parameters; the file's other weights are listed as skipped.
``--as SYSTEM`` reads a flat file (.npz, .safetensors) named as any system of the suite names its
weights (Keras's kernel/recurrent_kernel/bias, ONNX's W/R/B, ...) as one module of that system.

``verify`` matches the recurrent modules of two files in order and settles each pair
(``harness.verify``: structure, canonical parameters, runs against the derived bound); a pair that
differs is diagnosed (``harness.diagnose``: the porting mistakes that explain the difference).

Exit codes: 0 read (inspect) or equivalent (verify); 1 not equivalent; 2 bad input (a file that is not named weights, or recurrent weights that do not
read), with one line naming what was expected and what was received, never a traceback.
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
    modules = [module.summary() for module in inspection.modules]
    if as_json:
        click.echo(json.dumps({"file": str(file), "modules": modules, "skipped": inspection.skipped}, indent=2))
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
        for name, shape in m["weights"].items():
            click.echo(f"  {name:<28} {tuple(shape)}")
        click.echo(_wrapped("  canonical: ", ", ".join(f"{k} {tuple(v['shape'])}" for k, v in m["canonical"].items())))
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
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def verify(a, b, a_as, b_as, seed, run_frameworks, as_json):
    """Whether the recurrent modules of A and B compute the same function, pair by pair."""
    from harness.verify import verify_modules

    first, second = _inspection(a, a_as).modules, _inspection(b, b_as).modules
    if not first or not second or len(first) != len(second):
        _refuse(f"expected the same number of recurrent modules in both files (at least one), got "
                f"{len(first)} in {Path(a).name} and {len(second)} in {Path(b).name}")
    verdicts = [verify_modules(x, y, seed, run_frameworks=run_frameworks) for x, y in zip(first, second)]
    equivalent = all(v.equivalent for v in verdicts)
    if as_json:
        click.echo(json.dumps({"a": str(a), "b": str(b), "seed": seed, "equivalent": equivalent,
                               "pairs": [v.as_dict() for v in verdicts]}, indent=2))
    else:
        for v in verdicts:
            click.echo(_wrapped("", f"{'EQUIVALENT' if v.equivalent else 'NOT EQUIVALENT'}: {v.b} vs {v.a}: "
                                    f"{v.reason}"))
            for line in v.parameters:
                click.echo(_wrapped("  parameters: ", line))
            for side, found in v.frameworks.items():
                click.echo(_wrapped(f"  {side}'s framework: ", "; ".join(
                    f"{key}: {value}" if isinstance(value, str) else
                    f"{key} err/bound {value.ratio:.3g} ({'within' if value.equivalent else 'EXCEEDS'})"
                    for key, value in found.items())))
            for explanation in v.diagnosis:
                click.echo(_wrapped("  explained: ", explanation.sentence("A", "B")))
            if not v.equivalent and v.runs and not v.diagnosis:
                click.echo("  no single porting mistake of harness/diagnose.py explains the difference")
        click.echo(f"verdict: {'equivalent' if equivalent else 'not equivalent'} (seed {seed})")
    sys.exit(0 if equivalent else 1)


def _inspection(file, system=None):
    """The file's recurrent modules (``--as SYSTEM``: the file as one module of that system); bad input
    exits 2 with one line."""
    from frameworks.files import FileRefused, Inspection, find_recurrent, load_weights, read_as

    try:
        weights = load_weights(file)
        return Inspection([read_as(weights, system)]) if system else find_recurrent(weights)
    except FileRefused as error:
        _refuse(str(error))


def _wrapped(prefix: str, text: str) -> str:
    import textwrap

    return textwrap.fill(text, WIDTH, initial_indent=prefix, subsequent_indent="    ")


def _refuse(message: str):
    click.echo(f"rnn-equivalence: {message}", err=True)
    sys.exit(2)


if __name__ == "__main__":
    main()
