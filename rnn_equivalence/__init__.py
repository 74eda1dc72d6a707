"""rnn-equivalence: whether recurrent cells in different frameworks compute the same thing, settled
against a float64 reference with derived error bounds.

The one import name the distribution installs. Its parts:

- ``rnn_equivalence.reference``: the canonical parameters, the cell equations, the float64 reference,
  and the error model (``tolerance``, ``comparison``);
- ``rnn_equivalence.frameworks``: each system's mapping, runner and test plan; ``convert`` with NumPy alone;
- the library people call, here: ``verify``, ``diagnose``, ``compare``, ``converter_check`` and the
  ``rnn-equivalence`` command (``cli``);
- ``rnn_equivalence.harness``: the test suite's machinery (cases, depth, selection, records, summary,
  report, shards, known issues, the pytest plugin).

The documentation generators (``docgen/``) are not installed.

In a wheel, ``reference``, ``frameworks`` and ``harness`` are subpackages of this one (pyproject.toml's
``package-dir`` maps the repository's top-level folders into it). In a checkout they stay the top-level
folders the project was founded with, beside this one; ``__path__`` then names the checkout's root too,
so that ``rnn_equivalence.reference`` is ``reference/`` whether the checkout is installed (editable) or
not (pytest run from a clone with another checkout installed imports the clone's code, never the
other's). docs/LAYOUT.md says why.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
if not (_HERE / "reference").is_dir() and (_HERE.parent / "reference" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))  # a checkout: the subpackages are its top-level folders
