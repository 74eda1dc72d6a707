"""The table of known upstream bugs (rnn_equivalence.harness.known_issues) and the tests that cannot pass on nothing.

- every row of the table meets at least one generated test (a stale row is an error, as
  array-api-tests does for its xfail file);
- a strict expected failure made from a row accepts only the bug's symptom: an exceeded bound
  (``BoundExceeded``) or the error the row names, never another assertion;
- every ``applies_to`` predicate admits a system, every system declares mutations, and a test that
  names a system that does not exist fails instead of being skipped.
"""

import json

import pytest

from rnn_equivalence.frameworks import ADAPTERS
from rnn_equivalence.reference.comparison import BoundExceeded, KnownIssueObserved
from rnn_equivalence.harness.known_issues import KNOWN_ISSUES, SCOPES, KnownIssue, shows_as
from tests.harness.test_pytest_run import run_pytest


def test_every_row_names_existing_systems_and_a_scope():
    assert KNOWN_ISSUES
    for row in KNOWN_ISSUES:
        assert row.systems and set(row.systems) <= set(ADAPTERS), row.systems
        assert row.scope in SCOPES and row.cause and row.link, row


def test_every_row_meets_a_generated_test(tmp_path):
    """Collect the whole suite at default depth (the README's run: where every row must show) for
    every system, and ask the parametrisation which rows it used: each row must be one of them."""
    met = tmp_path / "met.json"
    code, out = run_pytest("--collect-only", "-q", "--depth=default", "-o", "addopts=", "tests/equivalence",
                           env={"RNN_EQ_KNOWN_ISSUES_MET": str(met)})
    assert code == 0, out[-3000:]
    used = set(json.loads(met.read_text()))
    # A row about systems of a nox session of their own alone (MLX's) is met in that session's run, where its
    # strict expected failures run: the main environment's collection leaves those systems out.
    elsewhere = {i for i, row in enumerate(KNOWN_ISSUES) if all(ADAPTERS[n].environment for n in row.systems)}
    stale = [KNOWN_ISSUES[i] for i in range(len(KNOWN_ISSUES)) if i not in used | elsewhere]
    assert not stale, f"rows of rnn_equivalence.harness.known_issues that match no generated test: {stale}"


def test_a_known_issue_is_satisfied_only_by_its_symptom():
    """The marks the parametrisation gives a test a row meets: strict, raising BoundExceeded alone, or with
    KnownIssueObserved where the row names the error the bug raises."""
    from conftest import _with_known_issue

    cls = ADAPTERS["keras-jax-rnn"]
    assert KNOWN_ISSUES, "the known-issues table is empty: nothing to check"
    for row in KNOWN_ISSUES:
        marks = {m.name: m for m in _with_known_issue(cls, ("keras-jax-rnn", "float64"), row).marks}
        xfail = marks["xfail"]
        assert xfail.kwargs["strict"] is True
        expected = (BoundExceeded, KnownIssueObserved) if row.shows_as else BoundExceeded
        assert xfail.kwargs["raises"] == expected, row
        # A plain assertion (a mapping's own mistake) is not the symptom: it must not satisfy the xfail.
        assert not isinstance(AssertionError("a plain assertion"), xfail.kwargs["raises"]), row


def test_an_error_the_row_does_not_name_is_not_the_bug():
    row = KnownIssue(("keras-jax-rnn",), "reference", "cause", "link", shows_as=r"^TypeError: .*carry")
    assert shows_as(row, TypeError("the scan refuses the float32 carry"))
    assert shows_as(row, TypeError("Exception encountered\n\nthe float32 carry"))  # messages span lines
    assert not shows_as(row, ValueError("the scan refuses the float32 carry"))
    assert not shows_as(row, TypeError("unsupported operand"))
    assert not shows_as(KnownIssue(("keras-jax",), "reference", "c", "l"), TypeError("carry"))


def test_every_system_declares_mutations():
    """A system with no mutation could pass its equivalence tests with a wrong mapping unproven."""
    assert not [name for name, cls in ADAPTERS.items() if not cls.mutations]


def test_applies_to_that_admits_no_system_is_an_error():
    """A predicate that admits none of the systems (a renamed one) fails collection instead of vanishing."""
    from rnn_equivalence.harness.parametrize import applicable

    assert [cls.name for cls in applicable(lambda cls: cls.name == "torch-lstm", list(ADAPTERS), "t")] == ["torch-lstm"]
    assert applicable(lambda cls: cls.name == "torch-lstm", ["torch"], "t") == []  # not selected: fine
    with pytest.raises(ValueError,
                       match=f"test_x: its applies_to predicate admits none of the {len(ADAPTERS)} systems"):
        applicable(lambda cls: cls.name == "torch-lstmm", list(ADAPTERS), "test_x")


def test_a_test_naming_an_unknown_system_fails(load_system):
    with pytest.raises(pytest.fail.Exception, match="unknown system 'torch-lstmm'"):
        load_system("torch-lstmm")



def test_every_system_name_is_written_where_it_is_defined():
    """A search for a failing test's system name lands on its definition: the name, as a string literal,
    in the module that defines the system (no name computed from pieces)."""
    import inspect
    import sys

    computed = [name for name, cls in ADAPTERS.items()
                if f'"{name}"' not in inspect.getsource(sys.modules[cls.__module__])]
    assert not computed, computed
