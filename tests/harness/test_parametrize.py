"""The suite's parametrisation as data (rnn_equivalence.harness.parametrize), without pytest: what a test
gets for a system, and the errors where it would get nothing."""

import pytest

from rnn_equivalence.frameworks import ADAPTERS
from rnn_equivalence.harness.cases import cases_for
from rnn_equivalence.harness.known_issues import KNOWN_ISSUES
from rnn_equivalence.harness.parametrize import (
    Request, anchored_pairs, pair_parameter_sets, paired_cases, system_parameter_sets,
)


def test_each_design_case_in_each_of_its_dtypes_is_one_set():
    cls = ADAPTERS["torch-lstm"]
    sets = system_parameter_sets(cls, Request("t", ("system", "dtype", "case")), "default", 0)
    expected = [(cls.name, dtype, case) for case in cases_for(cls, "default", 0) for dtype in case.runs_in(cls.dtypes)]
    assert [values for values, _ in sets] == expected
    assert all(row is None for _, row in sets)  # no known_issues scope asked: no row meets it


def test_a_known_issue_marks_the_sets_it_breaks_and_not_where_known_leaves_them_out():
    row = next(row for row in KNOWN_ISSUES if row.scope == "reference" and not row.option)
    cls = ADAPTERS[row.systems[0]]
    marked = system_parameter_sets(cls, Request("t", ("system", "dtype", "case"), scope="reference"), "default", 0)
    broken = [values for values, met in marked if met is row]
    assert broken, f"{row} meets none of {cls.name}'s default sets"
    left = system_parameter_sets(cls, Request("t", ("system", "dtype", "case"), scope="reference", excluded=True),
                                 "default", 0)
    assert all(met is None for _, met in left) and not set(broken) & {values for values, _ in left}


def test_nothing_for_a_system_it_applies_to_is_an_error():
    cls = ADAPTERS["torch-lstm"]  # one activation, no options: the options design has no case for it
    with pytest.raises(ValueError, match="test_x: no parameters for torch-lstm, a system it applies to"):
        system_parameter_sets(cls, Request("test_x", ("system", "case"), design="options"), "default", 0)


def test_pairs_each_cell_with_its_family_members_anchor():
    cells = [ADAPTERS[name] for name in ("torch-gru", "keras-tf-gru", "flax-linen-gru", "numpy-split")]
    assert anchored_pairs(cells) == [("torch-gru", "keras-tf-gru"), ("torch-gru", "flax-linen-gru")]
    sets = pair_parameter_sets(cells, "t", "default", 0)
    pairs = {(a, b) for a, b, _ in sets}
    assert {("torch-gru", "keras-tf-gru"), ("torch-gru", "flax-linen-gru")} <= pairs
    # A level the anchor lacks (Keras's hard sigmoid) pairs with another member that computes it.
    assert all({a, b} <= {"torch-gru", "keras-tf-gru", "flax-linen-gru"} for a, b in pairs), pairs
    assert sets == paired_cases(cells, "default", 0)


def test_a_lone_cell_makes_no_pair_and_no_error():
    assert pair_parameter_sets([ADAPTERS["torch-gru"]], "t", "default", 0) == []
