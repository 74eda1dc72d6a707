"""The engine without pytest: a system's forward cases planned, run and judged against the derived bounds, as
plain functions, and the run's report in the shape ``pytest --equivalence-report`` writes
(``rnn_equivalence.harness.report``), so that ``rnn-equivalence compare`` answers from an installed package,
which has no tests/.

    report(["numpy-concat", "numpy-split"], depth="quick", seed=0) -> dict  # equivalence.json's shape

What it runs is what tests/equivalence/test_reference.py runs, nothing more: every case of each system's
whole-sequence design at the depth and seed, in the dtypes the design gives it (``rnn_equivalence.harness.
parametrize``: the parameter sets the suite's parametrisation gives ``test_matches_float64_reference``),
run by the system's framework on the mapped canonical weights and compared with the float64 reference within
the derived bound (``rnn_equivalence.reference.comparison``); and the one case a system run compiled
(jax.jit) also runs eagerly. The known upstream bugs (``rnn_equivalence.harness.known_issues``) meet the same
cases as in the suite and are judged as its strict expected failures are: a case a row covers that exceeds
its bound, or raises the row's error, is a known-issue case; one that passes is a failure (fixed upstream?).

What only the full suite runs (pytest tests/): padded batches, chunked runs, options changed or dropped,
gradients and optimizer steps, the systems' pairs, the proved non-equivalences, the bitwise integer case,
the wrong mappings (mutations) each system must catch, the activations' own accuracy. The engine's report
has no cases in those columns and no non-equivalences.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rnn_equivalence.frameworks import adapter_class, load
from rnn_equivalence.frameworks.conversion_cache import take_counts
from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.cases import Case
from rnn_equivalence.harness.environment import prepare_process
from rnn_equivalence.harness.known_issues import KnownIssue, shows_as
from rnn_equivalence.harness.parametrize import Request, system_parameter_sets
from rnn_equivalence.harness.report import build
from rnn_equivalence.harness.selection import uninstalled_modules
from rnn_equivalence.harness.summary import Summary, peak_rss_gib
from rnn_equivalence.reference.comparison import BoundExceeded, Comparison, assert_dtype, compare_outputs
from rnn_equivalence.reference.formats import dtype_text

# test_reference.py's two tests: whole sequences, and a compiled system's eager run.
DESIGNS = ("whole", "eager")
ARGUMENTS = ("system", "activation_spec", "dtype", "case")  # what those tests take, in the suite's order


class Unavailable(RuntimeError):
    """What a run needs is not installed here: a system's framework, or the default depth's design generator."""


@dataclass(frozen=True)
class ForwardCase:
    """One run of a system: a case of a design in one dtype, and the known upstream bug that breaks it (None)."""

    system: str
    design: str
    dtype: str
    case: Case
    known: KnownIssue | None

    @property
    def id(self) -> str:
        """The suite's id of the same parameter set (conftest.py's), under the design's name."""
        return f"{self.design}[{self.system}-{self.case.activation}-{self.dtype}-{self.case}]".replace(" ", "_")


def plan(name: str, depth: str = "quick", seed: int = 0) -> list[ForwardCase]:
    """The forward cases of system ``name`` at ``depth`` and ``seed``, as the suite's parametrisation makes them."""
    cls = adapter_class(name)
    planned = []
    for design in DESIGNS if cls.compiles else DESIGNS[:1]:
        request = Request(f"rnn_equivalence.engine {design}", ARGUMENTS, design, scope="reference")
        try:
            sets = system_parameter_sets(cls, request, depth, seed)
        except ImportError as error:  # allpairspy, the default depth's covering designs: the test extra
            raise Unavailable(f"depth {depth} needs {error.name or error} (pip install allpairspy)") from None
        planned += [ForwardCase(name, design, dtype, case, row) for (_, _, dtype, case), row in sets]
    return planned


def start(names) -> dict:
    """Each system's adapter with its framework started (a Keras backend other than this process's runs in a
    child process: ``frameworks.load``); Unavailable, naming what is missing, before any case runs."""
    prepare_process()  # as the suite's processes are: the same backend, thread pools and log level
    missing = uninstalled_modules(names)
    if missing:
        raise Unavailable("not installed: " + ", ".join(
            f"{name} needs the module {module!r} (distributions: {', '.join(adapter_class(name).distributions)})"
            for name, module in missing))
    adapters = {}
    for name in names:
        try:
            adapters[name] = load(name)
        except ImportError as error:  # installed, but it does not import
            raise Unavailable(f"{name}: {error}") from None
    return adapters


