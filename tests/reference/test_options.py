"""The options of the family (rnn_equivalence.reference.params, rnn_equivalence.reference.gated),
independent of any framework.

Three claims, each checked here where we control both computations:
- each option changes the cell by far more than rounding on the suite's data, so a system that
  drops it, or computes another hard sigmoid, is caught by the equivalence tests;
- the derived bound (reference/tolerance.py) holds for a float32 NumPy run with every option, also
  stacked and bidirectional (a projected layer feeds 2P units to the next), and is not so loose
  that a wrong mapping could hide under it;
- the equations, by hand on one step, and the options reduce to the plain cell where they must,
  bit for bit.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.harness.cases import Case
from rnn_equivalence.reference.comparison import assert_bitwise_equal, assert_within_bound, compare, compare_outputs
from rnn_equivalence.reference.tolerance import activation_error, pair_bound, reference_and_bound
from rnn_equivalence.reference.activations import activation, max_slope
from rnn_equivalence.reference.gated import lstm_step
from rnn_equivalence.reference.params import GATED, CellParams
from rnn_equivalence.reference.stack import run_stack

# Every activation spec and options set some framework computes (docs/MAPPING.md: "LSTM and GRU options").
ACTIVATIONS = {
    "rnn": ("hard_sigmoid_0.2", "hard_sigmoid_relu6"),
    "lstm": ("hard_sigmoid_0.2,tanh,tanh", "hard_sigmoid_relu6,tanh,tanh", "sigmoid,relu,relu", "sigmoid,tanh,relu"),
    "gru": ("hard_sigmoid_0.2,tanh", "hard_sigmoid_relu6,tanh", "sigmoid,relu"),
}
OPTION_SETS = {
    "rnn": ("gate_clip",),
    "lstm": ("peepholes", "projection", "cell_clip", "projection+proj_clip", "gate_clip", "coupled_gates",
             "peepholes+projection+cell_clip+proj_clip", "peepholes+gate_clip"),
    "gru": ("gate_clip",),
}
STACKED = LayerConfig(num_layers=2, bidirectional=True)
# An option that binds moves results by 1e-2 or more, float32 bounds are 1e-6 to 1e-5: 1e3 leaves a
# margin, and the thresholds were chosen to clear it (rnn_equivalence.reference.params, CELL_CLIP).
FAR_MORE_THAN_ROUNDING = 1e3


def option_cases():
    return list(_option_cases())


def _option_cases():
    for family, sets in OPTION_SETS.items():
        variants = ("reset_after", "reset_before") if family == "gru" else ("",)
        for variant in variants:
            for options in sets:
                yield pytest.param(family, variant, options, id=f"{family}{'-' + variant if variant else ''}-{options}")


def activation_cases():
    return list(_activation_cases())


def _activation_cases():
    for family, specs in ACTIVATIONS.items():
        for spec in specs:
            yield pytest.param(family, spec, id=f"{family}-{spec}")


def float32_run_within_bound(case: Case):
    """The float32 NumPy reference of ``case`` against the float64 one, under the derived bound."""
    actual = run_stack(case.stack("float32"), case.inputs("float32"), case.state("float32"))
    expected, bounds = case.reference(), case.bound_vs_reference("float32")
    comparison = compare_outputs(actual, expected, bounds, f"NumPy float32, {case.describe('float32')}")
    assert_within_bound(comparison)
    # A wrong mapping moves results by 0.1 or more; a bound of 1e-3 still leaves it 100 times the bound.
    assert max(b.max() for b in bounds.values()) < 1e-3, "a bound this loose could hide a wrong mapping"
    return comparison


@pytest.mark.factors(**{"family,variant,options": option_cases(),
                         "config": [pytest.param(LayerConfig(), id="cell"), pytest.param(STACKED, id="L2-bi")]})
def test_float32_run_within_the_bound_with_every_option(family, variant, options, config):
    """Short of full depth, each options set in one configuration, the two in turn (harness/depth.py)."""
    case = Case(family, 7, 5, 3, 50, seed=11, config=config, variant=variant, options=options)
    float32_run_within_bound(case)


@pytest.mark.parametrize(("family", "activation_spec"), activation_cases())
def test_float32_run_within_the_bound_with_every_activation(family, activation_spec):
    variant = "reset_before" if family == "gru" else ""
    float32_run_within_bound(Case(family, 3, 6, 3, 50, seed=12, config=STACKED, activation=activation_spec,
                                  variant=variant))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), options=st.sets(st.sampled_from(
    ["peepholes", "projection", "cell_clip", "gate_clip", "coupled_gates"]), max_size=5),
       spec=st.sampled_from((GATED, *ACTIVATIONS["lstm"])), shape=st.sampled_from([(7, 5), (3, 6), (4, 4)]))
def test_float32_lstm_within_the_bound_for_any_options(seed, options, spec, shape):
    names = sorted(options) + (["proj_clip"] if "projection" in options else [])
    case = Case("lstm", *shape, 2, 20, seed=seed, activation=spec, options="+".join(names))
    float32_run_within_bound(case)


def differs_far_beyond_rounding(a: Case, b: Case, what: str) -> float:
    """Largest |a - b| over every result, as a fraction of both bounds in float32."""
    ra, rb = a.reference(), b.reference()
    bound = pair_bound(a.bound_vs_reference("float32"), b.bound_vs_reference("float32"))
    ratio = max(compare(ra[k], rb[k], bound[k], what).ratio for k in ra)
    assert ratio > FAR_MORE_THAN_ROUNDING, f"{what}: only {ratio:.3g} x the bound apart"
    return ratio


@pytest.mark.parametrize(("family", "variant", "options"), option_cases())
def test_each_option_changes_the_cell_far_beyond_rounding(family, variant, options):
    """The suite's thresholds (CELL_CLIP, PROJ_CLIP, GATE_CLIP) bind and its peephole weights count:
    a system that ignores an option cannot pass. (A projection cannot be dropped alone: W_h has its
    size; its mapping is caught by the mutations instead.)"""
    case = Case(family, 7, 5, 2, 6, seed=13, variant=variant, options=options)
    for name in case.option_names:
        if name == "projection":
            continue
        dropped = "+".join(n for n in case.option_names
                           if n != name and not (name == "projection" and n == "proj_clip"))
        differs_far_beyond_rounding(case, case.with_(options=dropped), f"{case} without {name}")


@pytest.mark.parametrize("family", ["rnn", "lstm", "gru"])
def test_the_two_hard_sigmoids_are_different_functions(family):
    """clip(0.2 z + 0.5, 0, 1) and relu6(z + 3) / 6 agree only at z = 0 and where both saturate:
    the trap of porting a Keras 2 model to Keras 3 by name."""
    specs = {"rnn": ("hard_sigmoid_0.2", "hard_sigmoid_relu6")}.get(
        family, tuple(f"hard_sigmoid_{a},tanh" + (",tanh" if family == "lstm" else "") for a in ("0.2", "relu6")))
    a, b = (Case(family, 7, 5, 3, 20, seed=14, activation=spec) for spec in specs)
    differs_far_beyond_rounding(a, b, f"{family}: {specs[0]} vs {specs[1]}")


def test_hard_sigmoids_by_hand():
    z = np.array([-4.0, -3.0, -2.5, -1.0, 0.0, 1.0, 2.5, 2.9, 3.0, 4.0])
    assert_bitwise_equal(activation("hard_sigmoid_0.2")(z), np.clip(0.2 * z + 0.5, 0, 1), "0.2 z + 0.5")
    expected = np.array([0.0, 0.0, 0.0, 0.3, 0.5, 0.7, 1.0, 1.0, 1.0, 1.0])
    # 0.2 z + 0.5 in float64 against decimal values: two roundings of numbers below 1 (<= 2**-53 each
    # near 0.5, the literals' own rounding included); relu6 / 6 likewise one division, 2**-52 at most.
    np.testing.assert_allclose(activation("hard_sigmoid_0.2")(z), expected, rtol=0, atol=2**-53)
    relu6 = np.array([0, 0, 0.5, 2, 3, 4, 5.5, 5.9, 6, 6]) / 6
    np.testing.assert_allclose(activation("hard_sigmoid_relu6")(z), relu6, rtol=0, atol=2**-52)


def test_hard_sigmoid_error_model_is_exact_where_saturated():
    """On a clipped piece the slope is 0 (an input error does not propagate); reaching into the
    linear piece it is a, even across a breakpoint; evaluation costs 4 roundings of a|z| + b."""
    lo, hi = np.array([3.0, 2.4, -10.0, 2.9]), np.array([5.0, 2.6, -3.1, 3.1])
    np.testing.assert_array_equal(max_slope("hard_sigmoid_0.2", lo, hi), [0.0, 0.2, 0.0, 0.0])
    np.testing.assert_array_equal(max_slope("hard_sigmoid_relu6", lo, hi), [0.0, 1 / 6, 0.0, 1 / 6])
    u = 2.0**-24
    assert activation_error("hard_sigmoid_0.2", 2.0, u) == 4 * u * (0.2 * 2.0 + 0.5)
    assert activation_error("relu", 5.0, u) == 0


def test_lstm_step_with_every_option_by_hand():
    """I = H = 1, projected to P = 1 (W_proj = [[2]]), W_x = [1, 2, 3, 4] (gates i f g o), W_h = 0,
    no bias, peepholes (p_i, p_f, p_o) = (0.5, -0.25, 0.75), x = 1, h = 0, c = 1, cell_clip 0.3,
    proj_clip 0.5; then the same with gate_clip 1.5 and coupled gates."""
    s = lambda v: 1 / (1 + math.exp(-v))
    p = CellParams("lstm", np.array([[1.0], [2.0], [3.0], [4.0]]), np.zeros((4, 1)), None, None,
                   peepholes=np.array([0.5, -0.25, 0.75]), W_proj=np.array([[2.0]]), cell_clip=0.3, proj_clip=0.5)
    h, c = lstm_step(p, np.ones((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    c_expected = min(s(2 - 0.25) * 1 + s(1 + 0.5) * math.tanh(3), 0.3)  # clipped: 1.7... -> 0.3
    assert c[0, 0] == c_expected == 0.3
    m = s(4 + 0.75 * 0.3) * math.tanh(0.3)
    # A handful of float64 operations in other orders and libraries (math against NumPy): within
    # 2 ulps, 4e-16 relative, as in test_gated_reference.py's hand-computed steps.
    assert h[0, 0] == pytest.approx(max(-0.5, min(0.5, 2 * m)), rel=4e-16)
    assert 2 * m > 0.5 and h[0, 0] == 0.5  # the projection clip binds too

    q = p.replace(gate_clip=1.5, coupled_gates=True, cell_clip=None, proj_clip=None, W_proj=None,
                  W_h=np.zeros((4, 1)))
    h, c = lstm_step(q, np.ones((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    i = s(min(1 + 0.5, 1.5))
    c_expected = (1 - i) * 1 + i * math.tanh(1.5)  # f = 1 - i; g's argument 3 clipped to 1.5
    assert c[0, 0] == pytest.approx(c_expected, rel=4e-16)
    assert h[0, 0] == pytest.approx(s(1.5) * math.tanh(c_expected), rel=4e-16)  # o's 4 + 0.75 c clipped


def test_options_reduce_to_the_plain_cell_bit_for_bit():
    """Zero peepholes, thresholds no value reaches, an identity projection: the plain LSTM, exactly
    (each adds exact zeros or copies, so no rounding differs)."""
    case = Case("lstm", 5, 4, 3, 20, seed=15)
    plain = case.stack().first
    xs, state = case.inputs(), {k: v[0] for k, v in case.state().items()}
    expected = run_stack(plain, xs, {k: v[None] for k, v in state.items()})
    for same in (plain.replace(peepholes=np.zeros(12)), plain.replace(cell_clip=1e30, gate_clip=1e30),
                 plain.replace(W_proj=np.eye(4), proj_clip=1e30)):
        actual = run_stack(same, xs, {k: v[None] for k, v in state.items()})
        for key in expected:
            assert_bitwise_equal(actual[key], expected[key], f"{same.kind}: {key}")


def test_bound_with_options_holds_for_an_exact_float32_value():
    """Where every input of the cell is zero but the biases, every step computes exactly the same
    numbers in any dtype, and the bound must still be a bound (checked against float64)."""
    p = CellParams.random("lstm", 3, 5, seed=1, options=("peepholes", "projection", "cell_clip", "proj_clip"))
    xs = np.zeros((4, 2, 3))
    values, bounds = reference_and_bound(p, xs, None, "float32")
    actual = run_stack(p.astype(np.float32), xs.astype(np.float32))
    for key in values:
        assert_within_bound(compare(actual[key], values[key], bounds[key], key))


@pytest.mark.parametrize(("changes", "message"), [
    (dict(family="gru", W_x=np.zeros((6, 3)), W_h=np.zeros((6, 2)), b_x=None, b_h=None,
          peepholes=np.zeros(6)), r"peepholes: an option of LSTM cells only, got it for a gru cell"),
    (dict(peepholes=np.zeros(4)), r"peepholes: expected shape \(3H,\) \(gates i, f, o\) = \(6,\) \(H=2 "),
    (dict(proj_clip=0.5), r"proj_clip: expected a projection W_proj to clip, got W_proj=None"),
    (dict(cell_clip=0.0), r"cell_clip: expected a positive finite threshold \(or None\), got 0.0"),
    (dict(gate_clip=float("inf")), r"gate_clip: expected a positive finite threshold \(or None\), got inf"),
    (dict(cell_clip=True), r"cell_clip: expected a positive finite threshold \(or None\), got True"),
    (dict(coupled_gates=1), r"coupled_gates: expected True or False, got 1"),
    (dict(W_proj=np.zeros((1, 3))), r"W_h: expected shape \(4H, P\) = \(12, 1\) \(P=1, H=3 from W_proj's shape"),
    (dict(activation="hard_sigmoid_0.2,tanh"), r"activation: expected 'default' or 3 names f,g,h \(gates, "
                                               r"candidate, output\) from .* for lstm, got 'hard_sigmoid_0.2,tanh'"),
    (dict(activation="sigmoid,gelu,tanh"), r"activation: expected 'default' or 3 names"),
    (dict(W_proj=np.zeros((1, 2)), peepholes=np.zeros(6, np.float32)), r"expected one dtype for all parameters"),
])
def test_options_refuse_bad_values_naming_them(changes, message):
    base = dict(family="lstm", W_x=np.zeros((8, 3)), W_h=np.zeros((8, 2)), b_x=None, b_h=None)
    if "W_proj" in changes and "W_h" not in changes:
        base["W_h"] = np.zeros((8, changes["W_proj"].shape[0])) if changes["W_proj"].shape[1] == 2 else base["W_h"]
    with pytest.raises((ValueError, TypeError), match=message):
        CellParams(**{**base, **changes})


def test_default_activations_however_spelled_are_the_default():
    p = CellParams.random("lstm", 3, 4, seed=0, activation="sigmoid,tanh,tanh")
    assert p.activation == GATED and p.gate_activations == ("sigmoid", "tanh", "tanh")
    assert CellParams.random("gru", 3, 4, seed=0, activation="sigmoid,relu").kind == "gru-reset_after[sigmoid,relu]"
