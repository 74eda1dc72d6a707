"""The backward pass through time, by hand: the gradient of a scalar loss with respect to every
canonical parameter, the inputs and the initial states, for every cell of the family, stacked and
bidirectional, over whole or padded batches.

The loss, the one every framework differentiates (tests/equivalence/test_gradients.py):

    L = sum over the results r of ``rnn_equivalence.reference.stack.run_stack`` (output, h_n; c_n and c_output for an
        LSTM) of <r, C_r>,  C_r a fixed cotangent of r's shape (a missing one is zero)

so dL/dr = C_r and every result's path back is exercised.

Per step, the adjoint of the cell's equations (``rnn_equivalence.reference.equations``), on columns
like them; a = the pre-activations, "d" the gradient of L, * elementwise:

    vanilla  h' = g(a)                      da = dh' * g'(a)
    LSTM     c' = f * c + i * g, h' = o * h(c')
             do = dh' * h(c');  dc' += dh' * o * h'(c')
             di = dc' * g, df = dc' * c, dg = dc' * i;  dc = dc' * f
             da_i = di * f'(a_i), da_f = df * f'(a_f), da_g = dg * g'(a_g), da_o = do * f'(a_o)
    GRU      h' = (1 - z) * n + z * h
             dn = dh' * (1 - z), dz = dh' * (h - n);  dh = dh' * z + ...
             da_n = dn * g'(a_n), da_r = dr * f'(a_r), da_z = dz * f'(a_z)
             reset after,  a_n = W_xn x + b_xn + r * (W_hn h + b_hn):
                 the hidden side's n block gets da_n * r, and dr = da_n * (W_hn h + b_hn)
             reset before, a_n = W_xn x + b_xn + W_hn (r * h) + b_hn:
                 d(r h) = W_hn^T da_n, dr = d(r h) * h, dh += d(r h) * r;  W_hn's input is r * h
    every cell, with da_x the input side's and da_h the hidden side's gate gradients (equal but for
    the GRU's n block), v the vector each block of W_h multiplies:
             dx = W_x^T da_x,  dh += W_h^T da_h
             dW_x = sum_t da_x x^T,  dW_h = sum_t da_h v^T,  db_x = sum_t da_x,  db_h = sum_t da_h
             (sums over every step and batch element)

Through a sequence the state's gradient runs backwards: step t receives what step t + 1 sent back
plus the loss's own cotangent on its state. A stack runs its top layer back first: a layer's input
gradient (summed over both directions) is the gradient of the outputs of the layer below. A
backward direction and a padded batch read their steps as ``rnn_equivalence.reference.stack.reading_plan`` says,
and a reported position's cotangent goes back to the step it reports (under "repeat", the last
real step receives those of the padded positions that copy it; a padded step receives nothing).

Written once over an arithmetic ``ar``: ``rnn_equivalence.reference.equations.Exact`` (plain NumPy: the
reference, in float64), and ``rnn_equivalence.reference.tolerance.Arithmetic``, whose values carry error
bounds, so that the same code run on it is the running error bound of the backward pass.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.equations import (  # noqa: F401 (Exact: rnn_equivalence.reference.backward.Exact)
    Exact, block as _block, gru_step, lstm_step, rnn_step,
)
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.stack import StackParams, _concatenate, _stack, reading_plan

RESULTS = ("output", "h_n", "c_n", "c_output")


# --- one step back of each cell (the step forward, with its tape, is rnn_equivalence.reference.equations') ---------
# backward(ar, p, x, state, tape, d_next) -> (d_state, da_x (G*H, B), [(first row, last row, da_h, v), ...])

def rnn_backward(ar, p, x, state, tape, d):
    da = ar.mul(d["h"], ar.slope(p.activation, tape["a"]))
    return {"h": ar.affine([(p.W_h.T, da)])}, da, [(0, p.W_h.shape[0], da, state["h"])]


def lstm_backward(ar, p, x, state, tape, d):
    f_act, g_act, h_act = p.gate_activations
    a, i, f, g, o = (tape[k] for k in "aifgo")
    d_o = ar.mul(d["h"], tape["h_of_c"])
    dc = ar.add(d["c"], ar.mul(ar.mul(d["h"], o), ar.slope(h_act, tape["c_next"])))
    da = _concatenate([ar.mul(ar.mul(dc, g), ar.slope(f_act, a[0])),  # i
                       ar.mul(ar.mul(dc, state["c"]), ar.slope(f_act, a[1])),  # f
                       ar.mul(ar.mul(dc, i), ar.slope(g_act, a[2])),  # g
                       ar.mul(d_o, ar.slope(f_act, a[3]))], axis=0)  # o
    d_state = {"h": ar.affine([(p.W_h.T, da)]), "c": ar.mul(dc, f)}
    return d_state, da, [(0, p.W_h.shape[0], da, state["h"])]


def gru_backward(ar, p, x, state, tape, d):
    H, (f_act, g_act) = p.hidden_size, p.gate_activations
    h, r, z, n, dh_next = state["h"], tape["r"], tape["z"], tape["n"], d["h"]
    # dn as dh' - dh' z and dz as dh' h - dh' n in other orders: two roundings more of each product.
    dn = ar.slack(ar.mul(dh_next, ar.one_minus(z)), 2, (dh_next,), (dh_next, z))
    dz = ar.slack(ar.mul(dh_next, ar.add(h, n, -1.0)), 2, (dh_next, h), (dh_next, n))
    da_n = ar.mul(dn, ar.slope(g_act, tape["a_n"]))
    W_hn = _block(p.W_h, 2, H)
    if p.variant == "reset_after":
        dr, da_hn = ar.mul(da_n, tape["hidden_n"]), ar.mul(da_n, r)
    else:
        d_rh = ar.affine([(W_hn.T, da_n)])
        dr = ar.mul(d_rh, h)
    da_rz = _concatenate([ar.mul(dr, ar.slope(f_act, tape["a_r"])), ar.mul(dz, ar.slope(f_act, tape["a_z"]))], axis=0)
    da_x = _concatenate([da_rz, da_n], axis=0)
    if p.variant == "reset_after":
        da_h = _concatenate([da_rz, da_hn], axis=0)
        dh = ar.affine([(p.W_h.T, da_h)])
        hidden_side = [(0, 3 * H, da_h, h)]
    else:
        dh = ar.add(ar.affine([(p.W_h[:2 * H].T, da_rz)]), ar.mul(d_rh, r))
        hidden_side = [(0, 2 * H, da_rz, h), (2 * H, 3 * H, da_n, tape["r_h"])]
    return {"h": ar.add(dh, ar.mul(dh_next, z))}, da_x, hidden_side


STEPS = {"rnn": (rnn_step, rnn_backward), "lstm": (lstm_step, lstm_backward), "gru": (gru_step, gru_backward)}


# --- a stack: layers, directions, padded batches -------------------------------------------------
def _zeros(ar, shape):
    return ar.lift(np.zeros(shape))


def _groups(padding, batch):
    """The batch columns run together: all of them, or each element alone when padded."""
    return [slice(None)] if padding is None else [slice(b, b + 1) for b in range(batch)]


def stack_gradients(ar, stack, xs, state, cotangents: dict, padding: Padding | None = None,
                    padded_output: str = "zeros", forget_bias: float = 0.0) -> dict:
    """dL/d(everything) for L = sum_r <r, cotangents[r]> over ``run_stack``'s results.

    ``xs`` (T, batch, I) and ``state`` ({"h": (L*D, batch, H), ...} or None) as ``ar`` values
    (``ar.lift``), ``cotangents`` as arrays, by result name (``RESULTS``; a missing one is zero).
    Returns {"params": per layer, per direction {"W_x", "W_h", "b_x", "b_h"} (no biases for a cell
    without them), "inputs": (T, batch, I), "state": {key: (L*D, batch, H)}}, in ``ar``'s values."""
    stack = StackParams.of(stack)
    if stack.options:
        raise ValueError(f"gradients: the options {list(stack.options)} have no backward pass here; expected a "
                         f"cell without options")
    if isinstance(padding, tuple):
        raise ValueError("gradients: expected one padding for both directions, got a pair")
    T, B = xs.shape[0], xs.shape[1]
    D, keys = stack.num_directions, state_keys(stack.family)
    unknown = sorted(set(cotangents) - set(RESULTS))
    if unknown:
        raise ValueError(f"cotangents: expected keys among {RESULTS}, got {unknown}")
    groups = _groups(padding, B)

    def initial(k, d, group, key):
        if state is None:
            return _zeros(ar, (stack.state_size(key), len(range(B)[group])))
        return state[key][k * D + d][group].T

    # Forward: each run (a direction over a group of columns) with its states and tapes.
    layer_input, runs = xs, []
    for k, layer in enumerate(stack.layers):
        runs.append([])
        outputs = []
        for d, p in enumerate(layer):
            forward = STEPS[p.family][0]
            per_group, columns = [], {}
            for group in groups:
                b = group.start or 0
                reading, rows = reading_plan(padding, b, T, d == 1, padded_output)
                x_columns = [layer_input[t][group].T for t in reading]
                states, tapes = [{key: initial(k, d, group, key) for key in keys}], []
                for x in x_columns:
                    next_state, tape = forward(ar, p, x, states[-1], forget_bias)
                    states.append(next_state)
                    tapes.append(tape)
                per_group.append((group, reading, rows, x_columns, states, tapes))
                for j, t in enumerate(reading):
                    columns[(t, b)] = states[j + 1]["h"].T
            runs[k].append(per_group)
            # This direction's outputs at every real position (a padded one is never read above).
            H = p.output_size
            outputs.append(_stack([_concatenate([columns.get((t, group.start or 0),
                                                             _zeros(ar, (1 if padding else B, H)))
                                                 for group in groups], axis=0) for t in range(T)]))
        layer_input = _concatenate(outputs, axis=-1)

    # Backward: top layer first; each layer's input gradient is the gradient of the outputs below it.
    lift_cotangent = lambda name, shape: ar.lift(cotangents.get(name, np.zeros(shape)))
    H = stack.output_size
    L = stack.num_layers
    d_output = lift_cotangent("output", (T, B, D * H))
    params, d_state = [], {key: [None] * (L * D) for key in keys}
    d_inputs = None
    for k in reversed(range(L)):
        layer = stack.layers[k]
        d_x_sides = []  # per direction: {(t, b): da_x columns}
        layer_params = []
        for d, p in enumerate(layer):
            backward = STEPS[p.family][1]
            trace_cotangents = {"h": d_output[:, :, d * H:(d + 1) * H]}
            if k == L - 1 and "c" in keys:
                Hc = p.hidden_size
                trace_cotangents["c"] = lift_cotangent("c_output", (T, B, D * Hc))[:, :, d * Hc:(d + 1) * Hc]
            x_pairs, h_pairs, da_x_at, initial_gradients = [], [], {}, {key: [] for key in keys}
            for group, reading, rows, x_columns, states, tapes in runs[k][d]:
                final = {key: lift_cotangent(f"{key}_n", (L * D, B, stack.state_size(key)))[k * D + d][group].T
                         for key in keys}
                grad = final
                for j in reversed(range(len(reading))):
                    for key, trace in trace_cotangents.items():
                        for t in np.nonzero(rows == j + 1)[0]:  # every position reporting step j
                            grad = {**grad, key: ar.add(grad[key], trace[t][group].T)}
                    grad, da_x, hidden_side = backward(ar, p, x_columns[j], states[j], tapes[j], grad)
                    x_pairs.append((da_x, x_columns[j]))
                    h_pairs += hidden_side
                    da_x_at[(reading[j], group.start or 0)] = da_x
                for key in keys:
                    initial_gradients[key].append(grad[key].T)
            for key in keys:
                d_state[key][k * D + d] = _concatenate(initial_gradients[key], axis=0)
            layer_params.append(_parameter_gradients(ar, p, x_pairs, h_pairs))
            d_x_sides.append(da_x_at)
        params.insert(0, layer_params)
        # dx = sum over directions of W_x^T da_x: one sum, at each position each direction read.
        In = layer[0].input_size
        pieces = []
        for t in range(T):
            row = []
            for group in groups:
                b = group.start or 0
                terms = [(p.W_x.T, d_x_sides[d][(t, b)]) for d, p in enumerate(layer) if (t, b) in d_x_sides[d]]
                row.append(ar.affine(terms).T if terms else _zeros(ar, (1 if padding else B, In)))
            pieces.append(_concatenate(row, axis=0))
        d_inputs = _stack(pieces)
        d_output = d_inputs
    return {"params": params, "inputs": d_inputs, "state": {key: _stack(values) for key, values in d_state.items()}}


