"""docs/LAYOUT.md's worked example is a real adapter's code: each block headed ``# frameworks/MODULE.py: NAME``
is the source of that class, as the module has it, so the page cannot drift from the code."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "LAYOUT.md"
BLOCK = re.compile(r"```python\n# frameworks/(\w+)\.py: (\w+)\n(.*?)```", re.S)
BLOCKS = BLOCK.findall(PAGE.read_text())


def test_the_example_shows_a_mapping_a_runner_and_a_system():
    assert {name for _, name, _ in BLOCKS} >= {"TorchMapping", "TorchCellRunner", "TorchRNNCell"}


@pytest.mark.parametrize("module, name, code", BLOCKS, ids=[name for _, name, _ in BLOCKS])
def test_each_block_is_the_class_it_names(module, name, code):
    cls = getattr(importlib.import_module(f"rnn_equivalence.frameworks.{module}"), name)
    assert code.rstrip() == inspect.getsource(cls).rstrip()
