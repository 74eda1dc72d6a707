"""``rnn_equivalence.frameworks.convert``: every pair of systems of a family member, NumPy only.

A conversion is read with the source's mapping and written with the target's; each system's mapping
is proved against the reference by the equivalence tests (and its breakage by the mutations), so what
is checked here is the composition: the target's weights read back give the source's canonical
parameters (bitwise, but for a bias the target stores as one sum, which is one rounding), the
refusals name what the target cannot hold, and nothing imports a framework.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rnn_equivalence.frameworks import ADAPTERS, ConversionRefused, convert, mapping
from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.reference.params import GATES, CellParams
from rnn_equivalence.reference.stack import StackParams

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORK_MODULES = ("torch", "tensorflow", "keras", "tf_keras", "jax", "flax", "onnx", "onnxruntime", "optax",
                     "onnxscript")
MEMBERS = sorted({(cls.family, cls.variant) for cls in ADAPTERS.values()})


def largest_structure(cls) -> tuple[int, int]:
    """(layers, directions) of the richest configuration a system declares."""
    return max((c.num_layers, c.num_directions) for c in (*cls.configs, cls.mutation_config))


def pair_config(a, b) -> LayerConfig:
    layers, directions = min(largest_structure(a), largest_structure(b))
    return LayerConfig(layers, directions == 2)


def stack_for(family, variant, config, seed, zero_b_hn=False, dtype=np.float32) -> StackParams:
    """Seeded parameters (every value distinct, every bias non-zero), b_hn zero where asked."""
    I, H = 3, 4  # I != H, so that a transposed kernel cannot pass
    layers = []
    for k in range(config.num_layers):
        cells = []
        for d in range(config.num_directions):
            cell = CellParams.random(family, I if k == 0 else config.num_directions * H, H, seed=(seed, k, d),
                                     dtype=dtype, variant=variant)
            if zero_b_hn and family == "gru":
                b_h = cell.b_h.copy()
                b_h[2 * H:] = 0
                cell = cell.replace(b_h=b_h)
            cells.append(cell)
        layers.append(cells)
    return StackParams(layers)


def effective_biases(cls, cell: CellParams) -> dict[str, tuple]:
    """Per gate, what the function depends on: (b_x, b_h) where the system keeps them apart, else their sum."""
    out = {}
    for gate in GATES[cell.family]:
        b_x, b_h = cell.gate(cell.b_x, gate), cell.gate(cell.b_h, gate)
        out[gate] = (b_x, b_h) if gate in cls.kept_hidden_biases else (b_x.astype(np.float64) + b_h,)
    return out


def pairs_of(family, variant):
    members = [cls for cls in ADAPTERS.values() if (cls.family, cls.variant) == (family, variant)]
    return list(itertools.permutations(members, 2))


def test_every_member_has_pairs():
    assert MEMBERS and all(len(pairs_of(*member)) >= 2 for member in MEMBERS), MEMBERS


@pytest.mark.parametrize("member", MEMBERS, ids=lambda m: "-".join(filter(None, m)))
def test_conversion_keeps_the_function(member):
    """source -> target, read back by the target's mapping: the source's canonical parameters; kernels
    bitwise, biases bitwise where both keep them apart, else their sum within one rounding (u |sum|)."""
    family, variant = member
    checked = 0
    for a, b in pairs_of(family, variant):
        config = pair_config(a, b)
        stack = stack_for(family, variant, config, seed=checked, zero_b_hn=a.zero_b_hn or b.zero_b_hn)
        native = mapping(a).to_native(stack, config)
        converted = convert(native, a.name, b.name, config=config)
        expected, got = mapping(a).from_native(native, config), mapping(b).from_native(converted, config)
        u = np.finfo(np.float32).eps / 2
        for (k, d, want), (_, _, have) in zip(expected.cells(), got.cells(), strict=True):
            where = f"{a.name} -> {b.name}, layer {k} direction {d}"
            np.testing.assert_array_equal(have.W_x, want.W_x, err_msg=where, strict=True)
            np.testing.assert_array_equal(have.W_h, want.W_h, err_msg=where, strict=True)
            kept_by_both = type("Both", (), {"kept_hidden_biases": tuple(
                g for g in a.kept_hidden_biases if g in b.kept_hidden_biases)})
            for gate, values in effective_biases(kept_by_both, want).items():
                for have_value, want_value in zip(effective_biases(kept_by_both, have)[gate], values, strict=True):
                    # A sum stored as one bias is one rounding, u |sum|; with TF1's forget_bias fb folded in
                    # (on the f gate) and out again, two more, each at most u (|sum| + |fb|).
                    fb = a.forget_bias + b.forget_bias if gate == "f" else 0.0
                    bound = (3 if fb else 1) * u * (np.abs(want_value) + fb) if len(values) == 1 else 0.0
                    assert np.all(np.abs(np.float64(have_value) - want_value) <= bound), (where, gate)
        checked += 1
    assert checked == len(pairs_of(family, variant)) > 0


def both_keep_both_biases(a, b) -> bool:
    return all(set(GATES[a.family]) <= set(cls.kept_hidden_biases) and not cls.forget_bias for cls in (a, b))


def test_round_trip_is_bitwise_where_both_keep_both_biases():
    trips = [(a, b) for member in MEMBERS for a, b in pairs_of(*member) if both_keep_both_biases(a, b)]
    assert len(trips) >= 10, [f"{a.name}->{b.name}" for a, b in trips]
    for a, b in trips:
        config = pair_config(a, b)
        native = mapping(a).to_native(stack_for(a.family, a.variant, config, seed=7), config)
        back = convert(convert(native, a.name, b.name, config=config), b.name, a.name, config=config)
        assert sorted(back) == sorted(native), (a.name, b.name)
        for name in native:
            np.testing.assert_array_equal(back[name], native[name], err_msg=f"{a.name} -> {b.name} -> {a.name}",
                                          strict=True)


def test_a_summed_bias_goes_back_as_the_sum():
    """PyTorch's two biases through Keras's one: bias_ih + bias_hh, bias_hh zero (the function, not the split)."""
    stack = stack_for("lstm", "", CELL, seed=1)
    native = mapping("torch-lstm").to_native(stack)
    back = convert(convert(native, "torch-lstm", "keras-tf-lstm"), "keras-tf-lstm", "torch-lstm")
    np.testing.assert_array_equal(back["bias_ih"], native["bias_ih"] + native["bias_hh"])
    assert not np.any(back["bias_hh"])


def test_tf1_forget_bias_is_folded():
    """TF1's LSTM cells add forget_bias (1.0) to f: a conversion to them subtracts it from the stored bias."""
    native = mapping("torch-lstm").to_native(stack_for("lstm", "", CELL, seed=2))
    tf1 = convert(native, "torch-lstm", "tf1-basic-lstm")
    H = native["weight_hh"].shape[1]
    total = native["bias_ih"] + native["bias_hh"]
    # TF1's gate order is i, j(g), f, o: its f block is the third
    np.testing.assert_allclose(tf1["bias"][2 * H:3 * H], total[H:2 * H] - 1.0, rtol=0, atol=4e-7)


