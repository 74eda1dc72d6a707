"""Depth as a choice: the designs each depth asks for, over every system's factors."""

import itertools
import math

import pytest

from frameworks import ADAPTERS
from harness.cases import cases_for, factors
from harness.depth import design, uncovered_pairs
from tests.harness.test_pytest_run import run_pytest

SYSTEMS = sorted(ADAPTERS)


@pytest.mark.parametrize("name", SYSTEMS)
def test_default_depth_covers_every_pair_of_levels(name):
    levels = factors(ADAPTERS[name])
    assert uncovered_pairs(levels, design(levels, "default")) == []


@pytest.mark.parametrize("name", SYSTEMS)
def test_quick_depth_meets_every_level_and_full_depth_is_the_product(name):
    levels = factors(ADAPTERS[name])
    quick, full = design(levels, "quick"), design(levels, "full")
    for factor, values in levels.items():
        assert {id(row[factor]) for row in quick} == {id(v) for v in values}, factor
    assert len(full) == math.prod(map(len, levels.values()))
    assert len(quick) <= len(design(levels, "default")) <= len(full)


def test_uncovered_pairs_sees_a_missing_pair():
    levels = {"a": (0, 1), "b": ("x", "y")}
    rows = [dict(zip(levels, combo)) for combo in itertools.product(*levels.values())][:-1]
    assert uncovered_pairs(levels, rows) == [(("a", 1), ("b", 1))]


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_system_has_the_same_factors_and_at_least_six_cases_by_default(name):
    cls = ADAPTERS[name]
    assert set(factors(cls)) == {"activation", "options", "config", "shape", "batch", "steps", "initial_state"}
    cases = cases_for(cls, "default")
    assert len(cases) >= 6, [str(c) for c in cases]
    shapes = {(c.input_size, c.hidden_size) for c in cases}
    assert any(i > h for i, h in shapes) and any(i < h for i, h in shapes)
    # An initial state given and omitted, where the system takes one (frameworks/plan.py: initial_states).
    assert {c.batch for c in cases} >= {1, 3} and {c.config.initial_state for c in cases} == set(cls.initial_states)
    assert min(c.steps for c in cases) == 1 and max(c.steps for c in cases) == min(50, cls.max_steps or 50)


def test_a_seed_draws_other_data_for_the_same_design():
    cls = ADAPTERS["torch-lstm"]
    a, b = cases_for(cls, "default", seed=0), cases_for(cls, "default", seed=1)
    assert [c.with_(seed=0) for c in a] == [c.with_(seed=0) for c in b]
    assert not (a[0].inputs() == b[0].inputs()).all()


def test_unknown_depth_is_refused():
    """The option's choices are argparse's; the environment variable is checked by conftest."""
    with pytest.raises(ValueError, match=r"depth: expected one of \('quick', 'default', 'full'\), got 'deep'"):
        design({"a": (1,)}, "deep")
    code, out = run_pytest("tests/reference/test_params.py", "-q", env={"RNN_EQ_DEPTH": "deep"})
    assert code == pytest.ExitCode.USAGE_ERROR and "RNN_EQ_DEPTH: expected one of quick, default, full" in out, out


def test_depth_and_seed_are_in_the_header():
    code, out = run_pytest("--depth=quick", "tests/reference/test_params.py", env={"RNN_EQ_SEED": "7"})
    assert code == pytest.ExitCode.OK, out
    assert "rnn-equivalence: depth quick, seed 7" in out
