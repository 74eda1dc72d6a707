"""The run's order (rnn_equivalence.harness.schedule): the costliest systems first, each system's tests together."""

from rnn_equivalence.harness.schedule import by_cost, committed_seconds


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
