"""What MLX's layers do beyond the numbers the reference, gradient and optimizer tests compare, each against the
public thread that reported it (reproduced, or refuted on the installed version):

- ml-explore/mlx#3249, "nn.GRU drops b_hn at the first step when no hidden state is given": refuted here
  (mlx/nn/layers/recurrent.py adds r * bhn at that step), and by every mlx-gru case from no initial state.
- MLX's Adam has no bias correction by default: another optimizer than the textbook Adam the suite steps
  (the system steps with ``bias_correction=True``).
- MLX's CPU exp is float32-accurate in float64 (ml-explore/mlx#3047): the known-issue rows, strict.
"""

from __future__ import annotations

import numpy as np
import pytest

from rnn_equivalence.engine import against_reference
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig


def is_mlx(cls) -> bool:
    return cls.__module__ == "rnn_equivalence.frameworks.mlx_layers"


@pytest.mark.applies_to(lambda cls: is_mlx(cls) and cls.family == "gru")
def test_gru_adds_b_hn_at_the_first_step_from_no_state(adapter):
    """mlx#3249 (refuted on the installed MLX): one step of nn.GRU from no hidden state is within the bound of
    the reference; the same weights with b_hn dropped, what the report saw, are beyond it, so the case tells
    the two apart."""
    config = LayerConfig(1, False, initial_state=False)
    case = case_of(adapter, 3, 4, 2, 1, 3249, config)
    comparison, _ = against_reference(adapter, case, "float32")
    assert_within_bound(comparison)
    native = adapter.to_native(case.stack("float32"), config)
    dropped = adapter.run_native({**native, "bhn": np.zeros_like(native["bhn"])}, case.inputs("float32"), None,
                                 config, case.activation)
    expected = adapter.arrange(case.reference(), config)
    bounds = adapter.arrange(case.bound_vs_reference("float32"), config)
    assert compare_outputs(dropped, expected, bounds, "b_hn dropped at the first step").ratio > 100


@pytest.mark.applies_to(lambda cls: is_mlx(cls) and cls.family == "rnn")
def test_default_adam_has_no_bias_correction(adapter):
    """``mlx.optimizers.Adam`` with its defaults takes, at step 1, lr * m / (sqrt(v) + eps) with m = (1 - b1) g and
    v = (1 - b2) g^2: about lr * 3.16 * sign(g), where the textbook Adam (``bias_correction=True``) takes
    lr * sign(g). The default is therefore another optimizer, which the suite does not step with."""
    mx, optim = adapter.mx, adapter.optim
    g = np.array([0.5, -2.0, 1e-3])
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    params = {"w": mx.array(np.zeros(3, np.float32))}
    default = np.asarray(optim.Adam(learning_rate=lr).apply_gradients({"w": mx.array(g.astype(np.float32))},
                                                                      params)["w"])
    corrected = np.asarray(optim.Adam(learning_rate=lr, bias_correction=True).apply_gradients(
        {"w": mx.array(g.astype(np.float32))}, params)["w"])
    uncorrected = -lr * (1 - b1) * g / (np.sqrt((1 - b2) * g * g) + eps)
    textbook = -lr * g / (np.sqrt(g * g) + eps)
    np.testing.assert_allclose(default, uncorrected, rtol=1e-5)
    np.testing.assert_allclose(corrected, textbook, rtol=1e-5)
    assert np.all(np.abs(default / textbook) > 3)
