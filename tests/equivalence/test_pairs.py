"""Frameworks against each other, not only against the reference."""

import pytest

from harness.cases import CASES
from harness.compare import assert_within_bound, compare
from harness.tolerance import pair_bound

PAIR_CASES = (CASES[1], CASES[3])  # 50 steps and the widest shape


@pytest.mark.parametrize("g", ["tanh", "relu"])  # the activations every framework supports
@pytest.mark.parametrize("case", PAIR_CASES, ids=str)
def test_frameworks_agree_with_each_other(adapters, g, case, record):
    a, b = adapters
    dtype = "float32"
    params, xs, h0 = case.params(dtype), case.inputs(dtype), case.h0(dtype)
    bound = pair_bound(case.bound(g, dtype), case.bound(g, dtype))
    comparison = compare(a.run(params, xs, h0, g), b.run(params, xs, h0, g), bound,
                         f"{a.describe()} vs {b.describe()}, {case.describe(g, dtype)}")
    record("pair", a, other=b.name, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)
