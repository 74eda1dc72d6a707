"""Converted models, made once and kept across runs: a content-addressed cache, like ccache.

An export or conversion (``torch.onnx.export``, tf2onnx, TFLite's converter) takes seconds, the run of
its result milliseconds. A converted model depends on the system, the converter's versions and those of
what it depends on, the project's code that builds and converts the source model, the structure
(configuration, activations, the inputs' shapes and dtype, the options) and the weights' values, not on
the inputs' values. The key (``conversion_key``) holds all of these, the weights by their SHA-256
digests: another set of weights (a mutation, a case of another structure) is converted afresh, and an
upgrade or an edit of the adapters' code misses rather than serves a model the new code would not make.

Entries live in ``RNN_EQ_CONVERSION_CACHE`` if set, else in the user's cache directory (``platformdirs``),
shared by every process of a run (xdist's workers) and by the runs after it. ``RNN_EQ_NO_CONVERSION_CACHE=1``
(pytest's ``--no-conversion-cache`` sets it) turns it off: every model is converted in the process that
needs it. Each entry starts with a header naming its key, its payload's length and SHA-256, checked before
the payload is trusted: a truncated or corrupt entry (a full disk, a crash, an edit) is removed and the
model converted again, never run. An entry is written whole to a temporary file and renamed into place,
so a reader sees a whole entry or none, and two writers of one key leave one whole entry.

The entries are bytes the runtimes parse (ONNX protobufs, TFLite flatbuffers), never unpickled.

``COUNTS`` counts, per process, the models read from the cache, converted, and the entries rejected;
``take_counts`` hands them to the run's report (conftest.py) and starts again from zero.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import platform
import sys
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.base import distribution_version

CACHE_VAR = "RNN_EQ_CONVERSION_CACHE"
OFF_VAR = "RNN_EQ_NO_CONVERSION_CACHE"
# Bumped when what an entry holds or how its key is made changes: older entries then miss.
FORMAT = "rnn-equivalence conversion 2"
# Models kept in memory per process: a test runs one model several times (chunks, kernels), the next test
# mostly another; the rest is on disk. Few, so that a long run does not hold every model it converted.
MEMORY_ENTRIES = 8

COUNTS = {"from_cache": 0, "converted": 0, "rejected": 0}
_MEMORY: OrderedDict[str, bytes] = OrderedDict()


def digest(array) -> str | None:
    """SHA-256 of an array's bytes, shape and dtype (None for None)."""
    if array is None:
        return None
    array = np.ascontiguousarray(array)
    return hashlib.sha256(array.tobytes() + str((array.shape, array.dtype)).encode()).hexdigest()


def weights_digests(native: dict) -> list[tuple[str, str | None]]:
    """Each native weight's name and digest, by name."""
    return [(name, digest(value)) for name, value in sorted(native.items())]


# --- where the cache is, and whether it is on ----------------------------------------------------


