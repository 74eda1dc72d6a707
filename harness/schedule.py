"""The order the tests run in: the costliest systems first, each system's tests together.

With two workers, a run ends when its slower worker does; a costly system met last leaves the other worker
idle. Under ``-n``, pytest-xdist hands out units of work in collection order (``by_system``: a system's tests
are one unit), so ordering the collection by cost is what balances the workers: the costly systems are spread
first, the cheap ones fill the ends. Each system's tests stay together, in their collected order, so that one
worker builds what the system needs (``Adapter.built_once``) and lets go of it after its last test.

The cost of a system is its test seconds at the run's depth, else its number of tests; the harness's own
tests, which no system names, come last. A full-depth run reads them from the committed report
(``cost.seconds``, written by the full-depth run that made it); a shorter run from docs/suite_cost.json, the
default-depth run from a cold cache of the last benchmark (``benchmarks/suite_time.py --output``). A
system's full-depth seconds rank it badly at default: its full design is 5 to 50 times its default one, by
a factor that differs from system to system, and a cold full run converts models a default run reads
from the cache.

A unit goes whole to whichever worker is free, in this order: the longest first, the rest filling in (a greedy
longest-first schedule).
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "equivalence.json"
SUITE_COST = ROOT / "docs" / "suite_cost.json"


def committed_seconds(report: Path = REPORT) -> dict[str, float]:
    """Each system's test seconds in a committed report or cost file, its ``cost.seconds`` ({} where it has
    none, or no file is here)."""
    try:
        costs = json.loads(report.read_text())["cost"]["seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(costs, dict):
        return {}
    return {name: float(t) for name, t in costs.items() if isinstance(t, (int, float)) and not isinstance(t, bool)}


def seconds_at(depth: str, report: Path = REPORT, suite_cost: Path = SUITE_COST) -> dict[str, float]:
    """Each system's test seconds at ``depth``: the full-depth report's for a full run, the benchmark's
    default-depth ones for a shorter run (the report's where the benchmark has written none)."""
    return (depth != "full" and committed_seconds(suite_cost)) or committed_seconds(report)


def by_cost(items: list, system_of, seconds: dict[str, float]) -> list:
    """``items`` with each system's tests together, the costliest system first (``seconds``, else its number
    of tests, scaled so that a measured system and an unmeasured one compare), the tests of no system last;
    the collected order within a system."""
    groups: dict[str | None, list] = {}
    for item in items:
        groups.setdefault(system_of(item), []).append(item)
    counts = {name: len(members) for name, members in groups.items()}
    measured = [name for name in groups if name in seconds and counts[name]]
    per_test = sum(seconds[n] for n in measured) / sum(counts[n] for n in measured) if measured else 1.0

    def cost(name):
        return seconds.get(name, counts[name] * per_test)

    ordered = sorted((name for name in groups if name is not None), key=lambda name: -cost(name))
    return [item for name in ordered for item in groups[name]] + groups.get(None, [])


def worker_group(cls, child=None) -> str:
    """The unit of work of a test of system ``cls`` (and ``child``, a pair's other system):

    - every test of the systems that run in one kind of child process (a Keras backend other than this process's:
      ``child``'s, where it has one, else ``cls``'s) is one unit: one child start, and one in-memory JAX
      compilation cache, instead of one per worker;
    - else every test of the system is one unit: one worker builds its layers, compiles its functions and reads or
      converts its models, once. Handed out test by test, both workers ran every system, each building it, and
      from a cold cache both converted the same model at once (the conversion cache keeps the last of two
      writers; it does not make the second wait)."""
    env = (child if child is not None and child.process_env else cls).process_env
    if env:
        return "child " + "-".join(f"{k}={v}" for k, v in sorted(env.items()))
    return "system " + cls.name


def systems_of(nodeid: str, names) -> tuple[str | None, str | None]:
    """The system a test id names first (its first parameter: ``system``, or a pair's ``a-vs-b``) and a pair's
    other system, longest names first (``torch-lstm-rnn`` before ``torch-lstm``); (None, None) for none."""
    params = nodeid.partition("[")[2].removesuffix("]")
    first = next((n for n in names if params == n or params.startswith(n + "-")), None)
    if first is None:
        return None, None
    rest = params[len(first):]
    other = next((n for n in names if rest == "-vs-" + n or rest.startswith(f"-vs-{n}-")), None) \
        if rest.startswith("-vs-") else None
    return first, other


def unit_of(nodeid: str, classes: dict) -> str:
    """A test's unit of work under ``-n`` (``BySystem``), from its id alone (the controller collects nothing):
    an ``xdist_group`` mark's group where pytest-xdist wrote it into the id (``name@group``: pytest before 9.2);
    its system's (``worker_group``); else its module's (the harness's own tests, whose modules are small:
    a module's shared fixtures, and its ``xdist_group`` marks on pytest 9.2, stay on one worker)."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return "group " + nodeid.rsplit("@", 1)[1]
    names = sorted(classes, key=len, reverse=True)
    first, other = systems_of(nodeid, names)
    if first is None:
        return "module " + nodeid.partition("::")[0]
    return worker_group(classes[first], classes[other] if other else None)


def by_system(config, log, classes: dict):
    """pytest-xdist's scheduler for ``--dist loadgroup``: its load-scope scheduling, whose scope is ``unit_of``.
    Each unit goes whole to the next free worker, in the collected order (``--no-loadscope-reorder``,
    pyproject.toml: ``by_cost``'s, not xdist's by number of tests).

    Not xdist's own loadgroup: it reads a group from a suffix its workers write into each test's id, which pytest
    9.2 ignores (pytest-dev/pytest-xdist#1386, open: every test then goes out alone, silently); and a unit here
    needs no mark."""
    from xdist.scheduler import LoadScopeScheduling

    class BySystem(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid, classes)

    return BySystem(config, log)