def _parameter_gradients(ar, p, x_pairs, h_pairs) -> dict:
    """dW = sum over every step and element of (gate gradient) (input)^T, each one sum of all its
    terms (a framework may add them in any order), and the biases' sums of gate gradients."""
    ones = lambda v: ar.lift(np.ones((1, v.shape[1])))
    grads = {"W_x": ar.outer_sum(x_pairs)}
    blocks = sorted({(first, last) for first, last, _, _ in h_pairs})
    by_block = {block: [(c, v) for first, last, c, v in h_pairs if (first, last) == block] for block in blocks}
    grads["W_h"] = _concatenate([ar.outer_sum(by_block[block]) for block in blocks], axis=0)
    if p.has_bias:
        grads["b_x"] = ar.outer_sum([(c, ones(v)) for c, v in x_pairs])[:, 0]
        grads["b_h"] = _concatenate([ar.outer_sum([(c, ones(v)) for c, v in by_block[block]])[:, 0]
                                     for block in blocks], axis=0)
    return grads


def gradients(stack, xs, state=None, cotangents=None, padding: Padding | None = None,
              padded_output: str = "zeros", dtype=np.float64) -> dict:
    """The float64 reference (or a run in ``dtype``): ``stack_gradients`` in plain NumPy arithmetic."""
    ar = Exact(dtype)
    state = None if state is None else {key: ar.lift(value) for key, value in state.items()}
    cotangents = {key: ar.lift(value) for key, value in (cotangents or {}).items()}
    return stack_gradients(ar, StackParams.of(stack).astype(dtype), ar.lift(xs), state, cotangents, padding,
                           padded_output)
