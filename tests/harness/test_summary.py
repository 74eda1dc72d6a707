"""The compact summary fits one screen with every system: at most 120 columns and 60 lines, each finding
and known issue once; and it still says NOT equivalent where a system is not."""

import numpy as np

from rnn_equivalence.frameworks import ADAPTERS
from rnn_equivalence.harness.known_issues import KNOWN_ISSUES
from rnn_equivalence.harness.records import family_of
from rnn_equivalence.harness.summary import SCREEN_LINES, WIDTH, Summary, framework_of




def records_of_a_run(broken=()):
    """Records as a default run of every system makes them: reference, padded, gradient and mutation
    records, a padded-steps finding for every padded system, and every known issue of the table."""
    rng = np.random.default_rng(0)
    records = []
    for name, cls in ADAPTERS.items():
        family = cls.family + (f" ({cls.variant})" if cls.variant else "")
        versions = ", ".join(f"{d} {i}.{i + 1}.{i + 2}" for i, d in enumerate(("numpy", *cls.distributions)))
        base = {"system": name, "cell": cls.cell, "versions": versions, "family": family}
        for dtype in cls.dtypes:
            ratio = 1e3 if name in broken else float(rng.uniform(0.01, 0.5))
            for _ in range(4):
                records.append({**base, "kind": "reference", "dtype": dtype, "ratio": ratio, "max_error": 1e-7,
                                "level": cls.activations[0]})
            if cls.padded_configs:
                records.append({**base, "kind": "padded", "dtype": dtype, "ratio": 0.1, "max_error": 1e-7})
        for mutation in cls.mutations:
            records.append({**base, "kind": "mutation", "mutation": mutation, "detected": True, "by": "values",
                            "ratio": 1e5})
        if cls.padded_configs:
            records.append({"kind": "nonequivalence", "system": name, "other": "the reference with repeat",
                            "dtype": "float32", "ratio": 1e4, "max_error": 0.3,
                            "reason": f"{name} reports zeros on padded steps, not repeat: outputs differ on every "
                                      "padded step (real steps and final states agree)"})
    for name, cls in ADAPTERS.items():  # each cell against an anchor
        if not cls.layer:
            records.append({"kind": "pair", "system": "torch", "other": name, "dtype": "float32", "ratio": 0.1,
                            "max_error": 1e-7, "cell": "torch.nn.RNNCell", "versions": "torch 2.13.0",
                            "family": family_of(name)})
    for k, name in enumerate(list(ADAPTERS)[:20]):  # as many other findings as a default run proves
        records.append({"kind": "nonequivalence", "system": name, "other": "another function", "dtype": "float32",
                        "ratio": 1e4, "max_error": 0.3,
                        "reason": f"finding {k}: a difference in one system's options, measured far above the bound"})
    for row in KNOWN_ISSUES:
        for name in row.systems:
            records.append({"kind": "known", "system": name, "dtype": "float64", "family": family_of(name),
                            "known_issue": row.reason})
    return records


def render(records) -> list[str]:
    summary = Summary(names=tuple(ADAPTERS))
    for record in records:
        summary.add(record)
    lines = []
    summary.render_compact(lines.append)
    return lines


def test_the_compact_summary_of_every_system_fits_one_screen():
    lines = render(records_of_a_run())
    too_wide = [line for line in lines if len(line) > WIDTH]
    assert not too_wide, too_wide
    assert len(lines) <= SCREEN_LINES, "\n".join(lines)
    frameworks = {framework_of(name) for name in ADAPTERS}
    assert all(any(line.startswith(f"{f} ") for line in lines) for f in frameworks), "\n".join(lines)
    padded = [line for line in lines if "reports zeros on padded steps" in line]
    assert len(padded) == 1, padded  # one finding, said once, with its systems counted
    assert f"+{sum(bool(c.padded_configs) for c in ADAPTERS.values()) - 1} more" in padded[0] or "flax" in padded[0]
    assert "more findings: the report lists every one" in "\n".join(lines) or sum("finding" in l for l in lines) == 20


def test_a_system_that_is_not_equivalent_shows_in_its_frameworks_line():
    lines = render(records_of_a_run(broken=("keras-jax-lstm",)))
    row = next(line for line in lines if line.startswith("keras-jax "))
    assert row.rstrip().endswith("NOT equivalent") and "1000.000!" in row, row
    assert next(line for line in lines if line.startswith("torch ")).rstrip().endswith("equivalent")


def test_each_frameworks_test_seconds_are_a_column_costliest_first():
    """The cost of a run, made visible: each framework's test seconds (every phase, every worker;
    rnn_equivalence.harness.records attaches them to each report), the costliest framework's line first, and the
    total with the peak memory."""
    from types import SimpleNamespace

    from rnn_equivalence.harness.summary import COST

    summary = Summary(names=tuple(ADAPTERS))
    for record in records_of_a_run():
        summary.add(record)
    for system, seconds in (("tflite-keras2-rnn", 30.0), ("tflite-keras2-lstm-rnn", 12.5), ("torch", 0.5),
                            ("tests.harness.test_report", 3.0)):
        summary.pytest_runtest_logreport(SimpleNamespace(
            when="setup", failed=False, passed=True, skipped=False,
            user_properties=[(COST, {"system": system, "seconds": seconds})]))
    summary.peak_rss["gw0"] = {"process": 2.5}
    lines = []
    summary.render_compact(lines.append)
    header = next(line for line in lines if line.startswith("framework "))
    assert "seconds" in header.split()
    table = [line for line in lines if line.split() and line.split()[0] in {framework_of(n) for n in ADAPTERS}]
    assert table[0].startswith("tflite-keras2 ") and " 42 " in table[0], table[0]
    assert any(line.startswith("Test time: 46 s") and "gw0 2.50 GiB" in line for line in lines), lines


def test_int8_records_make_no_row_of_the_verdict():
    """A quantized model computes another function (tests/equivalence/test_quantized_torch.py): its records, within
    their quantization bound or a quantizer bug beyond it, are kept but make no (system, dtype) row."""
    summary = Summary()
    base = {"system": "torch-lstm-rnn", "cell": "torch.nn.LSTM", "versions": "torch 2.13.0", "family": "lstm",
            "dtype": "qint8", "ratio": 0.2, "max_error": 1e-3}
    summary.add({**base, "kind": "quantized"})
    summary.add({**base, "kind": "mutation", "mutation": "int8: gates exchanged", "detected": True, "by": "values"})
    assert not summary.systems and len(summary.quantized) == 2 and len(summary.records) == 2
