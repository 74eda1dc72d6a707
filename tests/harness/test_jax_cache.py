"""JAX's persistent compilation cache (frameworks/jax_cache.py): where it is, that a JAX process the adapters
start writes its compiles there and a second one reads them back, and that the off switch leaves JAX alone.

The JAX processes are the machinery of the systems on JAX (Flax, Equinox, Keras on JAX): those tests run
where the run selects one of them, as a child run about a system does (``require_system``), and are an error,
not a skip, where JAX is missing and the run says so (CI=true, or the systems named)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnn_equivalence.frameworks import ADAPTERS, jax_cache
from rnn_equivalence.frameworks.conversion_cache import OFF_VAR

ROOT = Path(__file__).resolve().parents[2]
# A process as an adapter starts one (FlaxRunner.start: x64, then the cache), then one compile of a new program.
# It prints the directory used, the result, and how many executables JAX read from the cache (its own count).
PROGRAM = """
import jax
from rnn_equivalence.frameworks.jax_cache import use_persistent_cache
hits = []
jax.monitoring.register_event_listener(lambda event, **_: hits.append(event == "/jax/compilation_cache/cache_hits"))
jax.config.update("jax_enable_x64", True)
print(use_persistent_cache(jax))
print(jax.jit(lambda x: (x * 3.0 + 1.0).sum())(jax.numpy.arange(7.0)))
print(sum(hits))
"""


@pytest.fixture
def jax_selected(request):
    """Skip, with the reason, unless the run selects a system on JAX; JAX missing then is the selection's
    error or skip (conftest.load_adapter's rule)."""
    from conftest import SELECTION

    selection = request.config.stash[SELECTION]
    on_jax = [name for name in selection.names if "jax" in ADAPTERS[name].requires]
    if not on_jax:
        pytest.skip("no system on JAX is selected (--systems / RNN_EQ_SYSTEMS): the cache is their machinery")
    try:
        import jax  # noqa: F401
    except ImportError as error:
        if selection.missing_is_error:
            pytest.fail(f"JAX, which {on_jax[0]} needs, is missing: {error} (an error, not a skip, because the run "
                        f"selects it {'under CI=true' if selection.ci else 'by name'})", pytrace=False)
        pytest.skip(f"JAX, which {on_jax[0]} needs, is not available: {error}")


def run_jax(environ: dict) -> list[str]:
    # The run's own JAX settings (conftest.py's cache for the run) are not this process's: removed.
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_")}
    env.update(environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_directory_is_the_users_cache_directory_and_the_off_switch_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # platformdirs reads it (on Linux)
    assert jax_cache.directory({}) == tmp_path / "rnn-equivalence" / "jax"
    assert jax_cache.directory({OFF_VAR: "0"}) == tmp_path / "rnn-equivalence" / "jax"
    assert jax_cache.directory({OFF_VAR: "1"}) is None
    with pytest.raises(ValueError, match=OFF_VAR):  # a typo is an error, not a guess (the converters' rule)
        jax_cache.directory({OFF_VAR: "yes"})


def test_compiles_are_written_and_read_back_across_processes(tmp_path, jax_selected):
    directory = tmp_path / "rnn-equivalence" / "jax"
    first = run_jax({"XDG_CACHE_HOME": str(tmp_path)})
    entries = sorted(path.name for path in directory.iterdir())
    assert first == [str(directory), "70.0", "0"] and entries, (first, entries)
    # The second process reads what the first compiled (arange's and the jitted function's), adds no
    # entry, and computes the same.
    second = run_jax({"XDG_CACHE_HOME": str(tmp_path)})
    assert second[:2] == first[:2] and int(second[2]) >= 1, second
    assert sorted(path.name for path in directory.iterdir()) == entries


def test_off_writes_nothing(tmp_path, jax_selected):
    assert run_jax({"XDG_CACHE_HOME": str(tmp_path), OFF_VAR: "1"}) == ["None", "70.0", "0"]
    assert not (tmp_path / "rnn-equivalence").exists()
