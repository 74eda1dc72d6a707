"""One step and one sequence of any cell of the family, by the cell's own equations.

The state is a small dict of column arrays: {"h": (H, batch)}, and "c" for an
LSTM. The vanilla cell is the lecture's formula 2 (``rnn_equivalence.reference.rnn.split_step``)
with b = b_x + b_h; the gated cells are ``rnn_equivalence.reference.gated``'s.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.gated import clip, gru_step, lstm_step
from rnn_equivalence.reference.params import CellParams, check_sequence
from rnn_equivalence.reference.rnn import split_step


def step(p: CellParams, x, state: dict) -> dict:
    """One step on columns: x (I, batch), state {"h": (H, batch), ...} -> the next state."""
    if p.family == "rnn" and p.gate_clip is not None:  # the lecture's formula, clipped before g
        pre_activation = split_step(p.W_hh, p.W_hx, state["h"], x, p.b, "identity")
        return {"h": activation(p.activation)(clip(pre_activation, p.gate_clip))}
    if p.family == "rnn":
        return {"h": split_step(p.W_hh, p.W_hx, state["h"], x, p.b, p.activation)}
    if p.family == "lstm":
        h, c = lstm_step(p, x, state["h"], state["c"])
        return {"h": h, "c": c}
    return {"h": gru_step(p, x, state["h"])}


def sequence(p: CellParams, xs, state=None) -> dict:
    """Every state over ``xs`` (T, batch, I) from ``state`` ({"h": (batch, H), ...}, zeros if None):
    {"h": (T, batch, H)}, and "c" for an LSTM."""
    xs, state = check_sequence(p, xs, state)
    state = {key: value.T for key, value in state.items()}  # columns, as in the lecture
    trace = {key: [] for key in state}
    for x in xs:
        state = step(p, x.T, state)
        for key, value in state.items():
            trace[key].append(value.T)
    return {key: np.stack(values) for key, values in trace.items()}
