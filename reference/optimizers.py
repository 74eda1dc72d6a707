"""One optimizer step in NumPy, on the weights as a system stores them: SGD, and Adam's first step.

    SGD    w' = w - lr g                                  (no momentum, no weight decay)
    Adam   from m = v = 0, step t = 1 (Kingma and Ba, Algorithm 1):
           m = (1 - b1) g,  v = (1 - b2) g^2
           epsilon after the bias correction (PyTorch's torch.optim.Adam, optax.adam):
               w' = w - lr m^ / (sqrt(v^) + eps),  m^ = m / (1 - b1^t), v^ = v / (1 - b2^t)
           epsilon before it (Keras 3 and Keras 2 ``Adam``: the paper's "epsilon hat"):
               w' = w - lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps_hat)
           At t = 1 both are w - lr g / (|g| + e), with e = eps, or eps_hat / sqrt(1 - b2): Keras's
           default 1e-7 is e = 3.2e-6 there, PyTorch's 1e-8 is e = 1e-8 (tests/equivalence/
           test_optimizer.py proves the difference); eps_hat = eps sqrt(1 - b2^t) maps one onto the
           other at step t (``epsilon_for``).

A step is taken on each tensor a system stores. A system that stores one bias b = b_x + b_h steps it
once, with dL/db = dL/db_x = dL/db_h; one that stores both steps each: after SGD the sum b_x + b_h
has moved by lr g in the first and by 2 lr g in the second. The same weights and data give another
model after one step, which no mapping of the weights undoes (test_optimizer.py measures it).
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.params import GATES
from rnn_equivalence.reference.stack import StackParams

EPSILON_PLACEMENTS = ("after_correction", "before_correction")


def epsilon_for(placement: str, epsilon: float, beta_2: float, step: int = 1) -> float:
    """The epsilon a system with ``placement`` takes to make the step of ``epsilon`` added after the
    bias correction."""
    if placement not in EPSILON_PLACEMENTS:
        raise ValueError(f"placement: expected one of {EPSILON_PLACEMENTS}, got {placement!r}")
    return epsilon if placement == "after_correction" else epsilon * np.sqrt(1 - beta_2 ** step)


def update(g, optimizer: dict, placement: str = "after_correction"):
    """The first step's w - w', in float64, for {"name", "learning_rate", "beta_2", "epsilon"}."""
    lr = optimizer["learning_rate"]
    if optimizer["name"] == "sgd":
        return lr * g
    if optimizer["name"] == "adam":
        return lr * g / (np.abs(g) + effective_epsilon(optimizer, placement))
    raise ValueError(f"optimizer: expected 'sgd' or 'adam', got {optimizer['name']!r}")


def effective_epsilon(optimizer: dict, placement: str) -> float:
    """e in the first Adam step w - lr g / (|g| + e)."""
    epsilon = optimizer["epsilon"]
    return epsilon if placement == "after_correction" else epsilon / np.sqrt(1 - optimizer["beta_2"])


def stored(params: StackParams, grads: StackParams, kept_hidden_biases) -> StackParams:
    """``params`` and ``grads`` as a system stores them, in canonical form (a stored sum as b_x, b_h = 0,
    as ``Adapter.from_native`` returns it): the gradient of a stored sum is dL/db_x (= dL/db_h)."""
    def one(p, g):
        if not p.has_bias:
            return p, g
        H, b_x, b_h, g_x, g_h = p.hidden_size, p.b_x.copy(), p.b_h.copy(), g.b_x.copy(), g.b_h.copy()
        for j, gate in enumerate(GATES[p.family]):
            if gate not in kept_hidden_biases:
                rows = slice(j * H, (j + 1) * H)
                b_x[rows], b_h[rows], g_h[rows] = b_x[rows] + b_h[rows], 0.0, 0.0
        return p.replace(b_x=b_x, b_h=b_h), g.replace(b_x=g_x, b_h=g_h)

    pairs = [[one(p, g) for p, g in zip(layer_p, layer_g)] for layer_p, layer_g in zip(params.layers, grads.layers)]
    return (StackParams([[p for p, _ in layer] for layer in pairs]),
            StackParams([[g for _, g in layer] for layer in pairs]))


def step(params: StackParams, grads: StackParams, optimizer: dict, kept_hidden_biases=(),
         placement: str = "after_correction") -> StackParams:
    """The weights after one step on the tensors a system stores (``stored``), in canonical form."""
    params, grads = stored(params, grads, kept_hidden_biases)
    names = ("W_x", "W_h", "b_x", "b_h")
    return StackParams([[p.replace(**{n: getattr(p, n) - update(getattr(g, n), optimizer, placement)
                                      for n in names if getattr(p, n) is not None})
                         for p, g in zip(layer_p, layer_g)] for layer_p, layer_g in zip(params.layers, grads.layers)])
