"""Systems against each other, not only against the reference."""

import pytest

from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.tolerance import pair_bound


def test_systems_agree_with_each_other(adapters, pair_case, record):
    """Each cell against the anchor of its family member (conftest.anchored_pairs), in float32:
    the allowed difference is the sum of both systems' bounds."""
    a, b = adapters
    case, dtype = pair_case, "float32"
    args = (case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    bound = a.arrange(pair_bound(case.bound(dtype), case.bound(dtype)), case.config)
    out_a, out_b = a.run(*args), b.run(*args)
    # Cells return every h_t in one shape; c as every c_t, or the last one alone (ONNX): the common outputs.
    common = sorted(set(out_a) & set(out_b))
    assert common, f"no output in common to compare: {sorted(out_a)} against {sorted(out_b)}"
    comparison = compare_outputs({k: out_a[k] for k in common}, {k: out_b[k] for k in common},
                                 {k: bound[k] for k in common},
                                 f"{a.describe()} vs {b.describe()}, {case.describe(dtype)}")
    record("pair", a, other=b.name, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)


@pytest.mark.pair_with_source
@pytest.mark.applies_to(lambda cls: cls.compare_with is not None)
def test_exported_model_agrees_with_its_source(adapter, activation_spec, dtype, case, load_system, record):
    """An exported model against the framework module it was exported from, not only the reference."""
    source = load_system(adapter.compare_with)
    args = (case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config)
    bound = adapter.arrange(pair_bound(case.bound(dtype), case.bound(dtype)), case.config)
    comparison = compare_outputs(adapter.run(*args), source.run(*args), bound,
                                 f"{adapter.describe()} vs {source.describe()}, {case.describe(dtype)}")
    record("pair", adapter, other=source.name, dtype=dtype, **comparison.as_record())
    assert_within_bound(comparison)
