"""No test that cannot fail: deliberately wrong mappings are caught, for every system.

A mutation rewrites the adapter's native weights the way a wrong mapping
would (a transposed kernel, swapped kernels or gates or directions or layers,
a dropped or doubled bias, the wrong concatenation order). On the square case
the shapes still fit, so only the values can give it away; on the non-square
case the adapter may instead refuse the shapes, which also counts as caught,
provided the error names the framework's own parameter.
"""

from harness.compare import compare_outputs

ORDERS_OF_MAGNITUDE = 100  # a wrong mapping is not a rounding effect


def test_wrong_mapping_is_detected(adapter, mutation, mutation_case, record):
    case, dtype = mutation_case, "float32"
    wrong = adapter.mutations[mutation](adapter.to_native(case.stack(dtype), case.config))
    what = f"{adapter.describe()} with mutation '{mutation}', {case.describe(dtype)}"
    try:
        actual = adapter.run_native(wrong, case.inputs(dtype), case.state(dtype), case.config, case.stack().activation)
    except ValueError as error:
        assert "expected shape" in str(error), error
        assert case.input_size != case.hidden_size, f"a square case must be caught by value: {error}"
        record("mutation", adapter, mutation=mutation, detected=True, by="shape check")
        return
    comparison = compare_outputs(actual, adapter.arrange(case.reference(), case.config),
                                 adapter.arrange(case.bound_vs_reference(dtype), case.config), what)
    record("mutation", adapter, mutation=mutation, detected=not comparison.equivalent, by="values",
           ratio=comparison.ratio)
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, f"mutation went undetected: {comparison.message()}"
