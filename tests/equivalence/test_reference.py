"""Every system, cell or layer, of every family: the framework's own code on mapped weights
against the float64 reference, within the derived bound (harness/tolerance.py)."""

import numpy as np
import pytest

from harness.compare import assert_dtype, assert_within_bound, compare_outputs
from harness.tolerance import ACTIVATION_ULPS, UNIT_ROUNDOFF
from reference.activations import activation
from reference.params import CellParams


@pytest.mark.known_issues
def test_matches_float64_reference(adapter, g, dtype, case, record):
    actual = adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    expected = adapter.arrange(case.reference(), case.config)
    bounds = adapter.arrange(case.bound_vs_reference(dtype), case.config)
    comparison = compare_outputs(actual, expected, bounds,
                                 f"{adapter.describe()} vs float64 reference, {case.describe(dtype)}")
    record("reference", adapter, dtype=dtype, **comparison.as_record())
    assert_dtype(actual, dtype, adapter.describe())
    assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: cls.family == "rnn" and not cls.layer)
@pytest.mark.known_issues("activation")
def test_activation_accuracy_assumed_by_the_error_model(adapter, g, dtype):
    """The error model assumes each library's g is within ACTIVATION_ULPS[g] ulps of 1.0
    (absolute). Check that on the framework's own cell: with W_hx = 1, W_hh = 0 and zero
    biases, every pre-activation is exact, so h = fl(g(x)) and its error is g's alone."""
    x = np.linspace(-12, 12, 24001).astype(np.float32).astype(dtype)  # exact float32 grid
    params = CellParams.rnn(W_hx=np.ones((1, 1), dtype), W_hh=np.zeros((1, 1), dtype),
                            b_x=np.zeros(1, dtype), b_h=np.zeros(1, dtype), activation=g)
    actual = adapter.run(params, x.reshape(1, -1, 1))["h"][0, :, 0]
    exact = activation(g)(x.astype(np.float64))
    eps = lambda dt: 2 * UNIT_ROUNDOFF[dt]
    allowed = ACTIVATION_ULPS[g] * (eps(dtype) + eps("float64"))  # the library's and NumPy's own
    worst = np.max(np.abs(actual - exact))
    assert worst <= allowed, (
        f"{adapter.describe()} {g} in {dtype}: max error {worst:.3g} = {worst / eps(dtype):.2f} ulps of 1.0, "
        f"the error model assumes at most {ACTIVATION_ULPS[g]} (harness/tolerance.py)"
    )
