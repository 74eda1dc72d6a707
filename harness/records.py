"""What each test contributes to the equivalence summary, attached to its report.

A plugin of every process (pytest-xdist workers run the tests): the ``record``
fixture attaches one result per comparison to the test's report
(``user_properties``, which xdist carries to the controller), and a failing
test becomes a record too, so the summary (``rnn_equivalence.harness.summary``) can never call a
system equivalent when its tests failed. Each report also carries the converted models its phase
read from the conversion cache or converted (``rnn_equivalence.frameworks.conversion_cache``), for the summary's count.
"""

from __future__ import annotations

import pytest

from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.frameworks.conversion_cache import take_counts
from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.report import write
from rnn_equivalence.harness.shards import write_part
from rnn_equivalence.harness.reference_cache import take_counts as take_reference_counts
from rnn_equivalence.harness.summary import CONVERSIONS, COST, PROPERTY, REFERENCES, peak_rss_gib


def family_of(system: str) -> str:
    """The summary's group of a system: "rnn", "lstm", "gru (reset_after)"."""
    cls = adapter_class(system)
    return cls.family + (f" ({cls.variant})" if cls.variant else "")


def _systems(params: dict, item=None):
    """(system, other or None) of a test: the system, or the two sides of a pair (a ``system_pair``,
    or an exported model and the system it came from, for a test marked ``pair_with_source``)."""
    pair = params.get("system_pair")
    if pair:
        return pair[0], pair[1]
    system = params.get("system")
    if system and item is not None and item.get_closest_marker("pair_with_source"):
        return system, adapter_class(system).compare_with
    return system, None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    params = getattr(getattr(item, "callspec", None), "params", {})
    system, other = _systems(params, item)
    # A module whose records are another function's (``RECORD_DTYPE = "qint8"``: tests/equivalence/test_quantized_*.py)
    # has its failures in the report's int8 section, not on the system's float32 row; a test of it without a
    # ``system`` parameter (one that loads its systems itself) fails there too, under no system.
    module_dtype = getattr(getattr(item, "module", None), "RECORD_DTYPE", None)
    if report.failed and (system or module_dtype):
        crash = getattr(report.longrepr, "reprcrash", None)  # the exception's own message, if pytest kept it
        message = crash.message if crash else (report.longreprtext.strip().splitlines() or [""])[-1]
        message = " ".join(message.split())
        report.user_properties.append((PROPERTY, {
            "kind": "failure", "system": system or "", "pair": other is not None,
            "family": family_of(system) if system else "", **({"other": other} if other else {}),
            "dtype": params.get("dtype") or module_dtype or "float32", "test": item.nodeid,
            "message": message[:300]}))
    # What the phase cost, by the system it tests (the test module for the harness's own tests): the
    # summary's seconds per framework, the report's per system.
    report.user_properties.append((COST, {"system": system or item.module.__name__, "seconds": report.duration}))
    # This process's conversions since the last report, on this phase's report alone (a report's
    # user_properties are its own copy), so that the controller adds each once.
    counts = take_counts()
    if system and any(counts.values()):  # the harness's own tests of the cache (a fake converter) count nothing
        report.user_properties.append((CONVERSIONS, {**counts, "system": system}))
    references = take_reference_counts()
    if any(references.values()):
        report.user_properties.append((REFERENCES, references))
    return report


def expected_failure(node):
    """The ``xfail`` marker that applies to ``node``, or None: one whose condition is false expects nothing (a
    saturating CPU's, tests/equivalence/test_quantized_onnx.py, on a CPU with VNNI), and its test's records are
    no known issue's."""
    marker = node.get_closest_marker("xfail")
    if marker is None:
        return None
    condition = marker.args[0] if marker.args else marker.kwargs.get("condition", True)
    return marker if condition else None


def expectation(node) -> tuple[bool, str | None]:
    """What a test expects to fail by: (a row of the known-issues table, which marks its tests ``known_issue``
    (conftest.py): listed under the table, its measurements kept out of the worst ratio; the reason of the test's
    own expected failure, an int8 module's where this CPU's kernel saturates: its records carry it, for the int8
    section), or (False, None) where nothing applies (``expected_failure``)."""
    known = expected_failure(node)
    if known is None:
        return False, None
    if node.get_closest_marker("known_issue") is not None:
        return True, None
    return False, known.kwargs.get("reason", "")


@pytest.fixture
def record(request):
    """``record(kind, adapter, **fields)``: attach a result to this test's report, for the summary."""
    known = expected_failure(request.node)
    table_row, own_reason = expectation(request.node)
    if table_row:
        params = request.node.callspec.params
        system = _systems(params)[0]
        request.node.user_properties.append((PROPERTY, {
            "kind": "known", "system": system, "family": family_of(system), "dtype": params["dtype"],
            "known_issue": known.kwargs["reason"]}))

    def record(kind, adapter, **fields):
        versions = ", ".join(f"{k} {v}" for k, v in adapter.versions().items())
        family = family_of(adapter.name)
        dtype = fields.get("dtype")  # a half row computed in float32 within each op says so (``arithmetic_of``)
        if dtype and arithmetic_of(adapter, dtype) != dtype:
            fields = {**fields, "arithmetic": arithmetic_of(adapter, dtype)}
        # A known upstream bug's measurement is kept, marked, out of the verdict's worst ratio.
        marked = {"known": True} if table_row else {"known_issue": own_reason} if own_reason is not None else {}
        request.node.user_properties.append(
            (PROPERTY, {"kind": kind, "system": adapter.name, "cell": adapter.describe(), "versions": versions,
                        "family": family, **fields, **marked}))

    return record


def pytest_sessionfinish(session):
    """An xdist worker hands its peak memory to the controller (``Summary.pytest_testnodedown``)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["rnn_equivalence_peak_rss"] = peak_rss_gib()


class ReportWriter:
    """A pytest plugin, registered on the controller beside ``Summary`` (conftest.py): at the end of the run,
    the summary's report written to ``--equivalence-report=DIR``, or, in a sharded run, its part
    (``rnn_equivalence.harness.shards``). Apart from ``Summary``, which gathers and prints and writes nothing,
    so that the summary sits below the report and the shards that read it."""

    def __init__(self, summary):
        self.summary = summary

    @pytest.hookimpl(trylast=True)  # after the summary's table
    def pytest_terminal_summary(self, terminalreporter) -> None:
        summary = self.summary
        if summary.report_dir and summary.shard:
            where = write_part(summary, summary.report_dir)
            terminalreporter.write_line(f"equivalence report part: {where} (merge the parts: python -m "
                                        f"rnn_equivalence.harness.shards merge DIR/part-*.json --output DIR)")
        elif summary.report_dir:
            where = write(summary, summary.names, summary.report_dir)
            terminalreporter.write_line(f"equivalence report: {where / 'EQUIVALENCE.md'}, {where / 'equivalence.json'}")
