"""Suite-wide pytest hooks, in pytest's order: options, configuration, report header,
parametrisation over the selected frameworks, and fixtures. The equivalence summary
is a plugin of its own, ``harness.summary.Summary``.

No framework is imported here: adapters import theirs when a test first needs it.
"""

from __future__ import annotations

import itertools
import os
import platform

import pytest

# Before anything can import Keras or TensorFlow: Keras 3 fixes its backend at
# import, and TensorFlow's C++ start-up chatter drowns the test output.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from frameworks import adapter_class, load  # noqa: E402  (imports no framework)
from frameworks.base import distribution_version  # noqa: E402
from harness import selection as selection_mod  # noqa: E402
from harness.cases import cases_for, mutation_cases, pair_cases  # noqa: E402
from harness.summary import Summary  # noqa: E402

pytest_plugins = ["harness.records"]  # a failing test is a record; the ``record`` fixture

SELECTION = pytest.StashKey[selection_mod.Selection]()


def pytest_addoption(parser):
    parser.addoption(
        "--frameworks", default=None, metavar="NAMES",
        help=f"comma-separated frameworks to test (default: ${selection_mod.ENV_VAR}, else all). "
             "A framework named here that fails to import is an error, not a skip.",
    )
    parser.addoption(
        "--equivalence-report", default=None, metavar="DIR",
        help="write the run's equivalence report to DIR/equivalence.json and DIR/EQUIVALENCE.md",
    )


def pytest_configure(config):
    try:
        selection = selection_mod.select(config.getoption("--frameworks"), os.environ)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[SELECTION] = selection
    config.addinivalue_line(
        "markers",
        "applies_to(predicate): generate the test only for the systems whose adapter class satisfies predicate(cls)",
    )
    config.addinivalue_line(
        "markers",
        "known_issues(scope='reference'): run the adapters' known upstream bugs (Adapter.known_issues) "
        "in this scope as strict xfails",
    )
    if not hasattr(config, "workerinput"):  # xdist workers only forward their reports
        _share_jax_compilations(config)
        config.pluginmanager.register(
            Summary(report_dir=config.getoption("--equivalence-report"), names=selection.names),
            "rnn-equivalence-summary")
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
    return [
        "rnn-equivalence: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        f"rnn-equivalence: frameworks {', '.join(selection.names)}; "
        f"KERAS_BACKEND={os.environ['KERAS_BACKEND']}; missing framework -> {policy}",
        f"rnn-equivalence: platform {platform.platform()}, {platform.machine()}",
    ]


def pytest_generate_tests(metafunc):
    """Give each system x activation x dtype x case its own test id, only where the system applies.

    ``system`` (any adapter) may come with ``g`` (activation, "default" for a gated cell),
    ``dtype``, ``case`` (``harness.cases.cases_for``: the system's shapes and configurations),
    ``mutation_case`` and ``mutation`` (a deliberately wrong mapping the system declares).
    ``applies_to(predicate)`` keeps the systems whose class attributes make the test apply.
    ``system_pair`` pairs each selected cell with the anchor of its family member.
    """
    names = metafunc.config.stash[SELECTION].names
    fixtures = metafunc.fixturenames
    if "system" in fixtures:
        argnames = [a for a in ("system", "g", "dtype", "case", "mutation_case", "mutation") if a in fixtures]
        marker = metafunc.definition.get_closest_marker("known_issues")
        scope = marker.args[0] if marker and marker.args else "reference"
        combos = []
        for cls in applicable(metafunc, names):
            known = cls.known_issues if marker and scope in cls.known_issue_scopes else {}
            for g in cls.activations if {"g", "case"} & set(argnames) else [None]:
                axes = {"system": [cls.name], "g": [g], "dtype": cls.dtypes,
                        "case": cases_for(cls, g) if "case" in argnames else [None],
                        "mutation_case": mutation_cases(cls) if "mutation_case" in argnames else [None],
                        "mutation": list(cls.mutations)}
                combos += [_with_known_issue(cls, known, dict(zip(argnames, c)), c)
                           for c in itertools.product(*(axes[a] for a in argnames))]
        metafunc.parametrize(argnames, combos)
    if "system_pair" in fixtures:
        combos = [pytest.param((a, b), case, id=f"{a}-vs-{b}-{case.activation}-{case}")
                  for a, b in anchored_pairs([cls for cls in applicable(metafunc, names) if not cls.layer])
                  for case in pair_cases(adapter_class(a), adapter_class(b))]
        metafunc.parametrize(("system_pair", "pair_case"), combos)


def applicable(metafunc, names):
    """The selected adapter classes the test's ``applies_to`` predicate admits."""
    only = metafunc.definition.get_closest_marker("applies_to")
    classes = [adapter_class(name) for name in names]
    return [cls for cls in classes if only is None or only.args[0](cls)]


def anchored_pairs(classes):
    """Every cell against one anchor of the same family member (PyTorch's where selected, whose
    layout is the canonical one), not every pair: each is already within its bound of the
    reference, and n - 1 pairs show the same thing as n (n - 1) / 2 in a table one can read."""
    pairs, groups = [], {}
    for cls in classes:
        groups.setdefault((cls.family, cls.variant), []).append(cls.name)
    for members in groups.values():
        anchor = next((name for name in members if name.startswith("torch")), members[0])
        pairs += [(anchor, name) for name in members if name != anchor]
    return pairs


def _with_known_issue(cls, known, named, values):
    """A parameter set, marked as a strict expected failure where the adapter knows an upstream bug."""
    test_id = "-".join(str(v) for v in values if v is not None).replace(" ", "_")
    reason = known.get((named.get("g"), named.get("dtype")))
    marks = [pytest.mark.xfail(strict=True, raises=cls.known_issue_raises, reason=reason)] if reason else []
    return pytest.param(*values, id=test_id, marks=marks)


def pytest_collection_modifyitems(config, items):
    """Deselect, rather than skip, tests that no selected framework applies to.

    A run of one framework would otherwise list every cell test as "skipped" when
    only layers were selected. Skips are kept for what users must see: a missing
    framework.
    """
    empty = [item for item in items if any(
        m.name == "skip" and str(m.kwargs.get("reason", "")).startswith("got empty parameter set")
        for m in item.iter_markers())]
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = [item for item in items if item not in empty]


_LOADED = {}


def require_selected(config, name):
    """Skip, with that reason, a test about ``name`` when the run does not select it."""
    if name not in config.stash[SELECTION].names:
        pytest.skip(f"framework {name!r} is not selected (--frameworks / {selection_mod.ENV_VAR})")


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
