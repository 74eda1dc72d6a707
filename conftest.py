"""Suite-wide pytest hooks, in pytest's order: options, configuration, report header,
parametrisation over the selected frameworks, and fixtures. The equivalence summary
is a plugin of its own, ``rnn_equivalence.harness.summary.Summary``.

No framework is imported here: adapters import theirs when a test first needs it.
"""

from __future__ import annotations

import os
import platform

import pytest

# Before anything can import Keras or TensorFlow: the backend, the log level, one thread per library pool
# (rnn_equivalence.harness.environment; the engine sets the same), inherited by the workers and their children.
from rnn_equivalence.harness.environment import prepare_process  # noqa: E402

prepare_process()

from rnn_equivalence.frameworks import ADAPTERS, adapter_class, load  # noqa: E402  (imports no framework)
from rnn_equivalence.frameworks import conversion_cache  # noqa: E402  (NumPy only)
from rnn_equivalence.harness import reference_cache  # noqa: E402  (NumPy only)
from rnn_equivalence.frameworks.base import distribution_version  # noqa: E402
from rnn_equivalence.harness import selection as selection_mod  # noqa: E402
from rnn_equivalence.harness import schedule, shards  # noqa: E402
from rnn_equivalence.harness import parametrize  # noqa: E402
from rnn_equivalence.reference.comparison import BoundExceeded, KnownIssueObserved  # noqa: E402
from rnn_equivalence.harness.depth import DEPTHS, factor_design  # noqa: E402
from rnn_equivalence.harness.known_issues import KNOWN_ISSUES, shows_as  # noqa: E402
from rnn_equivalence.harness.summary import Summary  # noqa: E402

pytest_plugins = ["rnn_equivalence.harness.records"]  # a failing test is a record; the ``record`` fixture

SELECTION = pytest.StashKey[selection_mod.Selection]()
SHARD = pytest.StashKey[tuple]()  # (K, N), or None: the whole run
DESIGN = pytest.StashKey[tuple]()  # (depth, seed)
DEPTH_VAR, SEED_VAR = "RNN_EQ_DEPTH", "RNN_EQ_SEED"


def pytest_addoption(parser):
    parser.addoption(
        "--systems", "--frameworks", dest="systems", default=None, metavar="NAMES",
        help=f"comma-separated systems to test (default: ${selection_mod.ENV_VAR} or ${selection_mod.OLD_ENV_VAR}, "
             "else all); --frameworks is the older spelling. "
             "A framework named here that fails to import is an error, not a skip.",
    )
    parser.addoption(
        "--depth", default=None, choices=DEPTHS,
        help=f"which combinations of the factors each system is compared on (default: ${DEPTH_VAR}, else "
             "'default'): quick, every level once; default, every pair of levels; full, the whole product",
    )
    parser.addoption(
        "--seed", default=None, type=int, metavar="N",
        help=f"offsets every case's seed: other weights and data for the same design (default: ${SEED_VAR}, else 0)",
    )
    parser.addoption(
        "--shard", default=None, metavar="K/N",
        help="run part K of N of the selected tests (rnn_equivalence.harness.shards: disjoint, the same on every "
             "machine); with --equivalence-report=DIR it writes DIR/part-K-of-N.json, merged by: "
             "python -m rnn_equivalence.harness.shards merge",
    )
    parser.addoption(
        "--no-conversion-cache", action="store_true", default=False,
        help=f"convert every converted system's model afresh: neither read nor write the cache of converted models "
             f"kept across runs (rnn_equivalence.frameworks.conversion_cache; also ${conversion_cache.OFF_VAR}=1; "
             f"its directory: ${conversion_cache.CACHE_VAR}, else the user's cache directory)",
    )
    parser.addoption(
        "--no-reference-cache", action="store_true", default=False,
        help=f"compute every case's reference results and bounds afresh: neither read nor write the cache of them "
             f"kept across runs (rnn_equivalence.harness.reference_cache; also ${reference_cache.OFF_VAR}=1; its "
             f"directory: ${reference_cache.CACHE_VAR}, else the user's cache directory)",
    )
    parser.addoption(
        "--equivalence-summary", default="compact", choices=("compact", "full"),
        help="the summary at the end of the run: compact, one line per framework, each finding and known issue "
             "once (default); full, the table per system and dtype (the report file has it too)",
    )
    parser.addoption(
        "--equivalence-report", default=None, metavar="DIR",
        help="write the run's equivalence report to DIR/equivalence.json and DIR/EQUIVALENCE.md",
    )


