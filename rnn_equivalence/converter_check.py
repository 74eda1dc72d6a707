"""Check a converter of one's own over the suite's design, from a test of one's own.

    check_converter(source, convert, run, depth="default", seed=0) -> [Comparison, ...]

``source``: the system whose weights the converter reads (its name, e.g. "torch-lstm-rnn");
``convert(native, config)``: the converter under test, from the source's native weights (a dict of
NumPy arrays by the framework's names) to whatever the target takes; ``run(converted, xs, state,
config)``: the target run on them, returning the canonical results (``rnn_equivalence.reference.stack.drive``'s keys,
time-major): "output" (T, batch, D*H), every step's h (the top layer's, directions concatenated),
"h_n" (L*D, batch, H) the final states, and an LSTM's "c_output" and "c_n"; any subset of them, at
least one.

Every whole-sequence case of the source's design at ``depth`` (``rnn_equivalence.harness.cases``: shapes I != H, batch 1
and more, one step and 50, an initial state given and not, every activation and configuration the
source declares) runs in float32 and is compared with the float64 reference within the derived bound
(``rnn_equivalence.reference.tolerance``); then each mutation the source declares (its mapping deliberately broken: a
kernel transposed, gates swapped, a bias dropped) is fed through the converter, and must come out
beyond the bound: a converter that hides a broken input would pass the first check and fail this one.
A failure raises ``AssertionError`` naming the case and the worst element; nothing is skipped.
"""

from __future__ import annotations

from rnn_equivalence.reference.comparison import Comparison, compare_outputs

DTYPE = "float32"
DETECTED = 100.0  # a mutation counts as caught beyond 100 bounds (the suite's mutation tests ask the same)


def check_converter(source: str, convert, run, depth: str = "default", seed: int = 0) -> list[Comparison]:
    from rnn_equivalence.frameworks import adapter_class
    from rnn_equivalence.harness.cases import cases_for, mutation_cases

    adapter = adapter_class(source)()  # the system: its mapping and its plan (its framework not started)
    cases = cases_for(adapter, depth, seed)
    assert cases, f"{source}: no cases at depth {depth!r}"
    comparisons = [_compare(adapter, case, convert, run, f"{source} converted") for case in cases]
    for comparison in comparisons:
        assert comparison.equivalent, comparison.message()
    mutations = dict(adapter.mutations)
    assert mutations, f"{source} declares no mutations to check the converter against"
    case = mutation_cases(adapter, "quick")[0]
    for name, mutate in mutations.items():
        comparison = _compare(adapter, case, convert, run, f"{source} with {name}, converted", mutate)
        assert comparison.ratio > DETECTED, (
            f"{name}: fed through the converter, the run stays within {comparison.ratio:.3g} bounds of the "
            f"correct result: the check cannot tell this input mistake apart ({comparison.message()})")
    return comparisons


def _compare(adapter, case, convert, run, what: str, mutate=None) -> Comparison:
    native = adapter.to_native(case.stack(DTYPE), case.config)
    converted = convert(mutate(native) if mutate else native, case.config)
    actual = run(converted, case.inputs(DTYPE), case.state(DTYPE), case.config)
    if not isinstance(actual, dict) or not actual:
        raise AssertionError(f"run: expected a dict of canonical results, got {type(actual).__name__} {actual!r:.80}")
    expected, bounds = case.reference(), case.bound_vs_reference(DTYPE)
    unknown = sorted(set(actual) - set(expected))
    if unknown:
        raise AssertionError(f"run: returned {unknown}; expected keys among {sorted(expected)}")
    return compare_outputs(actual, {k: expected[k] for k in actual}, {k: bounds[k] for k in actual},
                           f"{what}, {case.describe(DTYPE)}")
