"""The layering is a contract the tests hold: import-linter (pyproject.toml's ``[tool.importlinter]``) on the
package as it is installed. The reference below the frameworks, the frameworks below the suite's machinery
and the library, the command line over the library, the documentation generators on top; no import loop
inside any package.

import-linter reads a package's folder; in a checkout ``rnn_equivalence``'s subpackages are the repository's
top-level folders (docs/LAYOUT.md), so the test lays them out as a wheel does, by copying the sources into
a temporary tree (the files themselves: what is checked is the code as it stands)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnn_equivalence.harness.selection import is_ci

ROOT = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("reference", "frameworks", "harness")


def installed_layout(tree: Path) -> Path:
    """``tree``/rnn_equivalence holding the library's modules and the subpackages, and ``tree``/docgen."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "rnn_equivalence", tree / "rnn_equivalence", ignore=ignore)
    for name in SUBPACKAGES:
        shutil.copytree(ROOT / name, tree / "rnn_equivalence" / name, ignore=ignore)
    shutil.copytree(ROOT / "docgen", tree / "docgen", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    executable = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if executable is None:
        message = "import-linter is not installed (the test extra: pip install -e '.[test]')"
        if is_ci(os.environ):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run([executable, "--no-cache"], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, timeout=120)


def test_the_layers_and_no_loops_hold(tmp_path):
    result = lint_imports(installed_layout(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout, result.stdout


def test_a_loop_breaks_the_contract(tmp_path):
    """The contract can fail: the summary importing the records plugin (the loop this layout broke) does."""
    tree = installed_layout(tmp_path)
    summary = tree / "rnn_equivalence" / "harness" / "summary.py"
    summary.write_text(summary.read_text()
                       + "\n\ndef _loop():\n    from rnn_equivalence.harness.records import write\n")
    result = lint_imports(tree)
    assert result.returncode != 0 and "No cycles are allowed in rnn_equivalence.harness" in result.stdout, result.stdout


def test_a_reference_importing_a_framework_breaks_the_layers(tmp_path):
    tree = installed_layout(tmp_path)
    params = tree / "rnn_equivalence" / "reference" / "params.py"
    params.write_text(params.read_text() + "\n\ndef _up():\n    from rnn_equivalence.frameworks import ADAPTERS\n")
    result = lint_imports(tree)
    assert (result.returncode != 0
            and "rnn_equivalence.reference.params -> rnn_equivalence.frameworks" in result.stdout), result.stdout