def pytest_configure(config):
    try:
        selection = selection_mod.select(config.getoption("systems"), os.environ)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[SELECTION] = selection
    depth = config.getoption("--depth") or os.environ.get(DEPTH_VAR, "default")
    if depth not in DEPTHS:
        raise pytest.UsageError(f"{DEPTH_VAR}: expected one of {', '.join(DEPTHS)}, got {depth!r}")
    seed = config.getoption("--seed")
    try:
        seed = int(os.environ.get(SEED_VAR, "0")) if seed is None else seed
    except ValueError:
        raise pytest.UsageError(f"{SEED_VAR}: expected an integer, got {os.environ[SEED_VAR]!r}") from None
    config.stash[DESIGN] = (depth, seed)
    try:
        config.stash[SHARD] = shards.parse(config.getoption("--shard")) if config.getoption("--shard") else None
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    config.addinivalue_line(
        "markers",
        "applies_to(predicate, short_of_full=None): generate the test only for the systems whose adapter class "
        "satisfies predicate(cls); short of full depth, short_of_full(cls) where given, or none where it is False "
        "(the test runs at full depth only) (a coverage decision of rnn_equivalence.harness.depth)",
    )
    config.addinivalue_line(
        "markers",
        "factors(**levels): a test of the reference or the machinery parametrised over the combinations of its "
        "factors that the run's depth asks for (rnn_equivalence.harness.depth.factor_design); each keyword names "
        "a factor's arguments (comma-separated), its value the levels (a tuple per level for several arguments, "
        "pytest.param for an id)",
    )
    config.addinivalue_line(
        "markers",
        "by_depth(argnames, default=levels, full=levels): a test's own runs chosen by the run's depth, a "
        "parametrisation (never a skip): full depth runs ``full``'s levels, quick and default ``default``'s",
    )
    config.addinivalue_line(
        "markers",
        "environment(session, module): a test of a tool with no system, run in its nox session or where ``module`` is "
        "installed, deselected elsewhere (rnn_equivalence.harness.selection.tested_here)",
    )
    config.addinivalue_line(
        "markers",
        "pair_with_source: the test compares an exported model with its source (Adapter.compare_with); "
        "a failure belongs to that pair's row",
    )
    config.addinivalue_line(
        "markers",
        f"design(name): the cases a test's ``case`` comes from, one of {sorted(parametrize.DESIGNS)} (default 'whole')",
    )
    config.addinivalue_line(
        "markers",
        "known_issues(scope='reference'): run the systems' known upstream bugs (rnn_equivalence.harness.known_issues) "
        "in this scope as strict xfails",
    )
    config.addinivalue_line(
        "markers",
        "not_where_known: generate the test only where no known upstream bug (rnn_equivalence.harness.known_issues) "
        "applies",
    )
    config.addinivalue_line(
        "markers",
        "known_issue(row): the row of rnn_equivalence.harness.known_issues a strict xfail stands for "
        "(set by the parametrisation)",
    )
    cache = _conversion_cache(config)
    _reference_cache(config)
    if not hasattr(config, "workerinput"):  # xdist workers only forward their reports
        _share_jax_compilations(config)
        summary = Summary(report_dir=config.getoption("--equivalence-report"), names=selection.names, depth=depth,
                          seed=seed, mode=config.getoption("--equivalence-summary"))
        summary.shard = config.stash[SHARD]
        summary.conversion_cache = str(cache) if cache else ""
        config.pluginmanager.register(summary, "rnn-equivalence-summary")
        from rnn_equivalence.harness.records import ReportWriter  # registered by pytest_plugins first: not here

        config.pluginmanager.register(ReportWriter(summary), "rnn-equivalence-report")
    if selection.missing_is_error:
        _fail_fast_on_missing(selection)


