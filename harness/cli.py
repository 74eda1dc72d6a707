"""``rnn-equivalence``: the suite on a user's own files, from the command line.

    rnn-equivalence inspect FILE [--json]

``inspect`` lists every recurrent module of a weight file (``frameworks.files``: PyTorch state_dicts
as .safetensors, .pt/.pth/.bin or .npz): where it is, which system of the suite reads it, its
family, GRU variant, sizes, layers, directions, bias and projection, its weights in the
framework's names and its canonical parameters; the file's other weights are listed as skipped.

Exit codes: 0 read; 2 bad input (a file that is not named weights, or recurrent weights that do not
read), with one line naming what was expected and what was received, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

WIDTH = 100  # human output fits 100 columns


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": WIDTH})
def main():
    """Settle, with evidence, whether recurrent cells in different frameworks compute the same thing."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="one JSON document, for scripts")
def inspect(file, as_json):
    """Every recurrent module of FILE, read by the suite's mapping."""
    from frameworks.files import FileRefused, find_recurrent, load_weights

    try:
        inspection = find_recurrent(load_weights(file))
    except FileRefused as error:
        _refuse(str(error))
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


def _wrapped(prefix: str, text: str) -> str:
    import textwrap

    return textwrap.fill(text, WIDTH, initial_indent=prefix, subsequent_indent="    ")


def _refuse(message: str):
    click.echo(f"rnn-equivalence: {message}", err=True)
    sys.exit(2)


if __name__ == "__main__":
    main()