@pytest.mark.parametrize(("source", "target", "why"), [
    ("torch-gru", "keras-tf-gru-reset-before",
     "computes a gru (reset_before) cell; got parameters of a gru (reset_after)"),
    ("keras-tf-gru-reset-before", "torch-gru",
     "computes a gru (reset_after) cell; got parameters of a gru (reset_before)"),
    ("torch-gru", "flax-nnx-gru", "has no slot for b_hn"),
    ("torch-rnn", "torch", "is one cell; got 2 layer(s)"),
    ("torch-lstm-rnn", "onnx-ort-lstm", "one node is one layer"),
    ("torch-lstm", "torch-gru", "computes a gru (reset_after) cell; got parameters of a lstm cell"),
])
def test_refusals_name_what_the_target_cannot_hold(source, target, why):
    a = ADAPTERS[source]
    config = LayerConfig(2, True) if a.layer else CELL
    native = mapping(a).to_native(stack_for(a.family, a.variant, config, seed=3), config)
    with pytest.raises(ConversionRefused, match=why.replace("(", r"\(").replace(")", r"\)")):
        convert(native, source, target, config=config)


def test_an_option_the_target_lacks_is_refused():
    projected = stack_for("lstm", "", LayerConfig(1, False), seed=4)
    cell = projected.layers[0][0]
    rng = np.random.default_rng(0)
    W_proj = rng.uniform(-0.5, 0.5, (2, 4)).astype(np.float32)
    cell = CellParams("lstm", cell.W_x, rng.uniform(-0.5, 0.5, (16, 2)).astype(np.float32), cell.b_x, cell.b_h,
                      W_proj=W_proj)
    native = mapping("torch-lstm-rnn").to_native(cell, LayerConfig(1, False))
    assert "weight_hr_l0" in native
    with pytest.raises(ConversionRefused, match="has no option 'projection'"):
        convert(native, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(1, False))


