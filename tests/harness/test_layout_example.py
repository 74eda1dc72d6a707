"""docs/LAYOUT.md's worked example is a real adapter's code: each block headed ``# frameworks/MODULE.py: NAME``
is the source of that class, as the module has it, so the page cannot drift from the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "LAYOUT.md"
BLOCK = re.compile(r"```python\n# frameworks/(\w+)\.py: (\w+)\n(.*?)```", re.S)
BLOCKS = BLOCK.findall(PAGE.read_text())


def test_the_example_shows_a_mapping_a_runner_and_a_system():
    assert {name for _, name, _ in BLOCKS} >= {"TorchMapping", "TorchCellRunner", "TorchRNNCell"}


def class_source(module: str, name: str) -> str:
    """The source of class ``name`` as frameworks/``module``.py has it on disk, found by parsing the file (not through
    an imported module and ``linecache``, whose state other tests in the same worker share)."""
    text = (ROOT / "frameworks" / f"{module}.py").read_text()
    found = [node for node in ast.parse(text).body if isinstance(node, ast.ClassDef) and node.name == name]
    assert len(found) == 1, f"frameworks/{module}.py: {len(found)} top-level classes named {name}"
    return ast.get_source_segment(text, found[0])


@pytest.mark.parametrize("module, name, code", BLOCKS, ids=[name for _, name, _ in BLOCKS])
def test_each_block_is_the_class_it_names(module, name, code):
    assert code.rstrip() == class_source(module, name).rstrip()
