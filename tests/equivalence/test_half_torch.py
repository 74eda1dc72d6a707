"""PyTorch in float16 and bfloat16 (issue 37), measured where the designs do not reach.

The designs run the PyTorch systems in both half formats like float32 (test_reference.py, test_padded.py,
test_mutations.py: frameworks/plan.py, CAPABILITY_DTYPES), from the case's data rounded to the format and
judged by the bound of the arithmetic PyTorch runs (``TestPlan.arithmetic``: float32 within each operation, each
result stored in half; reference/tolerance.py's mixed policy). Here:

- that bound is the stronger claim, and not a decorative one: PyTorch's runs are within the bound of a computation
  in half throughout (every product and partial sum rounded) too, which is wider everywhere; and a computation in
  half throughout (``rnn_equivalence.reference.precision.Rounded``) exceeds the bound of PyTorch's arithmetic
  on a case where PyTorch does not;
- a half bound is needed: a float16 run, judged by the float32 bound of the same data, exceeds it;
- pytorch/pytorch#175845 (an LSTM in float16 against float32, relative L2 error 4.1e-4 on CUDA): measured
  on CPU, within the derived bound;
- overflow: a pre-activation past float16's 65504, where ``overflow`` says every float16 computation
  overflows: relu passes PyTorch's inf on, tanh saturates it to the right answer.
"""

import numpy as np
import pytest

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.cases import case_of, stagnating_cell
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.reference.formats import HALF_FORMATS, finfo, numpy_dtype, round_to
from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.precision import run_rounded
from rnn_equivalence.reference.tolerance import overflow, pair_bound, reference_and_bound


