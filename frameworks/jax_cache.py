"""JAX's persistent compilation cache, for every system that runs on JAX (Keras 3 on jax, Flax, Equinox).

The JAX systems run compiled (``TestPlan.compiles``): one ``jax.jit`` per structure, the weights its
arguments. XLA's compile of such a function takes 50 ms to a second, the run of what it made a fraction
of a millisecond, and every process compiles afresh: each xdist worker, each worker's Keras-on-jax child,
and every run. With ``jax_compilation_cache_dir`` set, JAX writes each executable to that directory and
looks there before compiling. Its key is JAX's own: the lowered program (its HLO, so the structure,
shapes, dtypes and activations), the compile options and flags, the backend and device, and the
versions of jax and jaxlib. A program the code no longer lowers, or another JAX, misses; what is
loaded is the executable XLA made for the same program, so the arithmetic is the same, and the
weights and inputs are arguments, never part of an entry.

Where: ``<the user's cache directory>/rnn-equivalence/jax`` (``platformdirs``, which honours
``XDG_CACHE_HOME``), beside the converted models' (``rnn_equivalence.frameworks.conversion_cache``). Off with
``RNN_EQ_NO_CONVERSION_CACHE=1`` (pytest's ``--no-conversion-cache``), the one switch for what the
suite keeps across runs: JAX's settings are then left as they are (conftest.py gives a run's processes
a cache of their own, removed at its end).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from rnn_equivalence.frameworks.conversion_cache import OFF_VAR, cache_enabled

SUBDIRECTORY = "jax"
# Every compile is written, the smallest too (JAX's default threshold is 1 s, which most of the suite's
# compiles stay under). Measured on five JAX systems' default-depth tests (2 cores, 2 workers): a warm
# run took 28-30 s with every compile kept (627 entries, 4.5 MB), 33-38 s with those over 0.05 s (370).
MIN_COMPILE_TIME_SECS = 0.0
_configured: dict[str, str | None] = {}


def directory(environ=os.environ) -> Path | None:
    """The persistent cache's directory, or None where ``RNN_EQ_NO_CONVERSION_CACHE`` (in ``environ``) turns
    it off; platformdirs reads the process's own environment (``XDG_CACHE_HOME``)."""
    if not cache_enabled(environ):
        return None
    import platformdirs

    return Path(platformdirs.user_cache_dir("rnn-equivalence")) / SUBDIRECTORY


def use_persistent_cache(jax) -> Path | None:
    """Point ``jax``'s compilation cache at ``directory()``, once per process, before its first compile
    (JAX reads the setting when it first compiles): the directory used, or None (off, or unusable)."""
    if "directory" in _configured:
        return None if _configured["directory"] is None else Path(_configured["directory"])
    chosen = directory()
    if chosen is not None:
        try:
            chosen.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # JAX would warn at every compile; once here, and compile without it
            warnings.warn(f"JAX compilation cache {chosen}: not usable ({error}); compiling without it "
                          f"({OFF_VAR}=1 turns it off)", RuntimeWarning, stacklevel=2)
            chosen = None
    if chosen is not None:
        jax.config.update("jax_compilation_cache_dir", str(chosen))
        # A threshold set in the environment (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS) is the user's.
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
    _configured["directory"] = None if chosen is None else str(chosen)
    return chosen
