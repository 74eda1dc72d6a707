"""Converted models, made once per model: an export or conversion (``torch.onnx.export``, tf2onnx,
TFLite's converter) takes seconds, the run of its result milliseconds.

A converted model depends on the system, the converter's versions, the structure (configuration,
activations, the inputs' shapes and dtype) and the weights' values, not on the inputs' values: the
reference test, the comparison with the source framework and the pair test of one case share it. The
key holds all of these, the weights by their SHA-256 digests, so another set of weights (a mutation, the
next case) is converted afresh. Shared in this process, and across a run's processes through the
directory ``RNN_EQ_EXPORT_CACHE`` names (conftest sets one per run and removes it after).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from frameworks.base import distribution_version


def digest(array) -> str | None:
    """SHA-256 of an array's bytes, shape and dtype (None for None)."""
    if array is None:
        return None
    array = np.ascontiguousarray(array)
    return hashlib.sha256(array.tobytes() + str((array.shape, array.dtype)).encode()).hexdigest()


def weights_digests(native: dict) -> list[tuple[str, str | None]]:
    """Each native weight's name and digest, by name."""
    return [(name, digest(value)) for name, value in sorted(native.items())]


def converted_once(adapter, parts, convert: Callable[[], bytes], suffix: str = ".onnx") -> bytes:
    """The converted model of ``adapter`` keyed by ``parts`` (a repr-stable description of everything it
    depends on but the converter's versions, which are added here: a directory the user set, and kept,
    may outlive an upgrade), from ``convert()`` on first use."""
    versions = [(d, distribution_version(d)) for d in adapter.distributions]
    key = hashlib.sha256(repr((adapter.name, versions, parts)).encode()).hexdigest()
    memory = adapter.__dict__.setdefault("_converted", {})
    if key in memory:
        return memory[key]
    directory = os.environ.get("RNN_EQ_EXPORT_CACHE")
    path = Path(directory) / f"{key}{suffix}" if directory else None
    if path is not None and path.exists():
        data = path.read_bytes()
    else:
        data = convert()
        if path is not None:  # written whole, then renamed: another process never reads half a model
            partial = path.with_suffix(f".{os.getpid()}.partial")
            partial.write_bytes(data)
            partial.replace(path)
    memory[key] = data
    return data