def runs_in_float16(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.pytorch" and "float16" in cls.dtypes


def runs_in_half(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.pytorch" and set(HALF_FORMATS) <= set(cls.dtypes)


def judged(adapter, case, dtype, bound_dtype):
    """The system run in ``dtype`` on the case's data in that format, against the float64 reference of that
    data within the bound of ``bound_dtype`` (plus the reference's own)."""
    actual = adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    # the case's reference and bound of that data (computed once, kept: harness/reference_cache.py)
    exact, bound = case.reference(dtype), case.bound_vs_reference(bound_dtype, data=dtype)
    return compare_outputs(actual, adapter.arrange(exact, case.config), adapter.arrange(bound, case.config),
                           f"{adapter.describe()} in {dtype} vs float64 reference within the {bound_dtype} bound, "
                           f"{case.describe(dtype)}")


@pytest.mark.applies_to(lambda cls: runs_in_float16(cls))  # a lambda: pytest takes a named function for the test
def test_float16_run_exceeds_the_float32_bound(adapter):
    """Judged by the float32 bound of the same (float16) data, a float16 run of 50 steps is far out (98 to
    300 times the bound, torch 2.13.0): a half bound is what makes it pass, not a loose comparison."""
    case = case_of(adapter, 7, 5, 3, 50, 3, adapter.configs[-1] if adapter.layer else CELL)
    comparison = judged(adapter, case, "float16", "float32")
    assert comparison.ratio > 10, comparison.message()  # measured: 98 to 300 times
    assert_within_bound(judged(adapter, case, "float16", arithmetic_of(adapter, "float16")))


@pytest.mark.applies_to(lambda cls: runs_in_half(cls))
@pytest.mark.parametrize("half", HALF_FORMATS)
def test_within_the_bound_of_half_throughout_too(adapter, half):
    """The weaker claim holds too: a 50-step run of the richest configuration, judged by the bound of its
    arithmetic (float32 within each op), is within the bound of a computation in half throughout, which is at least
    as wide everywhere (some 4 to 5 times on these cases)."""
    case = case_of(adapter, 7, 5, 3, 50, 4, adapter.configs[-1] if adapter.layer else CELL)
    arithmetic = arithmetic_of(adapter, half)
    assert arithmetic != half, f"{adapter.name} declares no arithmetic of its own for {half}"
    own, throughout = judged(adapter, case, half, arithmetic), judged(adapter, case, half, half)
    assert_within_bound(own)
    assert_within_bound(throughout)
    for key, bound in case.bound(arithmetic).items():
        assert np.all(bound <= case.bound(half)[key]), key
    assert own.ratio > throughout.ratio  # the bound of the arithmetic is the tighter one


@pytest.mark.applies_to(lambda cls: cls.name in ("torch", "torch-rnn"))
@pytest.mark.parametrize("half", HALF_FORMATS)
def test_the_bound_of_float32_within_each_op_tells_half_throughout_apart(adapter, half):
    """The bound PyTorch's half rows are judged by is that of its arithmetic, not a decoration: on a cell whose
    one sum loses every small term when added up in the format (``stagnating_cell``), a computation in half
    throughout (``Rounded``, every partial sum rounded) is within the bound of half throughout, and exceeds the
    bound of float32 within each op, which PyTorch, accumulating each linear in float32, meets exactly. A system
    that claimed float32 within each op and computed in half throughout would be named."""
    params, xs = stagnating_cell(half)
    exact, mixed = reference_and_bound(params, xs, None, arithmetic_of(adapter, half))
    _, throughout = reference_and_bound(params, xs, None, half)
    rounded = run_rounded(params, xs, None, half)
    error = np.abs(rounded["output"] - exact["output"])
    assert np.all(error <= throughout["output"]), (error, throughout["output"])
    # measured: 78 (float16) and 14 (bfloat16) times the one bound, 0.20 and 0.072 of the other
    assert np.all(error > 10 * mixed["output"]), (error, mixed["output"])
    config = LayerConfig(1, False, options=(("batch_first", False),)) if adapter.layer else CELL
    actual = adapter.run(params.astype(numpy_dtype(half)), xs.astype(numpy_dtype(half)), None, config)
    h = actual["output" if adapter.layer else "h"].astype(np.float64)
    assert np.array_equal(h, exact["output"]), (h, exact["output"])


# pytorch/pytorch#175845: an LSTM in fp16 against fp32, relative L2 error 4.1e-4 on CUDA.
@pytest.mark.applies_to(lambda cls: cls.name == "torch-lstm-rnn")
def test_pytorch_175845_fp16_lstm_relative_l2_error(adapter):
    """Reproduced on CPU: nn.LSTM (I = 8, H = 16, batch 4, 50 steps) in float16 against the same module in
    float32 on the same float16 data: relative L2 error 6.0e-4 (torch 2.13.0; 5.4e-4 with 2 layers and H = 32;
    u = 2**-11 = 4.9e-4: float16's own rounding, not a bug), every element within the derived bounds (float16's
    plus float32's), and the float16 run within its bound of the float64 reference (err/bound 0.11 of the bound of
    float32 within each op, PyTorch's arithmetic; 0.013 of the bound of half throughout; i and f swapped in weight_hh
    make them 18.9 and 1.85)."""
    case = case_of(adapter, 8, 16, 4, 50, 175845, LayerConfig(1, False, options=(("batch_first", False),)))
    half = adapter.run(case.stack("float16"), case.inputs("float16"), case.state("float16"), case.config)
    stack, xs, state = case.exact_data("float16")
    single = adapter.run(stack.astype(np.float32), xs.astype(np.float32),
                         None if state is None else {k: v.astype(np.float32) for k, v in state.items()}, case.config)
    h16, h32 = half["output"].astype(np.float64), single["output"].astype(np.float64)
    relative_l2 = np.linalg.norm(h16 - h32) / np.linalg.norm(h32)
    bound = pair_bound(case.bound(arithmetic_of(adapter, "float16")),
                       reference_and_bound(stack, xs, state, "float32")[1])
    allowed = adapter.arrange(bound, case.config)
    comparison = compare_outputs(half, {k: v.astype(np.float64) for k, v in single.items()}, allowed,
                                 f"{adapter.describe()} float16 vs float32 (pytorch#175845), "
                                 f"{case.describe('float16')}")
    assert_within_bound(comparison)
    assert 1e-4 < relative_l2 < 2e-3, relative_l2  # the thread's 4.1e-4, to within its order of magnitude
    assert_within_bound(compare_outputs(  # and the float16 run is itself the reference's, within its bound
        half, adapter.arrange(case.reference("float16"), case.config),
        adapter.arrange(case.bound_vs_reference(arithmetic_of(adapter, "float16")), case.config),
        f"{adapter.describe()} float16 vs float64 reference, {case.describe('float16')}"))


def overflowing_cell(g: str) -> CellParams:
    """A vanilla cell whose pre-activation reaches some 1.6e5 on inputs near 1: every weight of W_x about
    3e4 (a float16 value), below 65504 itself."""
    params = CellParams.random("rnn", 7, 5, 37, activation=g)
    return params.replace(W_x=round_to(np.abs(params.W_x) / np.abs(params.W_x) * 3e4, "float16")).rounded_to("float16")


@pytest.mark.applies_to(lambda cls: cls.name in ("torch", "torch-rnn"))
@pytest.mark.parametrize("g", ["relu", "tanh"])
def test_float16_overflow_where_the_reference_says_it_must(adapter, g):
    """``overflow`` says every float16 computation of this case overflows (|W_x x| > 65504 on positive
    inputs). PyTorch accumulates each linear in float32 and rounds the result to float16: inf. relu passes
    it on (inf, then nan where W_hh meets infs of both signs) wherever the exact output is past 65504; tanh
    turns it into 1, which is the exact result rounded (tanh(1e5) = 1): no inf or nan comes out."""
    params = overflowing_cell(g)
    xs = round_to(np.random.default_rng(3).uniform(0.5, 1.0, (3, 2, 7)), "float16")
    verdict = overflow(params, xs, None, "float16")
    assert verdict.certain and verdict.largest > finfo("float16").max, verdict
    assert not overflow(params, xs, None, "float32").possible
    config = LayerConfig(1, False, options=(("batch_first", False),)) if adapter.layer else CELL
    actual = adapter.run(params.astype(np.float16), xs.astype(np.float16), None, config)
    h = actual["output" if adapter.layer else "h"].astype(np.float64)
    exact, _ = reference_and_bound(params, xs, None, "float64")
    past = np.abs(exact["output"]) > finfo("float16").max
    if g == "relu":
        assert past.any() and not np.any(np.isfinite(h[past])), (h, exact["output"])
    else:
        assert np.all(np.isfinite(h)) and np.array_equal(h, np.sign(exact["output"])), (h, exact["output"])


# --- gradients in half: PyTorch's autograd in float16 and bfloat16 --------------------------------------------
HALF_GRADIENT_STEPS = 3  # the backward bound compounds over the steps like the forward's; over 3 it stays honest
MUTATION_STEPS = 1  # the wrong ways back: a bias's gradient is a sum whose bound nears its value as steps add up


def half_gradient_cases(adapter) -> list:
    """Three short cases, the system's configurations in turn (every one for a layer: 3), each with an initial
    state (its gradient is checked too)."""
    from dataclasses import replace

    return [case_of(adapter, 3, 6, 3, HALF_GRADIENT_STEPS, 900 + k,
                    replace(adapter.configs[k % len(adapter.configs)], initial_state=True),
                    activation=adapter.activations[k % len(adapter.activations)]) for k in range(3)]


def half_gradients(adapter, case, half: str, bound_dtype: str | None = None):
    """PyTorch's gradients of the suite's loss (harness/gradients.py) in ``half``, on the case's data and cotangents
    rounded to it, against the float64 backward pass of that data within the bound of ``bound_dtype`` (default: the
    arithmetic PyTorch runs ``half`` in, ``arithmetic_of``), plus the reference's own: (comparison, native
    gradients, cotangents, expected, bounds)."""
    from rnn_equivalence.harness.gradients import flatten, reference_gradients

    cotangents, expected, bounds = reference_gradients(adapter, case, half, bound_dtype)
    stack, state = case.stack(half), case.state(half)
    native = adapter.to_native(stack, case.config)
    result = adapter.gradients_native(native, case.inputs(half), state, case.config, stack.activation, cotangents)
    params = adapter.gradients_from_native(result["weights"], case.config)
    actual = {key: np.asarray(value, np.float64)
              for key, value in flatten({**result, "params": params}, stack, state is not None).items()}
    comparison = compare_outputs(actual, expected, bounds, f"{adapter.describe()} gradients in {half} vs float64 "
                                                           f"backward pass, {case.describe(half)}")
    return comparison, result, stack, state, expected, bounds


@pytest.mark.applies_to(lambda cls: runs_in_half(cls))
@pytest.mark.parametrize("half", HALF_FORMATS)
def test_half_gradients_within_the_bound_of_their_arithmetic(adapter, half, record):
    """PyTorch's autograd in float16 and bfloat16 on a CPU, every parameter's, the inputs' and the initial state's
    gradient, against the float64 backward pass (reference/backward.py) run on the arithmetic PyTorch computes half
    in (float32 within each operation, each result stored in half: ``mixed_float16``, ``mixed_bfloat16``), the same
    running error analysis as float32's with half storage. Measured (torch 2.13.0, AMD EPYC AVX2): err/bound 0.0073
    to 0.075 per case, each row's worst 0.014 to 0.075 (honest: at least 0.01); judged by the float32 bound of the
    same data the same gradients are 40 to 1500 times out (the half bound is needed)."""
    worst = 0.0
    for case in half_gradient_cases(adapter):
        comparison = half_gradients(adapter, case, half)[0]
        record("gradients", adapter, dtype=half, **comparison.as_record())
        assert_within_bound(comparison)
        float32 = half_gradients(adapter, case, half, "float32")[0]
        assert float32.ratio > 10, float32.message()  # measured 26 to 1725 times
        worst = max(worst, comparison.ratio)
    assert worst >= 0.01, f"a bound over 100 times the worst error it allows: {worst:.3g}"


@pytest.mark.applies_to(lambda cls: runs_in_half(cls))
@pytest.mark.parametrize("half", HALF_FORMATS)
def test_half_gradients_mapped_back_wrong_are_detected(adapter, half, record):
    """Every wrong way back of the gradients (the adapter's wrong mappings applied to the native gradients) is
    caught in half too, on a non-square case of one step: refused by its shape, or beyond the half bound. Beyond,
    not the forward's margin (``caught_beyond``, 2.5): over one step the least measured is 2.19 times the bound
    (bfloat16, "gates 0 and 1 swapped in weight_hh_l1"; torch 2.13.0, seeds 910 to 912: 2.19, 4.3, 3.17), the right
    gradients at most 0.075 of theirs. A limit of the half bounds, measured: a gradient is a sum over steps and the
    batch, and its worst-case bound grows with the sum of its terms' magnitudes, so over 2 steps in bfloat16 a
    transposed weight_hh's gradient, a layer's directions swapped and two gates swapped fall within it (0.74 to
    0.98 of it), and float16's 8 times smaller unit roundoff still catches them."""
    from rnn_equivalence.harness.gradients import flatten
    from tests.equivalence.test_gradients import changes

    from dataclasses import replace

    case = case_of(adapter, 3, 6, 3, MUTATION_STEPS, 910, replace(adapter.mutation_config, initial_state=True))
    _, result, stack, state, expected, bounds = half_gradients(adapter, case, half)
    wrong = {name: mutate for name, mutate in adapter.mutations.items() if changes(mutate, result["weights"])}
    assert wrong, f"{adapter.name}: no wrong way back to try"
    for name, mutate in wrong.items():
        try:
            params = adapter.gradients_from_native(mutate(result["weights"]), case.config)
        except ValueError as error:
            assert "expected shape" in str(error), error
            record("mutation", adapter, mutation=f"gradients with mutation '{name}'", dtype=half, detected=True,
                   by="shape check")
            continue
        actual = flatten({**result, "params": params}, stack, state is not None)
        comparison = compare_outputs(actual, expected, bounds, f"{adapter.describe()} '{name}' in {half}")
        record("mutation", adapter, mutation=f"gradients with mutation '{name}'", dtype=half,
               detected=not comparison.equivalent, by="values", ratio=comparison.ratio)
        print(f"{name}: {comparison.ratio:.3g}")
        assert comparison.ratio > 1, f"{name} went undetected in {half}: {comparison.message()}"
