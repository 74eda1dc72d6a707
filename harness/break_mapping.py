"""A pytest plugin that breaks one adapter's mapping on purpose, to watch the suite go red.

    RNN_EQ_BREAK="torch=weight_hh transposed" pytest -p rnn_equivalence.harness.break_mapping --frameworks=torch

The value names a system and one of its declared mutations
(``Adapter.mutations``); that mutation is applied inside the adapter's
``to_native``, exactly where a wrong mapping would live, for cells and layers
alike (one signature). Every equivalence test of that system should then
fail, and the summary should say "NOT equivalent".
"""

from __future__ import annotations

import os

import pytest

from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.reference.config import CELL

ENV_VAR = "RNN_EQ_BREAK"


def pytest_configure(config):
    value = os.environ.get(ENV_VAR)
    if not value:
        raise pytest.UsageError(f"-p rnn_equivalence.harness.break_mapping needs {ENV_VAR}='<framework>=<mutation>'")
    name, _, mutation = value.partition("=")
    cls = adapter_class(name.strip())
    if mutation.strip() not in cls.mutations:
        raise pytest.UsageError(f"{ENV_VAR}: {name!r} has no mutation {mutation!r}; "
                                f"expected one of {sorted(cls.mutations)}")
    correct, wrong = cls.to_native, cls.mutations[mutation.strip()]
    cls.to_native = lambda self, params, config=CELL: wrong(correct(self, params, config))
