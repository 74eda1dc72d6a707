"""One run split into N parts that run on N machines, and the parts merged into one report.

    pytest -n auto --depth=full --shard=1/4 --equivalence-report=parts      (on machine 1; 2/4 on machine 2, ...)
    python -m rnn_equivalence.harness.shards merge parts/part-*.json --output docs

A test belongs to part ``crc32(node id) mod N`` + 1: the same on every machine and in any collection
order, so the N parts are disjoint and together are the whole run. Each part writes the records its
tests made (``Summary.records``: the comparisons, mutations, known issues and failures) and its
outcomes, with the run's depth, seed, selection and environment; the merge feeds every part's records
to one ``Summary``, in the order of the parts, and writes the report an unsharded run writes
(``rnn_equivalence.harness.report.write``): tests/harness/test_shards.py checks that they are the same. A merge of
parts that disagree (another depth, seed, selection, N, or a part missing or given twice) is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

PART_SCHEMA = 1


def parse(value: str) -> tuple[int, int]:
    """"K/N" as (K, N), 1 <= K <= N; a ValueError naming what was expected otherwise."""
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise ValueError(f"--shard: expected K/N (this run is part K of N, e.g. 2/4), got {value!r}") from None
    if not 1 <= k <= n:
        raise ValueError(f"--shard: expected 1 <= K <= N, got {value!r}")
    return k, n


def part_of(nodeid: str, n: int) -> int:
    """The part (1..n) a test belongs to."""
    return zlib.crc32(nodeid.encode()) % n + 1


def write_part(summary, directory) -> Path:
    from rnn_equivalence.harness.report import environment, run_command

    k, n = summary.shard
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    part = {"part_schema": PART_SCHEMA, "shard": [k, n], "depth": summary.depth, "seed": summary.seed,
            "names": list(summary.names), "command": run_command(), "environment": environment(summary.names),
            "outcomes": dict(summary.outcomes), "conversions": dict(summary.conversions),
            "conversions_by_system": summary.conversions_by_system, "seconds": summary.seconds,
            "wall_seconds": summary.wall_seconds,
            "peak_rss": {f"part {k} {name}": peak for name, peak in summary.peak_rss.items()},
            "records": summary.records}
    path = directory / f"part-{k}-of-{n}.json"
    path.write_text(json.dumps(part, indent=1) + "\n")
    return path


def merge(paths, output) -> Path:
    """The report of the whole run from its parts (``write_part``), written to ``output``."""
    from rnn_equivalence.harness.report import write
    from rnn_equivalence.harness.summary import Summary

    parts = [json.loads(Path(path).read_text()) for path in paths]
    if not parts:
        raise ValueError("merge: expected the report parts of a sharded run (part-K-of-N.json), got none")
    first = parts[0]
    for path, part in zip(paths, parts):
        if part.get("part_schema") != PART_SCHEMA:
            raise ValueError(f"merge: {path}: expected a report part (part_schema {PART_SCHEMA}), got "
                             f"{part.get('part_schema')!r}")
        for key in ("depth", "seed", "names", "command"):
            if part[key] != first[key]:
                raise ValueError(f"merge: {path}: {key} {part[key]!r} differs from {paths[0]}'s {first[key]!r}: "
                                 "parts of different runs")
        for key in ("python", "keras_backend", "versions"):  # the machines may differ; what ran may not
            if part["environment"].get(key) != first["environment"].get(key):
                raise ValueError(f"merge: {path}: {key} {part['environment'].get(key)!r} differs from {paths[0]}'s "
                                 f"{first['environment'].get(key)!r}: parts of different runs")
    n = first["shard"][1]
    got = sorted(part["shard"][0] for part in parts)
    if got != list(range(1, n + 1)) or any(part["shard"][1] != n for part in parts):
        raise ValueError(f"merge: expected parts 1..{n} of {n}, each once; got {[p['shard'] for p in parts]}")
    summary = Summary(names=first["names"], depth=first["depth"], seed=first["seed"])
    for part in sorted(parts, key=lambda part: part["shard"][0]):
        for record in part["records"]:
            summary.add(record)
        for outcome, count in part["outcomes"].items():
            summary.outcomes[outcome] += count
        summary.add_conversions(part.get("conversions", {}))  # a part written before they were counted has none
        for name, needed in part.get("conversions_by_system", {}).items():
            summary.conversions_by_system[name] = summary.conversions_by_system.get(name, 0) + needed
        for name, spent in part.get("seconds", {}).items():  # likewise the cost
            summary.seconds[name] = summary.seconds.get(name, 0.0) + spent
        summary.peak_rss.update(part.get("peak_rss", {}))
        if part.get("wall_seconds"):  # parts one after another: their sum; on machines side by side, less
            summary.wall_seconds = (summary.wall_seconds or 0.0) + part["wall_seconds"]
    # The environment the parts ran in (the same versions), not the merging machine's; every CPU they ran on.
    cpus = list(dict.fromkeys(part["environment"].get("cpu", "") for part in parts))
    env = {**first["environment"], "cpu": "; ".join(cpus)}
    return write(summary, first["names"], output, command=first["command"], env=env)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnn_equivalence.harness.shards",
                                     description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    merging = commands.add_parser("merge", help="merge the report parts of a sharded run into one report")
    merging.add_argument("parts", nargs="+", help="the part-K-of-N.json files, one per part")
    merging.add_argument("--output", required=True, help="where to write EQUIVALENCE.md and equivalence.json")
    args = parser.parse_args(argv)
    try:
        where = merge(args.parts, args.output)
    except (ValueError, OSError, json.JSONDecodeError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"equivalence report: {where / 'EQUIVALENCE.md'}, {where / 'equivalence.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