def _share_jax_compilations(config):
    """One JAX compilation cache for this run's processes, empty at its start and removed at its end.

    JAX compiles every operation afresh for each shape and dtype, in every process:
    each xdist worker, and each worker's Keras-on-JAX child. With a cache shared for
    the run, a kernel compiled in one is loaded by the others (the same executable,
    so the same arithmetic). Set here, on the controller, before workers start, so
    that they and their children inherit it. A cache the user set is left alone.
    """
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="rnn-equivalence-jax-cache-")
    os.environ.update({"JAX_COMPILATION_CACHE_DIR": directory,
                       "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                       "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"})
    config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


def _conversion_cache(config):
    """The directory of the converted models kept across runs (``rnn_equivalence.frameworks.conversion_cache``),
    checked before any test, or None where ``--no-conversion-cache`` or the environment turns it off."""
    return _cache(config, "--no-conversion-cache", conversion_cache)


def _reference_cache(config):
    """The directory of the references and bounds kept across runs (``rnn_equivalence.harness.reference_cache``),
    likewise, or None where ``--no-reference-cache`` or the environment turns it off."""
    return _cache(config, "--no-reference-cache", reference_cache)


def _cache(config, option: str, cache):
    """A cache module's directory, checked; the option passed on as its environment variable, which the workers
    and their children inherit (and read). An unusable directory is a usage error, before any test runs."""
    if config.getoption(option):
        os.environ[cache.OFF_VAR] = "1"
    try:
        return cache.check_cache_directory()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def _fail_fast_on_missing(selection):
    """A module that is not installed at all is reported before any test runs."""
    missing = selection_mod.uninstalled_modules(selection.names)
    if missing:
        reason = "CI=true" if selection.ci else "they were requested explicitly"
        listing = ", ".join(f"{name!r} needs {module!r}" for name, module in missing)
        raise pytest.UsageError(
            f"frameworks not installed: {listing}; this is an error because {reason} "
            "(install everything with: pip install -e '.[all,test]')"
        )


def pytest_report_header(config):
    selection = config.stash[SELECTION]
    versions = {"python": platform.python_version(), "numpy": distribution_version("numpy")}
    for name in selection.names:
        for dist in adapter_class(name).distributions:
            versions[dist] = distribution_version(dist)
    policy = "error" if selection.missing_is_error else "skip with reason"
    cache, references = conversion_cache.cache_directory(), reference_cache.cache_directory()
    return [
        "rnn-equivalence: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"rnn-equivalence: frameworks {', '.join(selection.names)}; "
        f"KERAS_BACKEND={os.environ['KERAS_BACKEND']}; missing framework -> {policy}",
        f"rnn-equivalence: platform {platform.platform()}, {platform.machine()}",
        "rnn-equivalence: depth {}, seed {}".format(*config.stash[DESIGN]),
        f"rnn-equivalence: converted models cached in {cache}" if cache else
        f"rnn-equivalence: conversion cache off (--no-conversion-cache or {conversion_cache.OFF_VAR}=1)",
        f"rnn-equivalence: references and bounds cached in {references}" if references else
        f"rnn-equivalence: reference cache off (--no-reference-cache or {reference_cache.OFF_VAR}=1)",
    ]


def pytest_generate_tests(metafunc):
    """Give each system x activation x dtype x case its own test id, only where the system applies: the
    parameter sets of ``rnn_equivalence.harness.parametrize``, read from the test's arguments and markers.

    ``system`` (any adapter) may come with ``activation_spec`` (rnn_equivalence.reference.params: a vanilla
    cell's g, a gated cell's "f,g,h" or "f,g", "default" for its defaults), ``dtype``, ``case`` (its design:
    the ``design(name)`` marker, whole sequences by default), ``mutation_case`` and ``mutation`` (a
    deliberately wrong mapping the system declares). ``applies_to(predicate)`` keeps the systems whose
    class attributes make the test apply; ``known_issues(scope)`` lets the known upstream bugs of that scope
    meet it (strict expected failures), ``not_where_known`` leaves the cases they break out.
    ``system_pair`` pairs each selected cell with the anchor of its family member.
    """
    names = metafunc.config.stash[SELECTION].names
    depth, seed = metafunc.config.stash[DESIGN]
    fixtures, definition = metafunc.fixturenames, metafunc.definition
    only = definition.get_closest_marker("applies_to")
    classes = parametrize.applicable(parametrize.predicate_at(only, depth), names, definition.nodeid)
    if "system" in fixtures:
        excluded = definition.get_closest_marker("not_where_known") is not None
        marker = definition.get_closest_marker("known_issues")
        scope = (marker.args[0] if marker and marker.args else "reference") if marker or excluded else None
        chosen = definition.get_closest_marker("design")
        request = parametrize.Request(definition.nodeid, tuple(a for a in parametrize.ARGUMENTS if a in fixtures),
                                      chosen.args[0] if chosen else "whole", scope, excluded)
        metafunc.parametrize(request.arguments, [
            _with_known_issue(cls, values, row)
            for cls in classes for values, row in parametrize.system_parameter_sets(cls, request, depth, seed)])
    by_depth = definition.get_closest_marker("by_depth")
    if by_depth is not None:
        levels = list(by_depth.kwargs["full" if depth == "full" else "default"])
        if not levels:
            raise pytest.UsageError(f"{definition.nodeid}: by_depth gives no levels at depth {depth}")
        metafunc.parametrize(by_depth.args[0], levels)
    factors = definition.get_closest_marker("factors")
    if factors is not None:
        metafunc.parametrize(",".join(factors.kwargs), _factor_parameter_sets(factors.kwargs, depth))
    if "system_pair" in fixtures:
        metafunc.parametrize(("system_pair", "pair_case"), [
            pytest.param((a, b), case, id=f"{a}-vs-{b}-{case.activation}-{case}")
            for a, b, case in parametrize.pair_parameter_sets(classes, definition.nodeid, depth, seed)])


def _factor_parameter_sets(levels: dict, depth: str) -> list:
    """A ``factors`` marker's parameter sets at ``depth``: one per row of its design, the ids of its levels
    joined."""
    from _pytest.mark import ParameterSet

    def level(names, value, i):
        if isinstance(value, ParameterSet):
            return value.values, value.id if value.id is not None else str(i)
        values = tuple(value) if "," in names else (value,)
        return values, "-".join(map(str, values))

    rows = factor_design({names: tuple(range(len(values))) for names, values in levels.items()}, depth)
    sets = []
    for row in rows:
        parts = [level(names, levels[names][i], i) for names, i in row.items()]
        sets.append(pytest.param(*(v for values, _ in parts for v in values), id="-".join(i for _, i in parts)))
    return sets


def _with_known_issue(cls, values, row):
    """A parameter set, marked as a strict expected failure where a row of the known issues meets it:
    satisfied only by an exceeded bound, or by the error the row says the bug raises."""
    test_id = "-".join(str(v) for v in values if v is not None).replace(" ", "_")
    marks = []
    if row is not None:
        raises = (BoundExceeded, KnownIssueObserved) if row.shows_as else BoundExceeded
        marks = [pytest.mark.xfail(strict=True, raises=raises, reason=row.reason), pytest.mark.known_issue(row)]
        _MATCHED_ROWS.add(KNOWN_ISSUES.index(row))
    return pytest.param(*values, id=test_id, marks=marks)


# Indices of the rows of KNOWN_ISSUES some generated test met, in this process: written where
# $RNN_EQ_KNOWN_ISSUES_MET names a file, for tests/harness/test_known_issues.py (a stale row is an error).
_MATCHED_ROWS: set[int] = set()
MET_VAR = "RNN_EQ_KNOWN_ISSUES_MET"


def pytest_collection_finish(session):
    path = os.environ.get(MET_VAR)
    if path:
        import json

        with open(path, "w") as out:
            json.dump(sorted(_MATCHED_ROWS), out)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A known bug that shows as the framework's error (``KnownIssue.shows_as``) fails the test with
    ``KnownIssueObserved``, the one error besides an exceeded bound that its strict xfail accepts."""
    marker = pyfuncitem.get_closest_marker("known_issue")
    try:
        return (yield)
    except Exception as error:
        if marker is not None and shows_as(marker.args[0], error):
            raise KnownIssueObserved(f"{marker.args[0].cause}: observed as {type(error).__name__}: {error}") from error
        raise


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without xdist
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` with ``--dist loadgroup`` (pyproject.toml), each system's tests are one unit of work, handed
    out in the collected order, the costliest first (rnn_equivalence.harness.schedule.by_system)."""
    if config.getoption("dist") == "loadgroup":
        return schedule.by_system(config, log, ADAPTERS)


def pytest_collection_modifyitems(config, items):
    """Deselect, rather than skip, tests that no selected framework applies to, and, in a sharded run,
    the other parts' tests.

    A run of one framework would otherwise list every cell test as "skipped" when
    only layers were selected. Skips are kept for what users must see: a missing
    framework.
    """
    empty = [item for item in items if any(
        m.name == "skip" and str(m.kwargs.get("reason", "")).startswith("got empty parameter set")
        for m in item.iter_markers())]
    # A tool with no system, in its own environment (the marker ``environment``): elsewhere deselected, as a
    # session system's tests are in a run that does not name it.
    empty += [item for item in items if any(
        not selection_mod.tested_here(*m.args, os.environ) for m in item.iter_markers("environment"))]
    shard = config.stash[SHARD]
    if shard:  # the other parts' tests (rnn_equivalence.harness.shards)
        k, n = shard
        empty += [item for item in items if shards.part_of(item.nodeid, n) != k]
    dropped = {id(item) for item in empty}
    if dropped:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
        items[:] = [item for item in items if id(item) not in dropped]
    # The costliest systems first, each system's tests together (rnn_equivalence.harness.schedule), each
    # system's tests one unit of work under -n (pytest_xdist_make_scheduler): the workers finish together.
    items[:] = schedule.by_cost(items, _system_of_item, schedule.seconds_at(config.stash[DESIGN][0]))


def pytest_runtest_teardown(item, nextitem):
    """A worker done with a system (its tests run together: rnn_equivalence.harness.schedule) lets go of what it
    built for it (``Adapter.built_once``: layers, compiled functions, converted models' runtimes), so that
    memory holds one system's objects at a time, not every system's of a long run."""
    system = _system_of_item(item)
    if system and (nextitem is None or _system_of_item(nextitem) != system):
        adapter = _LOADED.get(system)
        if adapter is not None and not isinstance(adapter, ImportError):
            adapter.release()  # in its child process too, where its framework runs there


def _system_of_item(item):
    """The system a collected test is about (the first of a pair), or None (the harness's own tests)."""
    from rnn_equivalence.harness.records import _systems

    return _systems(getattr(getattr(item, "callspec", None), "params", {}), item)[0]


_LOADED = {}


def require_selected(config, name):
    """Skip, with that reason, a test about ``name`` when the run does not select it; fail one about a
    system that does not exist (a renamed system would otherwise turn its tests into skips)."""
    if name not in ADAPTERS:
        pytest.fail(f"unknown system {name!r}; expected one of {', '.join(ADAPTERS)}", pytrace=False)
    if name not in config.stash[SELECTION].names:
        pytest.skip(f"system {name!r} is not selected (--systems / {selection_mod.ENV_VAR})")


def load_adapter(config, name):
    """The adapter for ``name``, loaded once per process; a missing framework skips or fails."""
    require_selected(config, name)
    if name not in _LOADED:
        try:
            _LOADED[name] = load(name)
        except ImportError as error:
            _LOADED[name] = error
    adapter = _LOADED[name]
    if isinstance(adapter, ImportError):
        selection = config.stash[SELECTION]
        if selection.missing_is_error:
            why = "CI=true" if selection.ci else "it was requested explicitly"
            pytest.fail(f"{adapter} (an error, not a skip, because {why})", pytrace=False)
        pytest.skip(f"framework {name!r} not available: {adapter}")
    return adapter


@pytest.fixture
def adapter(request, system):
    return load_adapter(request.config, system)


@pytest.fixture
def adapters(request, system_pair):
    return tuple(load_adapter(request.config, name) for name in system_pair)


@pytest.fixture
def require_system(request):
    """Skip, with the reason, unless the run selects a system (a child run about that system)."""
    return lambda name: require_selected(request.config, name)


@pytest.fixture
def load_system(request):
    """Load another system by name (a pair's partner, a non-equivalence's other side)."""
    return lambda name: load_adapter(request.config, name)


@pytest.fixture
def depth(request) -> str:
    """The run's depth (quick, default, full), for a test that chooses its own runs by it."""
    return request.config.stash[DESIGN][0]


@pytest.fixture
def design_seed(request) -> int:
    """The run's seed, for a test that runs cases of the run's design itself (whose converted models the
    design's tests share)."""
    return request.config.stash[DESIGN][1]
