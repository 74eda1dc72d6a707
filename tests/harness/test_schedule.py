"""The run's order (rnn_equivalence.harness.schedule): the costliest systems first, each system's tests together."""

from rnn_equivalence.harness.schedule import by_cost, committed_seconds, seconds_at, systems_of, unit_of


def test_costliest_first_each_system_together_harness_tests_last():
    items = ["a1", "h1", "b1", "a2", "c1", "b2", "h2"]
    system = {"a": "a", "b": "b", "c": "c", "h": None}
    ordered = by_cost(items, lambda item: system[item[0]], {"a": 1.0, "b": 30.0, "c": 5.0})
    assert ordered == ["b1", "b2", "c1", "a1", "a2", "h1", "h2"]


def test_an_unmeasured_system_is_costed_by_its_number_of_tests():
    items = ["a1", "b1", "b2", "b3", "b4"]
    ordered = by_cost(items, lambda item: item[0], {"a": 2.0})  # 2 s a test: b's four tests, 8 s
    assert ordered == ["b1", "b2", "b3", "b4", "a1"]
    assert by_cost(items, lambda item: item[0], {}) == ["b1", "b2", "b3", "b4", "a1"]  # nothing measured


def test_no_report_no_costs(tmp_path):
    assert committed_seconds(tmp_path / "missing.json") == {}
    (tmp_path / "broken.json").write_text("{")
    assert committed_seconds(tmp_path / "broken.json") == {}


def test_a_full_run_is_scheduled_by_the_report_a_shorter_one_by_the_benchmarks_default_costs(tmp_path):
    report, suite_cost = tmp_path / "equivalence.json", tmp_path / "suite_cost.json"
    report.write_text('{"cost": {"seconds": {"a": 100.0, "b": 10.0}}}')
    suite_cost.write_text('{"cost": {"seconds": {"a": 1.0, "b": 10.0}}}')
    assert seconds_at("full", report, suite_cost) == {"a": 100.0, "b": 10.0}
    assert seconds_at("default", report, suite_cost) == {"a": 1.0, "b": 10.0}
    assert seconds_at("quick", report, suite_cost) == {"a": 1.0, "b": 10.0}
    suite_cost.unlink()  # no benchmark yet: the report's, the best there is
    assert seconds_at("default", report, suite_cost) == {"a": 100.0, "b": 10.0}


def test_a_cost_file_of_the_wrong_shape_is_no_costs(tmp_path):
    for text in ('[1, 2]', '{"cost": [1]}', '{"cost": {"seconds": {"a": "slow", "b": 2}}}'):
        (tmp_path / "odd.json").write_text(text)
        assert committed_seconds(tmp_path / "odd.json") == ({"b": 2.0} if "slow" in text else {})


class _System:
    def __init__(self, name, process_env=None):
        self.name, self.process_env = name, process_env or {}


JAX = {"KERAS_BACKEND": "jax"}
CLASSES = {name: _System(name, env) for name, env in (
    ("torch-lstm", None), ("torch-lstm-rnn", None), ("numpy-split", None), ("keras-jax-lstm", JAX),
    ("keras-jax-gru", JAX))}


def test_a_systems_tests_are_one_unit_of_work_a_child_backends_systems_one_together():
    unit = {nodeid: unit_of(nodeid, CLASSES) for nodeid in (
        "tests/equivalence/test_reference.py::test_matches[torch-lstm-default-float32-I7-H5]",
        "tests/equivalence/test_padded.py::test_padded[torch-lstm-tanh-float64-L1]",
        "tests/equivalence/test_reference.py::test_matches[torch-lstm-rnn-default-float32-I7-H5]",
        "tests/equivalence/test_reference.py::test_matches[keras-jax-lstm-default-float32-I7]",
        "tests/equivalence/test_mutations.py::test_caught[keras-jax-gru-float32-gates i and f swapped]",
        "tests/equivalence/test_pairs.py::test_pair[torch-lstm-vs-keras-jax-lstm-default-I3]",
        "tests/equivalence/test_pairs.py::test_pair[torch-lstm-vs-numpy-split-default-I3]",
        "tests/harness/test_report.py::test_one[a]@broken-run",
        "tests/harness/test_report.py::test_two",
        "tests/harness/test_depth.py::test_design[default]")}
    values = list(unit.values())
    assert values[0] == values[1] == "system torch-lstm"  # one system's tests, whatever their module
    assert values[2] == "system torch-lstm-rnn"  # the longest name that matches
    assert values[3] == values[4] == values[5] == "child KERAS_BACKEND=jax"  # one child process, its pairs too
    assert values[6] == "system torch-lstm"  # a pair without a child goes with its first system
    assert values[7] == "group broken-run"  # xdist's own group, where it wrote one (pytest before 9.2)
    assert values[8] == "module tests/harness/test_report.py" != values[9]  # the harness's tests: by module


def test_a_pair_id_names_both_systems():
    names = sorted(CLASSES, key=len, reverse=True)
    assert systems_of("t.py::test[torch-lstm-rnn-vs-numpy-split-default]", names) == ("torch-lstm-rnn", "numpy-split")
    assert systems_of("t.py::test[torch-lstm-default]", names) == ("torch-lstm", None)
    assert systems_of("t.py::test[torch-lstmx]", names) == (None, None)
    assert systems_of("t.py::test_plain", names) == (None, None)
