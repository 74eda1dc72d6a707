"""The GitHub workflows pass two linters, so that a workflow never run on GitHub is at least valid and safe.

actionlint checks each workflow's syntax, expressions, action inputs and, through ShellCheck, its ``run:``
scripts; zizmor, offline, checks its security (template injection, unpinned actions, credentials left in
.git/config, excessive permissions). Under CI=true a missing linter is an error; elsewhere, a skip.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnn_equivalence.harness.selection import is_ci

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
assert WORKFLOWS, "no .github/workflows/*.yml: the linters would have nothing to check"
IDS = [w.name for w in WORKFLOWS]


def _executable(name: str) -> str:
    """``name`` beside this Python (the venv's bin) or on PATH; if missing, an error under CI, else a skip."""
    found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if found is None:
        message = f"{name} is not installed (pip install -e '.[test]')"
        if is_ci(os.environ):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _lint(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, (f"{' '.join(command)} exited with {result.returncode}:\n"
                                    f"{result.stdout}{result.stderr}")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=IDS)
def test_workflow_passes_actionlint(workflow):
    # ShellCheck named outright: actionlint skips the run: scripts silently when it cannot find it.
    _lint([_executable("actionlint"), "-no-color", "-shellcheck", _executable("shellcheck"), str(workflow)])


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=IDS)
def test_workflow_passes_zizmor(workflow):
    _lint([_executable("zizmor"), "--offline", "--no-progress", "--color", "never", str(workflow)])
