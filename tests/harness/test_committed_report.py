"""The committed report (docs/EQUIVALENCE.md, docs/equivalence.json) is the citeable result:
it must cover every system the suite tests, so adding an adapter without regenerating fails here.

Regenerate on the project's machine with:
    CI=true pytest -n auto --depth=full --equivalence-report=docs tests/reference tests/equivalence
(--depth=full: about 13 minutes on 2 cores; or in parts, harness/shards.py)
"""

import json
from pathlib import Path

import pytest

from rnn_equivalence.frameworks import ADAPTERS, adapter_class
from rnn_equivalence.compare import pinned_only

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "equivalence.json"
MAIN = {name for name in ADAPTERS if not adapter_class(name).environment}
ELSEWHERE = {}  # nox session -> its systems (Adapter.environment): reported in docs/environments/<session>/
for _name in sorted(set(ADAPTERS) - MAIN):
    ELSEWHERE.setdefault(adapter_class(_name).environment, set()).add(_name)


def test_committed_report_lists_every_system():
    report = json.loads(REPORT.read_text())
    listed = {s["system"] for s in report["systems"]}
    missing, extra = MAIN - listed, listed - MAIN
    assert not missing and not extra, (
        f"docs/equivalence.json is stale: missing {sorted(missing)}, no longer tested {sorted(extra)}; "
        "regenerate with: CI=true pytest -n auto --depth=full --equivalence-report=docs "
        "tests/reference tests/equivalence")
    assert ({session: sorted(names) for session, names in ELSEWHERE.items()}
            == {session: sorted(names) for session, names in report.get("elsewhere", {}).items()})


@pytest.mark.parametrize("session", sorted(ELSEWHERE))
def test_each_environment_of_its_own_has_its_full_report(session):
    """The systems of a tool that lives in its own environment (a nox session): its committed report lists
    every one of them, at full depth, and names the tool's version. Besides them, only the sources they are
    compared with (``compare_with``: the torch-programs session runs PyTorch's layers too)."""
    report = json.loads((ROOT / "docs" / "environments" / session / "equivalence.json").read_text())
    assert report["depth"] == "full"
    listed = {s["system"] for s in report["systems"]}
    sources = {adapter_class(name).compare_with for name in ELSEWHERE[session]} - {None}
    assert ELSEWHERE[session] <= listed <= ELSEWHERE[session] | sources, (listed, ELSEWHERE[session])
    assert all(s["versions"] for s in report["systems"])


def test_committed_report_is_valid_and_all_verdicts_are_explained():
    jsonschema = pytest.importorskip("jsonschema")
    report = json.loads(REPORT.read_text())
    schema = json.loads((ROOT / "docs" / "equivalence-report.schema.json").read_text())
    jsonschema.validate(report, schema, format_checker=jsonschema.FormatChecker())
    # Full depth (--depth=full) is the citeable design.
    assert report["depth"] == "full", "the committed report is the full design's"
    for row in report["systems"]:
        # UNPROVEN only where the wrong mappings not caught are those the system pins as below that half
        # format's bound (TestPlan.mutations_within_bound): explained, and said by compare and the README.
        if pinned_only(adapter_class(row["system"]), row):
            continue
        assert row["verdict"] in ("equivalent", "NOT equivalent where noted below"), row
        assert row["verdict"] == "equivalent" or row["known_issues"], row
