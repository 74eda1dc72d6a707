"""The process settings every run of the suite's cases makes before any framework is imported: pytest's
(conftest.py) and the engine's (``rnn_equivalence.engine``, ``compare``), so that both compute alike.

A setting the user made is kept (``setdefault``).
"""

from __future__ import annotations

import os

# Keras 3 fixes its backend at import: this process's, the others' in child processes
# (rnn_equivalence.frameworks.child). TensorFlow's C++ start-up chatter drowns the output.
BEFORE_IMPORTS = {"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}

# Each library's own thread pool, one thread: the suite's arithmetic is tiny (H <= 7, T <= 50), so threads
# only contend, with pytest-xdist's workers and their Keras children already one process per core.
# Thread counts change no bound (reference/tolerance.py bounds every order of summation), but they change
# which of the results within it a run gives: the engine and the suite set the same.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def prepare_process(environ=os.environ) -> None:
    """Set, where the user has not, what must be set before a framework is imported or a child started (the
    children inherit it)."""
    for key, value in {**BEFORE_IMPORTS, **ONE_THREAD}.items():
        environ.setdefault(key, value)
