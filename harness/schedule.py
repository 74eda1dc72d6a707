"""The order the tests run in: the costliest systems first, each system's tests together.

With two workers, a run ends when its slower worker does; a costly system met last leaves the other worker
idle. pytest-xdist hands tests out in collection order (``--dist=loadgroup``: a test, or an ``xdist_group``,
at a time), so ordering the collection by cost is what balances the workers: the costly systems are spread
first, the cheap ones fill the ends. Each system's tests stay together, in their collected order, so that a
worker reuses what it built for the system (``Adapter.built_once``) while it is still in memory.

The cost of a system is its test seconds in the committed report (``cost.seconds``, written by the run
that made it), else its number of tests; the harness's own tests, which no system names, come last.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "equivalence.json"


def committed_seconds(report: Path = REPORT) -> dict[str, float]:
    """Each system's test seconds in the committed report ({} where it has none, or no report is here)."""
    try:
        return dict(json.loads(report.read_text()).get("cost", {}).get("seconds", {}))
    except (OSError, ValueError):
        return {}


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
