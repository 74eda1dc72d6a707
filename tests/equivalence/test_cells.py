"""Every framework's own cell, loaded with the same weights, against the float64 reference."""

import numpy as np
import pytest

from harness.cases import CASES
from harness.compare import assert_within_bound, compare


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hidden_states_match_float64_reference(adapter, g, dtype, case, record):
    actual = adapter.run(case.params(dtype), case.inputs(dtype), case.h0(dtype), g)

    assert actual.shape == (case.steps, case.batch, case.hidden_size)
    assert actual.dtype == np.dtype(dtype), f"{adapter.cell} returned {actual.dtype}, not {dtype}"
    comparison = compare(actual, case.reference(g), case.bound_vs_reference(g, dtype),
                         f"{adapter.describe()} vs float64 reference, {case.describe(g, dtype)}")
    record("reference", adapter, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)

