"""Every system, cell or layer, of every family: the framework's own code on mapped weights
against the float64 reference, within the derived bound (reference/tolerance.py)."""

import numpy as np
import pytest

from rnn_equivalence.engine import against_reference
from rnn_equivalence.reference.comparison import BoundExceeded, assert_dtype, assert_within_bound
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, activation_error
from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.params import CellParams


@pytest.mark.known_issues
def test_matches_float64_reference(adapter, activation_spec, dtype, case, record):
    check_reference(adapter, dtype, case, record)


@pytest.mark.applies_to(lambda cls: cls.compiles)
@pytest.mark.design("eager")
@pytest.mark.known_issues
def test_eager_run_matches_float64_reference(adapter, activation_spec, dtype, case, record):
    """A system the suite runs compiled (jax.jit, ``TestPlan.compiles``) run eagerly, as a user calling it
    without jit does: one case, at every depth."""
    adapter.set_compiled(False)
    try:
        check_reference(adapter, dtype, case, record, how=" (eager, no jax.jit)")
    finally:
        adapter.set_compiled(True)


def check_reference(adapter, dtype, case, record, how=""):
    comparison, actual = against_reference(adapter, case, dtype, how)  # the engine's check, compare's too
    level = case.activation + (f"+{case.options}" if case.options else "")
    record("reference", adapter, dtype=dtype, level=level, **comparison.as_record())
    assert_within_bound(comparison)  # first: the values are what a known issue is about
    assert_dtype(actual, dtype, adapter.describe())


@pytest.mark.applies_to(lambda cls: cls.family == "rnn" and not cls.layer)
@pytest.mark.known_issues("activation")
def test_activation_accuracy_assumed_by_the_error_model(adapter, activation_spec, dtype):
    """The error model assumes each library's g is within E_g of g (``activation_error``: 4 ulps of
    1.0 for tanh and sigmoid, 0 for relu and identity, four roundings of a|z| + b for a hard
    sigmoid). Check that on the framework's own cell: with W_hx = 1, W_hh = 0 and zero biases,
    every pre-activation is exact, so h = fl(g(x)) and its error is g's alone."""
    g = activation_spec  # a vanilla cell's spec is its one activation, the lecture's g
    x = np.linspace(-12, 12, 24001).astype(np.float32).astype(dtype)  # exact float32 grid
    params = CellParams.rnn(W_hx=np.ones((1, 1), dtype), W_hh=np.zeros((1, 1), dtype),
                            b_x=np.zeros(1, dtype), b_h=np.zeros(1, dtype), activation=g)
    actual = adapter.run(params, x.reshape(1, -1, 1))["h"][0, :, 0]
    exact = activation(g)(x.astype(np.float64))
    eps = lambda dt: 2 * UNIT_ROUNDOFF[dt]
    allowed = sum(activation_error(g, np.abs(x), UNIT_ROUNDOFF[d])
                  for d in (dtype, "float64"))  # the library's, NumPy's
    errors = np.abs(actual - exact)
    excess = np.where(allowed > 0, errors / np.where(allowed > 0, allowed, 1.0), np.where(errors > 0, np.inf, 0.0))
    worst = int(np.argmax(excess))
    error = errors[worst]
    if error > allowed[worst]:
        raise BoundExceeded(
            f"{adapter.describe()} {g} in {dtype}: error {error:.3g} = {error / eps(dtype):.2f} ulps of 1.0 at "
            f"x = {x[worst]}, the error model allows {allowed[worst]:.3g} (reference/tolerance.py: activation_error)")
