"""The one comparison helper: measured error against the bound from ``rnn_equivalence.reference.tolerance``;
and two parameter stacks' references against each other (``compare_references``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rnn_equivalence.reference.formats import numpy_dtype
from rnn_equivalence.reference.tolerance import pair_bound, reference_and_bound


class BoundExceeded(AssertionError):
    """A comparison outside its derived bound: the one failure a known upstream bug's strict expected
    failure accepts (rnn_equivalence.harness.known_issues), so that no other assertion can stand in for the bug."""


class KnownIssueObserved(AssertionError):
    """A known upstream bug that shows as an error of the framework (``KnownIssue.shows_as``), seen."""


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing ``actual`` with ``expected`` under an elementwise ``bound``."""

    what: str  # e.g. "torch.nn.RNNCell vs float64 reference, rnn g=tanh I=3 H=4 batch=2 T=50 float32 seed=0"
    max_error: float  # max |actual - expected|
    ratio: float  # max over elements of |actual - expected| / bound; <= 1 means within bound
    error_at_worst: float  # the error and bound at the element where the ratio peaks
    bound_at_worst: float
    worst_index: tuple[int, ...]

    @property
    def equivalent(self) -> bool:
        return self.ratio <= 1.0

    def message(self) -> str:
        verdict = "within" if self.equivalent else "EXCEEDS"
        return (
            f"{self.what}: max |error| {self.max_error:.3g}; worst element {self.worst_index} has "
            f"error {self.error_at_worst:.3g} vs bound {self.bound_at_worst:.3g} "
            f"(ratio {self.ratio:.3g}, {verdict} the bound of reference/tolerance.py)"
        )

    def as_record(self) -> dict:
        return {**asdict(self), "worst_index": list(self.worst_index)}


def compare(actual, expected, bound, what: str) -> Comparison:
    actual, expected, bound = (np.asarray(a, np.float64) for a in (actual, expected, bound))
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape} differs from the expected {expected.shape}")
    error = np.abs(actual - expected)
    error = np.where(np.isnan(error), np.inf, error)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(error == 0, 0.0, error / bound)
    worst = np.unravel_index(int(np.argmax(ratios)), ratios.shape) if ratios.size else ()
    return Comparison(
        what=what,
        max_error=float(error.max(initial=0.0)),
        ratio=float(ratios.max(initial=0.0)),
        error_at_worst=float(error[worst]) if ratios.size else 0.0,
        bound_at_worst=float(bound[worst]) if ratios.size else 0.0,
        worst_index=tuple(int(i) for i in worst),
    )


def assert_within_bound(comparison: Comparison) -> None:
    __tracebackhide__ = True
    if not comparison.equivalent:
        raise BoundExceeded(comparison.message())


def assert_bitwise_equal(actual, expected, what: str) -> None:
    """Identical values, shapes and dtypes (strict), for cases where every partial sum is exact."""
    __tracebackhide__ = True
    np.testing.assert_array_equal(actual, expected, err_msg=f"{what}: expected bitwise equality", strict=True)


def compare_outputs(actual: dict, expected: dict, bounds: dict, what: str) -> Comparison:
    """Every output a system returns against the expected one (same names, shapes); the worst comparison."""
    __tracebackhide__ = True
    if sorted(actual) != sorted(expected):
        raise AssertionError(f"{what}: the system returned outputs {sorted(actual)}, expected {sorted(expected)}")
    comparisons = [compare(actual[key], expected[key], bounds[key], f"{what}, output {key!r}") for key in expected]
    return max(comparisons, key=lambda c: np.inf if np.isnan(c.ratio) else c.ratio)  # NaN: the worst, not dropped


def assert_dtype(actual: dict, dtype: str, who: str) -> None:
    """Every output in the dtype the system was asked to compute in."""
    __tracebackhide__ = True
    wrong = {key: str(value.dtype) for key, value in actual.items() if value.dtype != numpy_dtype(dtype)}
    if wrong:
        raise AssertionError(f"{who} returned {wrong}, not {dtype}")


def compare_references(stack_a, stack_b, xs, state, dtype: str, what: str, padding=None) -> Comparison:
    """Two parameter stacks' reference outputs against each other: |ref(a) - ref(b)| against
    bound_a + bound_b in ``dtype`` (each the reference's own rounding in that dtype), the worst output.
    Either stack may be its (reference, bound) already computed, for a module compared with many.
    ``padding``: a padded batch's lengths (``rnn_equivalence.reference.padding.Padding``), padded steps
    reported as zeros on both sides (the function on the real steps is what is compared)."""
    exact_a, bound_a = stack_a if isinstance(stack_a, tuple) else \
        reference_and_bound(stack_a, xs, state, dtype, padding=padding)
    exact_b, bound_b = stack_b if isinstance(stack_b, tuple) else \
        reference_and_bound(stack_b, xs, state, dtype, padding=padding)
    return compare_outputs(exact_b, exact_a, pair_bound(bound_a, bound_b), what)
