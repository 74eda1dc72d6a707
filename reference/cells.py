"""One step and one sequence of any cell of the family, by the cell's own equations.

The state is a small dict of column arrays: {"h": (H, batch)}, and "c" for an
LSTM. The vanilla cell is the lecture's formula 2 (``rnn_equivalence.reference.rnn.split_step``)
with b = b_x + b_h; the gated cells are ``rnn_equivalence.reference.gated``'s.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.gated import clip, gru_step, lstm_step
from rnn_equivalence.reference.params import CellParams
from rnn_equivalence.reference.rnn import split_step


def state_keys(family: str) -> tuple[str, ...]:
    return ("h", "c") if family == "lstm" else ("h",)


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


def check_sequence(p: CellParams, xs, state):
    """``xs`` as an array and the state as a dict of (batch, H) arrays (zeros where not given),
    or an error naming the argument, what was expected and what was received."""
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != p.input_size:
        raise ValueError(f"xs: expected shape (T, batch, I) with I={p.input_size}, got {xs.shape}")
    if xs.dtype != p.dtype:
        raise TypeError(f"xs: expected dtype {p.dtype} (the parameters' dtype), got {xs.dtype}")
    checked = {}
    for key in state_keys(p.family):
        expected = (xs.shape[1], p.state_size(key))
        value = None if state is None else state.get(key)
        if value is None:
            checked[key] = np.zeros(expected, p.dtype)
            continue
        value = np.asarray(value)
        if value.shape != expected:
            size = "P" if p.state_size(key) != p.hidden_size else "H"
            raise ValueError(f"{key}0: expected shape (batch, {size}) = {expected}, got {value.shape}")
        if value.dtype != p.dtype:
            raise TypeError(f"{key}0: expected dtype {p.dtype} (the parameters' dtype), got {value.dtype}")
        checked[key] = value
    return xs, checked


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
