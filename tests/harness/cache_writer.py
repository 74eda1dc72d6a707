"""One process's writes of one cache entry, for tests/harness/test_conversion_cache.py's writers: a module of
its own, so that a spawned writer imports the conversion cache and NumPy alone, not the test module's imports."""

from pathlib import Path

from rnn_equivalence.frameworks.conversion_cache import write_entry


def write_many(directory: str, key: str, fill: int, times: int, size: int) -> None:
    """``times`` writes of the entry ``key``: payloads of ``size`` bytes, each a byte of its own (``fill``)."""
    for _ in range(times):
        write_entry(Path(directory) / f"{key}.onnx", key, bytes([fill]) * size)
