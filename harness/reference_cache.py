"""A case's reference results and bounds, computed once and kept across runs: content-addressed, like the
converted models (``rnn_equivalence.frameworks.conversion_cache``).

The float64 reference and its running bounds (``rnn_equivalence.reference.tolerance``, ``.backward``) are pure
functions of the arrays they start from (the canonical parameters, the inputs, the initial state, the padding
and cotangents), a few scalars (the dtype bounded, the forget bias) and the reference's code. In Python over
NumPy, step by step, a case's bound takes 40 to 100 ms: for a fast framework the largest part of a run (PyTorch's
two LSTM and GRU layer systems at default depth: 9 of their 26 s of tests), and the same in every run.

The key (``key``) is the SHA-256 of what the result is (``kind``), the digest of every array and scalar the
computation reads (``content_digest``: arrays by their bytes, shape and dtype), the versions of Python and NumPy,
the machine, and the digest of the code that computes it: every module of ``reference/`` and the caller's, as
Python parses them (``conversion_cache.files_digest``: an edit of a comment keys nothing afresh, an edit of what
runs misses). A result is never served for other data, another dtype or changed code.

Entries live in ``RNN_EQ_REFERENCE_CACHE`` if set, else in the user's cache directory (``platformdirs``), beside
the converted models; ``RNN_EQ_NO_REFERENCE_CACHE=1`` (pytest's ``--no-reference-cache`` sets it) turns it off.
An entry is the conversion cache's (a header naming its key, its payload's length and SHA-256, checked before
the payload is trusted; written whole and renamed into place), its payload an ``.npz`` read with
``allow_pickle=False``: arrays of numbers and a JSON layout of the dicts, lists and tuples that held them.
Anything else (a truncated file, a flipped bit, an object array, a layout naming an array that is not there) is
a damaged entry: removed, warned of, computed again. Never unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import platform
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.conversion_cache import (cache_directory as conversion_directory, files_digest,
                                                         read_entry, rejected, writable, write_entry)

CACHE_VAR = "RNN_EQ_REFERENCE_CACHE"
OFF_VAR = "RNN_EQ_NO_REFERENCE_CACHE"
# Bumped when what an entry holds or how its key is made changes: older entries then miss.
FORMAT = "rnn-equivalence reference 1"
LAYOUT = "__layout__"  # the npz member holding the JSON layout

COUNTS = {"from_cache": 0, "computed": 0, "rejected": 0}


def cache_enabled(environ=os.environ) -> bool:
    """False where ``RNN_EQ_NO_REFERENCE_CACHE`` is 1; another value than 0, 1 or empty is an error."""
    value = environ.get(OFF_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{OFF_VAR}: expected 1 (no reference cache) or 0, got {value!r}")
    return value != "1"


def cache_directory(environ=os.environ) -> Path | None:
    """``RNN_EQ_REFERENCE_CACHE``, else ``references`` in the user's cache directory; None where off."""
    if not cache_enabled(environ):
        return None
    chosen = environ.get(CACHE_VAR, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    # beside the converted models' default directory, whether or not that cache is on
    conversions = conversion_directory({})
    return conversions.parent / "references"


def check_cache_directory(environ=os.environ) -> Path | None:
    """``cache_directory``, created and checked writable before a run: an unusable one is an error saying how to
    choose another or turn the cache off."""
    return writable(cache_directory(environ), "reference cache", CACHE_VAR, f"{OFF_VAR}=1 to compute every reference "
                    "afresh")


# --- the key ---------------------------------------------------------------------------------------


def content_digest(value) -> str:
    """SHA-256 of ``value``: arrays by their bytes, shape and dtype; dicts, lists, tuples and dataclasses (the
    parameters, a padding) by their parts; str, int, float, bool and None by their repr. Anything else is an
    error, not a repr that might name a memory address."""
    combined = hashlib.sha256()
    _feed(combined, value)
    return combined.hexdigest()


def _feed(h, value) -> None:
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.ascontiguousarray(value)
        h.update(b"array" + str((array.shape, array.dtype.str)).encode() + array.tobytes())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"dataclass {type(value).__qualname__}(".encode())
        for field in dataclasses.fields(value):
            h.update(field.name.encode() + b"=")
            _feed(h, getattr(value, field.name))
        h.update(b")")
    elif isinstance(value, dict):
        h.update(b"dict{")
        for name in sorted(value, key=repr):
            _feed(h, name)
            _feed(h, value[name])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}[{len(value)}](".encode())
        for item in value:
            _feed(h, item)
        h.update(b")")
    elif value is None or isinstance(value, (str, int, float, bool)):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    else:
        raise TypeError(f"reference cache: cannot key a {type(value).__name__} by its content")


@lru_cache(maxsize=None)
def code_digest(caller: str) -> str:
    """The digest of the reference's code (every module of ``reference/``) and of the module ``caller`` (a
    module name: the code that calls it with the case's data)."""
    reference = Path(sys.modules["rnn_equivalence.reference"].__file__).parent
    return files_digest(sorted(reference.glob("*.py")) + [Path(sys.modules[caller].__file__)])


def key(kind: str, arguments, caller: str) -> str:
    """The entry's name: SHA-256 of the format, ``kind``, the arguments' content, the versions the float64
    arithmetic depends on and the code's digest."""
    versions = (platform.python_version(), np.__version__, platform.machine())
    return hashlib.sha256(repr((FORMAT, kind, content_digest(arguments), versions, code_digest(caller))).encode()
                          ).hexdigest()


# --- entries: arrays in dicts, lists and tuples ----------------------------------------------------


def encode(result) -> bytes:
    """``result`` (arrays of numbers in dicts with str keys, lists and tuples) as an ``.npz``'s bytes."""
    arrays = {}
    layout = _layout(result, arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays, **{LAYOUT: np.frombuffer(json.dumps(layout).encode(), np.uint8)})
    return buffer.getvalue()


def _layout(value, arrays: dict):
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"reference cache: expected arrays of numbers, got dtype {value.dtype}")
        name = f"a{len(arrays)}"
        arrays[name] = value
        return {"array": name}
    if isinstance(value, dict):
        if not all(isinstance(name, str) for name in value):
            raise TypeError("reference cache: expected dicts with str keys")
        return {"dict": [[name, _layout(item, arrays)] for name, item in value.items()]}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_layout(item, arrays) for item in value]}
    raise TypeError(f"reference cache: cannot keep a {type(value).__name__}")


