"""A pytest plugin that makes systems disagree, to check that a disagreement is reported, not a crash.

    RNN_EQ_PERTURB="torch,torch-rnn=0.001" pytest -p tests.harness.perturb ...   outputs scaled by 1 + 0.001
    RNN_EQ_PERTURB="numpy-concat=raise" pytest -p tests.harness.perturb ...      run_native raises

Applied in ``run_native`` of the named adapter classes, so cells, layers and pairs all see it.
"""

from __future__ import annotations

import os

from rnn_equivalence.frameworks import adapter_class

ENV_VAR = "RNN_EQ_PERTURB"


def pytest_configure(config):
    names, _, effect = os.environ[ENV_VAR].partition("=")
    for name in names.split(","):
        cls = adapter_class(name)
        original = cls.run_native

        def run_native(self, *args, _original=original, **kwargs):
            if effect == "raise":
                raise RuntimeError(f"{self.name} broke on purpose")
            return {key: value * value.dtype.type(1 + float(effect))
                    for key, value in _original(self, *args, **kwargs).items()}

        cls.run_native = run_native