def test_an_activation_the_target_lacks_is_refused():
    native = mapping("numpy-split").to_native(stack_for("rnn", "", CELL, seed=5))
    with pytest.raises(ConversionRefused, match="does not compute activation 'sigmoid'"):
        convert(native, "numpy-split", "torch", activation="sigmoid")


@pytest.mark.parametrize(("change", "message"), [
    (lambda n: {**n, "weight_ih": n["weight_ih"].T}, r"weight_ih: expected shape \(4\*hidden_size, input_size\)"),
    (lambda n: {k: v for k, v in n.items() if k != "bias_hh"}, r"missing \['bias_hh'\]"),
    (lambda n: {**n, "extra": n["bias_hh"]}, r"unexpected \['extra'\]"),
    (lambda n: {**n, "bias_ih": n["bias_ih"].astype(np.int64)}, "expected a float16, bfloat16, float32 or float64 array"),
    (lambda n: {k: v for k, v in n.items() if k != "weight_hh"}, r"missing 'weight_hh'"),
    (lambda n: [1, 2], "expected a dict of named weights, got list"),
    (lambda n: {**n, "weight_hh": 3.0},
     r"weight_hh: expected an array of shape \(4\*hidden_size, hidden_size\), got shape \(\)"),
    (lambda n: {**n, "bias_ih": "zeros"}, "expected a float16, bfloat16, float32 or float64 array"),
    (lambda n: {**n, "weight_ih": np.full_like(n["weight_ih"], np.nan)}, "expected finite values"),
])
def test_bad_weights_are_refused_in_the_frameworks_names(change, message):
    native = mapping("torch-lstm").to_native(stack_for("lstm", "", CELL, seed=6))
    with pytest.raises((ValueError, TypeError), match=message):
        convert(change(native), "torch-lstm", "keras-tf-lstm")


def test_unknown_system_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown system 'torch-lstmm'; expected one of"):
        convert({}, "torch-lstmm", "torch-lstm")


CHILD = """
import json, sys
import numpy as np
from rnn_equivalence.frameworks import ADAPTERS, convert, mapping
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import CellParams
done = 0
for a in ADAPTERS.values():
    for b in ADAPTERS.values():
        if a is b or (a.family, a.variant) != (b.family, b.variant) or a.layer or b.layer or a.zero_b_hn or b.zero_b_hn:
            continue
        native = mapping(a).to_native(CellParams.random(a.family, 3, 4, seed=0, variant=a.variant))
        convert(native, a.name, b.name)
        done += 1
print(json.dumps({"done": done, "modules": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def test_convert_imports_no_framework():
    """In a fresh interpreter: every cell pair converted, and no framework module in sys.modules."""
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["done"] >= 100, report["done"]
    imported = sorted(set(report["modules"]) & set(FRAMEWORK_MODULES))
    assert not imported, f"converting weights imported {imported}"
