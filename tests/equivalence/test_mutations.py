"""The suite can fail: each adapter's deliberately wrong mappings are caught.

A mutation rewrites the adapter's native weights the way a wrong mapping
would (a transposed kernel, swapped kernels, a dropped or doubled bias, the
wrong concatenation order). On the square case the shapes still fit, so only
the values can give it away; on the non-square case the adapter may instead
refuse the shapes, which also counts as caught, provided the error names the
framework's own parameter.
"""

import pytest

from harness.cases import MUTATION_CASES
from harness.compare import compare


@pytest.mark.parametrize("case", MUTATION_CASES, ids=str)
def test_wrong_mapping_is_detected(adapter, mutation, case, record):
    dtype = "float32"
    g = "tanh"
    params, xs, h0 = case.params(dtype), case.inputs(dtype), case.h0(dtype)
    wrong = adapter.mutations[mutation](adapter.to_native(params))
    try:
        actual = adapter.run_native(wrong, xs, h0, g)
    except ValueError as error:
        assert "expected shape" in str(error), error
        assert case.input_size != case.hidden_size, f"a square case must be caught by value: {error}"
        record("mutation", adapter, mutation=mutation, detected=True, by="shape check")
        return
    comparison = compare(actual, case.reference(g), case.bound_vs_reference(g, dtype),
                         f"{adapter.describe()} with mutation '{mutation}', {case.describe(g, dtype)}")
    record("mutation", adapter, mutation=mutation, detected=not comparison.equivalent, by="values",
           ratio=comparison.ratio)
    assert not comparison.equivalent, f"mutation '{mutation}' went undetected: {comparison.message()}"
    # A wrong mapping is not a rounding effect: it exceeds the bound by orders of magnitude.
    assert comparison.ratio > 100, comparison.message()
