"""Run an adapter in a child process, for frameworks that fix global state at import.

Keras 3 reads ``KERAS_BACKEND`` once, when it is first imported, so one process
can hold one backend. An adapter that declares ``process_env`` (for instance
``{"KERAS_BACKEND": "jax"}``) and finds this process set differently runs its
framework in a child process started with that environment: the weight
mapping stays here, and only the calls that touch the framework (``rnn_equivalence.frameworks.base.Runner``)
cross over, as pickled NumPy arrays. Errors come back as the same
exception type with the same message, so tests cannot tell the difference.

One child serves every adapter that needs the same environment: starting
Python with Keras and a backend costs seconds, and twenty Keras adapters on
two backends would otherwise start forty children per pytest-xdist worker.

    python -m rnn_equivalence.frameworks.child      (started by ChildProcess.for_env)
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import traceback
from pathlib import Path

from rnn_equivalence.frameworks.base import RUNNER_METHODS

ROOT = Path(__file__).resolve().parents[1]
# Exceptions re-raised as themselves in the parent; anything else becomes RuntimeError.
PASS_THROUGH = {e.__name__: e for e in (ValueError, TypeError, ImportError, KeyError, NotImplementedError)}


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    return pickle.loads(stream.read(size))


def _error(exc: BaseException):
    return (type(exc).__name__, str(exc), traceback.format_exc())


class ChildProcess:
    _by_env: dict[tuple, "ChildProcess"] = {}

    @classmethod
    def for_env(cls, env: dict[str, str]) -> "ChildProcess":
        """The one child of this process with ``env``, started on first use."""
        key = tuple(sorted(env.items()))
        child = cls._by_env.get(key)
        if child is None or child.process.poll() is not None:
            child = cls._by_env[key] = cls(env)
        return child

    def __init__(self, env: dict[str, str]):
        environ = {**os.environ, **env}
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
        self.env = env
        self.process = subprocess.Popen([sys.executable, "-m", "rnn_equivalence.frameworks.child"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environ)

    def call(self, adapter_name: str, method: str, *args, **kwargs):
        """``method`` of the child's adapter ``adapter_name``; method "start" constructs and starts it."""
        try:
            _send(self.process.stdin, (adapter_name, method, args, kwargs))
            reply = _receive(self.process.stdout)
        except (BrokenPipeError, ConnectionResetError, ValueError):  # ValueError: a closed pipe
            reply = None
        if reply is None:
            raise RuntimeError(f"child process for adapter {adapter_name!r} ({self.env}) exited "
                               f"with code {self.process.wait()}; its stderr is in the test output")
        ok, value = reply
        if ok:
            return value
        name, message, trace = value
        if name in PASS_THROUGH:
            raise PASS_THROUGH[name](message)
        raise RuntimeError(f"in the child process for {adapter_name!r}: {name}: {message}\n{trace}")

    @classmethod
    def close_all(cls) -> None:
        """End every child at once: all are told first, then all are waited for."""
        running = [child.process for child in cls._by_env.values() if child.process.poll() is None]
        for process in running:
            process.stdin.close()
        for process in running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


atexit.register(ChildProcess.close_all)


def _forwarded(method: str):
    def forward(self, *args, **kwargs):
        return self._child.call(self.name, method, *args, **kwargs)

    forward.__name__ = method
    return forward


class InChildProcess:
    """Mixed in ahead of an adapter class: the ``Runner`` methods (``rnn_equivalence.frameworks.base``, the calls that
    touch the framework) go to the child; the mapping and the checks stay here."""

    def start(self):
        self._child = ChildProcess.for_env(self.process_env)
        self._child.call(self.name, "start")  # ImportError here if the framework is missing


for _method in RUNNER_METHODS:
    if _method != "start":
        setattr(InChildProcess, _method, _forwarded(_method))


def main() -> None:
    # The protocol owns the real stdout; whatever the framework prints goes to stderr.
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    channel_in = sys.stdin.buffer
    from rnn_equivalence.frameworks.systems import adapter_class

    adapters = {}
    while (request := _receive(channel_in)) is not None:
        name, method, args, kwargs = request
        try:
            if method == "start":
                adapters[name] = adapter_class(name)()
                adapters[name].start()
                result = None
            else:
                result = getattr(adapters[name], method)(*args, **kwargs)
            _send(channel_out, (True, result))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            _send(channel_out, (False, _error(exc)))
    # The parent has every reply. Finalizing the interpreter with torch, JAX and Keras
    # loaded takes 1.5 to 2.5 s here, which each pytest-xdist worker would wait for at
    # the end of the run; nothing of the child's is left to save.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