def run_case(adapter, planned: ForwardCase) -> tuple[Comparison, dict]:
    """The framework's outputs on the case's mapped weights against the float64 reference, within the bound of
    reference/tolerance.py (test_reference.py's ``check_reference``): the worst output's comparison, and the
    outputs."""
    eager = planned.design == "eager"
    if eager:
        adapter.set_compiled(False)
    try:
        return against_reference(adapter, planned.case, planned.dtype, " (eager, no jax.jit)" if eager else "")
    finally:
        if eager:
            adapter.set_compiled(True)


def against_reference(adapter, case: Case, dtype: str, how: str = "") -> tuple[Comparison, dict]:
    """The system run on the case's mapped weights, each output against the float64 reference within its bound:
    the worst output's comparison, and the outputs. The one forward check, the engine's and the suite's."""
    actual = adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    expected = adapter.arrange(case.reference(dtype), case.config)
    arithmetic = arithmetic_of(adapter, dtype)  # a half format computed in float32 within each op: that bound
    bounds = adapter.arrange(case.bound_vs_reference(arithmetic), case.config)
    what = f"{adapter.describe()}{how} vs float64 reference, {case.describe(dtype_text(dtype, arithmetic))}"
    return compare_outputs(actual, expected, bounds, what), actual


def judge(adapter, planned: ForwardCase) -> tuple[str, list[dict]]:
    """The case run and judged as the suite judges it: its outcome (``harness.summary.OUTCOMES``: passed,
    failed, xfailed) and the records the suite's summary gets for it (``harness.records``)."""
    row = planned.known
    cls = adapter_class(planned.system)
    about = {"system": planned.system, "dtype": planned.dtype, "family": cls.family + (
        f" ({cls.variant})" if cls.variant else "")}  # harness.records.family_of's, which imports pytest
    if arithmetic_of(cls, planned.dtype) != planned.dtype:  # harness.records' record's
        about["arithmetic"] = arithmetic_of(cls, planned.dtype)
    records = [{"kind": "known", **about, "known_issue": row.reason}] if row else []

    def failed(message: str) -> tuple[str, list[dict]]:
        return "failed", records + [{"kind": "failure", **about, "pair": False, "test": f"engine::{planned.id}",
                                     "message": " ".join(message.split())[:300]}]

    try:
        comparison, actual = run_case(adapter, planned)
    except Exception as error:  # the framework refused or broke: a known bug's symptom where its row says so
        return ("xfailed", records) if row and shows_as(row, error) else failed(f"{type(error).__name__}: {error}")
    case = planned.case
    records.append({"kind": "reference", **about, "cell": adapter.describe(),
                    "versions": ", ".join(f"{k} {v}" for k, v in adapter.versions().items()),
                    "level": case.activation + (f"+{case.options}" if case.options else ""),
                    **comparison.as_record(), **({"known": True} if row else {})})
    if not comparison.equivalent:  # the values first: they are what a known issue is about
        return ("xfailed", records) if row else failed(f"{BoundExceeded.__name__}: {comparison.message()}")
    try:
        assert_dtype(actual, planned.dtype, adapter.describe())
    except AssertionError as error:
        return failed(f"AssertionError: {error}")
    # A strict expected failure that passes fails: the row no longer describes what the framework does.
    return failed(f"[XPASS(strict)] {row.reason}") if row else ("passed", records)


def report(names, depth: str = "quick", seed: int = 0) -> dict:
    """The forward runs of ``names`` at ``depth`` and ``seed``, as the report ``pytest --equivalence-report``
    writes (its "systems" rows, verdicts, outcomes, environment), built by the same code from the same records."""
    names = tuple(dict.fromkeys(names))
    planned = {name: plan(name, depth, seed) for name in names}  # every refusal before any framework starts
    adapters = start(names)
    summary = Summary(names=names, depth=depth, seed=seed)
    began = time.monotonic()
    for name in names:
        started = time.monotonic()
        try:
            for forward in planned[name]:
                outcome, records = judge(adapters[name], forward)
                summary.outcomes[outcome] += 1
                for record in records:
                    summary.add(record)
        finally:
            adapters[name].release()  # one system's built objects in memory at a time, as in the suite
        summary.seconds[name] = time.monotonic() - started
        summary.add_conversions({**take_counts(), "system": name})
    summary.wall_seconds = time.monotonic() - began
    summary.peak_rss["main"] = peak_rss_gib()
    # The suite's run of the same rows, in a checkout (the report's schema asks for a pytest command).
    command = (f"pytest tests/equivalence/test_reference.py --systems={','.join(names)} --depth={depth} "
               f"--seed={seed}")
    return build(summary, names, command)