def decode(data: bytes):
    """``encode``'s result back; ValueError for anything that is not such an entry (an object array, a member
    missing, a layout of another shape): never unpickled."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as members:
            arrays = {name: members[name] for name in members.files}
        layout = json.loads(arrays.pop(LAYOUT).tobytes().decode())
        used: set[str] = set()
        result = _rebuild(layout, arrays, used)
    except (ValueError, KeyError, TypeError, OSError, EOFError, UnicodeDecodeError) as error:
        raise ValueError(f"not a reference cache entry: {error}") from None
    if used != set(arrays):
        raise ValueError(f"not a reference cache entry: arrays {sorted(set(arrays) - used)} are in no layout")
    return result


def _rebuild(layout, arrays: dict, used: set):
    if not isinstance(layout, dict) or len(layout) != 1:
        raise ValueError(f"a layout node is {layout!r}")
    (kind, content), = layout.items()
    if kind == "array":
        array = arrays[content]
        if array.dtype.kind not in "biuf" or content in used:
            raise ValueError(f"member {content!r}: dtype {array.dtype}, or used twice")
        used.add(content)
        return array
    if kind == "dict":
        return {str(name): _rebuild(item, arrays, used) for name, item in content}
    if kind in ("list", "tuple"):
        items = [_rebuild(item, arrays, used) for item in content]
        return items if kind == "list" else tuple(items)
    raise ValueError(f"a layout node of kind {kind!r}")


def kept(kind: str, arguments, compute: Callable, caller: str):
    """``compute()``, or its result for the same ``kind``, ``arguments`` (everything it reads) and code, from
    the cache. ``caller``: the calling module's name (``__name__``), whose code is in the key."""
    directory = cache_directory()
    if directory is None:
        COUNTS["computed"] += 1
        return compute()
    name = key(kind, arguments, caller)
    path = directory / f"{name}.npz"
    data = read_entry(path, name, COUNTS, "reference cache")
    if data is not None:
        try:
            result = decode(data)
        except ValueError:
            rejected(path, COUNTS, "reference cache")
        else:
            COUNTS["from_cache"] += 1
            return result
    result = compute()
    COUNTS["computed"] += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    write_entry(path, name, encode(result))
    return result


def take_counts() -> dict[str, int]:
    """This process's counts since the last call, and zero again (``rnn_equivalence.harness.records`` hands them to
    the summary)."""
    taken = dict(COUNTS)
    COUNTS.update(dict.fromkeys(COUNTS, 0))
    return taken
