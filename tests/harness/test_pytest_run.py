"""The suite's behaviour as users see it: whole pytest runs in a child process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]


def run_pytest(*args, env=None, blocked=None, tmp_path=None):
    environ = {k: v for k, v in os.environ.items()
               if k not in ("CI", "RNN_EQ_FRAMEWORKS", "RNN_EQ_SYSTEMS", "RNN_EQ_BREAK", "RNN_EQ_DEPTH", "RNN_EQ_SEED",
                            "RNN_EQ_PERTURB", "PYTEST_XDIST_WORKER",
                            "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    environ.update(env or {})
    if blocked:
        # A package of the same name that fails on import, ahead of the real one on sys.path.
        shim = tmp_path / "shim" / blocked
        shim.mkdir(parents=True)
        (shim / "__init__.py").write_text(f"raise ImportError('{blocked} blocked by the test')\n")
        environ["PYTHONPATH"] = str(tmp_path / "shim")
    # Without Hypothesis's plugin, which imports Hypothesis (a second): child runs have no property tests.
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                             *args], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def verdict(row):
    """The last column of a summary row (columns are separated by two or more spaces)."""
    return row.rstrip().rsplit("  ", 1)[-1].strip()


def test_unknown_framework_is_a_usage_error_listing_valid_names():
    code, out = run_pytest("--frameworks=torch,pytorch", "tests/reference")
    assert code == pytest.ExitCode.USAGE_ERROR, out
    assert "unknown system(s) 'pytorch'; valid names: numpy-split, numpy-concat, torch" in out


def test_missing_framework_is_a_visible_skip_locally(require_system, tmp_path):
    require_system("torch")  # the child run is about torch's adapter
    code, out = run_pytest("tests/equivalence/test_exact.py", "-k", "torch", "-rs",
                           blocked="torch", tmp_path=tmp_path)
    assert code == pytest.ExitCode.OK, out
    assert "SKIPPED" in out and "framework 'torch' not available" in out and "torch blocked by the test" in out


def test_missing_framework_requested_explicitly_is_an_error(require_system, tmp_path):
    require_system("torch")  # the child run is about torch's adapter
    code, out = run_pytest("tests/equivalence/test_exact.py", "--frameworks=torch",
                           blocked="torch", tmp_path=tmp_path)
    assert code == pytest.ExitCode.TESTS_FAILED, out
    assert "error" in out and "because it was requested explicitly" in out


def test_missing_framework_under_ci_is_an_error(require_system, tmp_path):
    require_system("torch")  # the child run is about torch's adapter
    code, out = run_pytest("tests/equivalence/test_exact.py", "-k", "torch",
                           env={"CI": "true"}, blocked="torch", tmp_path=tmp_path)
    assert code == pytest.ExitCode.TESTS_FAILED, out
    assert "because CI=true" in out and "SKIPPED" not in out


EMPTY_DESIGN = '''
import pytest

@pytest.mark.design("options")
@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm")
def test_nothing_to_get_wrong(adapter, case):
    pass
'''


def test_a_parametrisation_that_comes_out_empty_is_an_error_naming_the_test(tmp_path):
    """A test that applies to a system but whose design gives it no case (here: the options design of a
    system with one activation and no options) is a collection error naming the test and the system,
    never a silent drop. The suite's conftest is loaded as a plugin (``-p conftest``) for a test file
    outside the repository."""
    (tmp_path / "test_empty.py").write_text(EMPTY_DESIGN)
    code, out = run_pytest("-p", "conftest", "-o", "addopts=", "--collect-only", "-q", str(tmp_path / "test_empty.py"))
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert "test_nothing_to_get_wrong: no parameters for torch-lstm, a system it applies to" in out, out