def cache_enabled(environ=os.environ) -> bool:
    """False where ``RNN_EQ_NO_CONVERSION_CACHE`` is 1; a value other than 0, 1 or empty is an error, not
    a guess (a typo must not silently keep a cache the user meant to turn off, nor the reverse)."""
    value = environ.get(OFF_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{OFF_VAR}: expected 1 (no conversion cache) or 0, got {value!r}")
    return value != "1"


def cache_directory(environ=os.environ) -> Path | None:
    """The cache's directory (``RNN_EQ_CONVERSION_CACHE``, else the user's cache directory), or None
    where the cache is off."""
    if not cache_enabled(environ):
        return None
    chosen = environ.get(CACHE_VAR, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("rnn-equivalence")) / "conversions"


def check_cache_directory(environ=os.environ) -> Path | None:
    """``cache_directory``, created and checked writable once, before a run: an unusable one is an error
    that says how to choose another or turn the cache off (not a failure in every converter test)."""
    return writable(cache_directory(environ), "conversion cache", CACHE_VAR, f"{OFF_VAR}=1 to convert without a cache")


def writable(directory: Path | None, what: str, choose_var: str, off: str) -> Path | None:
    """``directory`` (None: the cache is off), created and checked writable; else a ValueError naming ``what``,
    the variable that chooses another (``choose_var``) and how to turn it off (``off``). The reference cache's too
    (``rnn_equivalence.harness.reference_cache``)."""
    if directory is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ValueError(f"{what} {directory}: not a writable directory ({error}); set {choose_var} to one, or "
                         f"{off}") from None
    return directory


# --- the key ---------------------------------------------------------------------------------------


def conversion_key(adapter, parts) -> str:
    """The entry's name: SHA-256 of the system, the versions its conversions depend on, the digest of the
    project's code that builds and converts its models, and ``parts`` (the structure, the options and the
    weights' digests, repr-stable)."""
    versions = conversion_versions(type(adapter))
    return hashlib.sha256(
        repr((FORMAT, adapter.name, versions, code_digest(type(adapter)), parts)).encode()).hexdigest()


@lru_cache(maxsize=None)
def conversion_versions(cls) -> tuple:
    """Python's, NumPy's (the weights become the model's constants) and every distribution the system's
    runs and conversions depend on (``distributions``, ``converter_distributions``)."""
    names = sorted({"numpy", *cls.distributions, *getattr(cls, "converter_distributions", ())})
    return (("python", platform.python_version()), *((name, distribution_version(name)) for name in names))


@lru_cache(maxsize=None)
def code_digest(cls) -> str:
    """The digest of ``source_files(cls)``: an edit of the code that builds or converts the model is a
    miss, not a stale model."""
    return files_digest(source_files(cls))


def source_files(cls) -> list[Path]:
    """The source files of the project's modules (``rnn_equivalence.frameworks``) that define the adapter and
    its bases: the model built around the weights, the converter's call."""
    return sorted({Path(inspect.getsourcefile(sys.modules[base.__module__])) for base in cls.__mro__
                   if base.__module__.startswith(__package__ + ".")})


def files_digest(files) -> str:
    """SHA-256 of the files' names and code, in order: the code as Python parses it (``code_text``), so that an
    edit of a comment, a docstring or the layout keys no model afresh, while an edit of what runs does."""
    combined = hashlib.sha256()
    for path in files:
        combined.update(path.name.encode() + b"\0" + code_text(path.read_bytes()).encode() + b"\0")
    return combined.hexdigest()


def code_text(source: bytes) -> str:
    """A module's syntax tree without its docstrings, as text (``ast.dump``: no comments, no line numbers).
    A string alone as a statement is a docstring wherever it stands (it computes nothing). A file that does not
    parse is hashed as its bytes: such a module fails at import anyway."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source.hex()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [statement for statement in body
                    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                            and isinstance(statement.value.value, str))]
            node.body = kept or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


# --- entries ---------------------------------------------------------------------------------------


def header(key: str, data: bytes) -> bytes:
    """An entry's first line: the format, its key, the payload's length and SHA-256."""
    return f"{FORMAT} {key} {len(data)} {hashlib.sha256(data).hexdigest()}\n".encode()


def read_entry(path: Path, key: str, counts: dict = COUNTS, what: str = "conversion cache") -> bytes | None:
    """The payload of the entry at ``path`` if it is whole and its checksum holds; None if there is none.
    A damaged one is removed (and counted in ``counts["rejected"]``): the caller makes it again. ``counts`` and
    ``what``: another cache's (``rnn_equivalence.harness.reference_cache`` keeps its entries so)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    first, newline, data = raw.partition(b"\n")
    if newline and raw.startswith(header(key, data)):
        return data
    rejected(path, counts, what)
    return None


def rejected(path: Path, counts: dict = COUNTS, what: str = "conversion cache") -> None:
    """A damaged entry: warned of, counted, removed (the caller makes it again, never runs it)."""
    counts["rejected"] += 1
    warnings.warn(f"{what}: {path} is damaged (truncated, or its checksum or contents do not hold): removed, "
                  "made again", RuntimeWarning, stacklevel=4)
    path.unlink(missing_ok=True)


def write_entry(path: Path, key: str, data: bytes) -> None:
    """Write the entry whole to a temporary file beside it, then rename it into place (atomic): a reader
    never sees half of it, and of two writers of one key the last rename wins, whole."""
    descriptor, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(header(key, data))
            out.write(data)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def cached(key: str, convert: Callable[[], bytes], suffix: str, directory: Path | None) -> bytes:
    """The model of ``key``: from memory, else from the entry in ``directory`` (None: no cache), else
    ``convert()``, stored there. Counted in ``COUNTS``."""
    if key in _MEMORY:
        _MEMORY.move_to_end(key)
        return _MEMORY[key]
    path = directory / f"{key}{suffix}" if directory is not None else None
    data = read_entry(path, key) if path is not None else None
    if data is not None:
        COUNTS["from_cache"] += 1
    else:
        data = convert()
        if not isinstance(data, bytes):
            raise TypeError(f"conversion: expected the converted model's bytes, got {type(data).__name__}")
        COUNTS["converted"] += 1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_entry(path, key, data)
    _MEMORY[key] = data
    while len(_MEMORY) > MEMORY_ENTRIES:
        _MEMORY.popitem(last=False)
    return data


def converted_once(adapter, parts, convert: Callable[[], bytes], suffix: str = ".onnx") -> bytes:
    """The converted model of ``adapter`` described by ``parts`` (a repr-stable description of the
    structure, the options and the weights' digests; ``conversion_key`` adds the rest), from the cache
    or from ``convert()``."""
    return cached(conversion_key(adapter, parts), convert, suffix, cache_directory())


def take_counts() -> dict[str, int]:
    """This process's counts since the last call, and zero again."""
    taken = dict(COUNTS)
    COUNTS.update(dict.fromkeys(COUNTS, 0))
    return taken
