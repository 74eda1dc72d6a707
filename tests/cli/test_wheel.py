"""The package as users install it: a wheel of the project, installed in a fresh environment outside the
checkout, answers ``rnn-equivalence compare`` (the engine, no pytest and no tests/ there) and reads a weights
file with ``rnn-equivalence inspect``, run from a directory outside the checkout.

The fresh environment sees this one's third-party packages (NumPy, click, ...: nothing is downloaded) through
a ``.pth`` line naming this environment's site-packages, written after the wheel is installed. A ``.pth`` file
in a directory a ``.pth`` line adds is not processed, so this environment's editable install of
rnn_equivalence stays inactive there; the test checks that the package imported is the wheel's.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# Not part of a build: this checkout's environment, its git data, and what earlier builds and runs left
# (a stale build/lib would go into the wheel: setuptools copies over it and removes nothing).
NOT_SOURCES = (".venv", ".git", ".nox", "build", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache")


def run(*command, cwd=None) -> subprocess.CompletedProcess:
    """``command``, without the variables that would point it back at the checkout; its output on failure."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode in (0, 1), f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done


def installed(tmp_path: Path) -> Path:
    """A venv in ``tmp_path`` with the wheel of this checkout installed, and this environment's packages seen."""
    # Built from a copy: the build writes build/ and *.egg-info beside the sources, not in the checkout.
    source = shutil.copytree(ROOT, tmp_path / "source", ignore=shutil.ignore_patterns(*NOT_SOURCES))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "wheels",
        source)
    (wheel,) = (tmp_path / "wheels").glob("rnn_equivalence-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    # This environment's pip installs into the new one (--python): no pip of its own to bootstrap. Before the
    # .pth line, so that pip sees no other rnn-equivalence there.
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index", "-q",
        wheel)
    site = run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout
    Path(site.strip(), "main-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def test_the_installed_wheel_compares_and_inspects(tmp_path):
    venv = installed(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = json.loads(run(venv / "bin" / "python", "-c", "import json, sys, numpy, rnn_equivalence.reference as r; "
                           "print(json.dumps([r.__file__, numpy.__file__, sorted(m for m in sys.modules "
                           "if 'editable' in m)]))", cwd=outside).stdout)
    assert Path(where[0]).is_relative_to(venv), where  # the wheel's package, not the checkout's
    assert Path(where[1]).is_relative_to(sysconfig.get_paths()["purelib"]) and not where[2], where

    done = run(venv / "bin" / "rnn-equivalence", "compare", "numpy-concat", "numpy-split", cwd=outside)
    assert done.returncode == 0 and done.stdout.startswith("Yes: numpy-concat and numpy-split."), done.stdout
    assert "docs/ANSWERS.md" not in done.stdout  # the page's lead needs docgen/, which a wheel has not

    # A PyTorch GRU's weights as a user's model file names them, beside a layer that is not recurrent.
    I, H = 4, 3
    rng = np.random.default_rng(0)
    np.savez(outside / "model.npz", **{"encoder.rnn.weight_ih_l0": rng.standard_normal((3 * H, I)),
                                       "encoder.rnn.weight_hh_l0": rng.standard_normal((3 * H, H)),
                                       "encoder.rnn.bias_ih_l0": rng.standard_normal(3 * H),
                                       "encoder.rnn.bias_hh_l0": rng.standard_normal(3 * H),
                                       "head.weight": rng.standard_normal((2, H))})
    done = run(venv / "bin" / "rnn-equivalence", "inspect", "model.npz", "--json", cwd=outside)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    (module,) = found["modules"]
    assert (module["location"], module["system"], module["family"], module["gru_variant"]) == (
        "encoder.rnn", "torch-gru-rnn", "gru", "reset_after")
    assert (module["input_size"], module["hidden_size"], module["num_layers"]) == (I, H, 1)
    assert found["skipped"] == ["head.weight"]
