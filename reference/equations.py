"""The cell equations, written once, evaluated over an arithmetic.

Canonical layout (``rnn_equivalence.reference.params``):

    LSTM: gates i, f, g, o stacked in that order; W_x (4H, I), W_h (4H, H), b_x, b_h (4H)
    GRU:  gates r, z, n stacked in that order;    W_x (3H, I), W_h (3H, H), b_x, b_h (3H)

Equations, column vectors (one column per batch element); sigma, tanh, tanh are
the default activations f, g, h (``CellParams.gate_activations``: Keras's
``recurrent_activation`` is f, its ``activation`` g and h; ONNX's ``activations``
list them in this order):

    LSTM  i = f(W_xi x + b_xi + W_hi h + b_hi + p_i * c)      (p_i * c: peepholes only)
          f = f(W_xf x + b_xf + W_hf h + b_hf + p_f * c)      or 1 - i (coupled gates)
          g = g(W_xg x + b_xg + W_hg h + b_hg)
          c' = f * c + i * g,  then clipped to +-cell_clip     (TF1 cell_clip)
          o = f(W_xo x + b_xo + W_ho h + b_ho + p_o * c')     (o's peephole reads the new c)
          h' = o * h(c'),  then W_proj h' clipped to +-proj_clip (projection: h has P units)

    GRU   r = f(W_xr x + b_xr + W_hr h + b_hr)       z likewise
          reset after  (PyTorch, Keras reset_after=True, ONNX linear_before_reset=1):
              n = g(W_xn x + b_xn + r * (W_hn h + b_hn))
          reset before (Keras reset_after=False, TF1 GRUCell, ONNX default):
              n = g(W_xn x + b_xn + W_hn (r * h) + b_hn)
          h' = (1 - z) * n + z * h

With ``gate_clip`` (ONNX ``clip``: "applied to the input of activations") every
argument of f, g and h above is clipped to +-gate_clip before the activation, c' on
its way into h(c') included, while the state c' itself is kept as it is. TF1's
``cell_clip`` clips the state c itself: a different function
(tests/equivalence/test_non_equivalence.py). ONNX Runtime clips the arguments of f
and g but not c' before h (microsoft/onnxruntime#27224): a strict expected failure.

The two GRU variants are different functions: r multiplies W_hn h + b_hn in one
and h alone in the other. They coincide for all inputs only when W_hn is
diagonal and b_hn is zero, so no weight mapping turns one into the other in
general. The tests prove the difference on random weights.

The vanilla cell is h' = g(W_x x + b_x + W_h h + b_h), clipped to +-gate_clip before g: the
lecture's formula 2 (``rnn_equivalence.reference.rnn.split_step``, which stays the reference's own statement of it).

An arithmetic ``ar`` evaluates the operations these equations are made of (``affine`` sums of
products and biases, ``act``, ``clip``, ``mul``, ``add``, ``one_minus``; ``slack`` for another order
of the same operations). ``Exact`` is plain NumPy: the reference (in float64, or a run in another
dtype). ``rnn_equivalence.reference.tolerance.Arithmetic`` carries a running error bound with every value: the same
equations, run on it, are the rounding-error bound of every system (reference/tolerance.py), and
``rnn_equivalence.reference.backward`` runs its backward pass on either. Each step returns its next state and a
tape of what the backward pass needs.

TF1 adds a constant ``forget_bias`` to f in its forward pass, which its mapping folds out of the
stored bias; the equations take it as two more terms of f's sum (+fb and -fb): they cancel in the
value and cost two roundings in the bound.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.reference.activations import activation, derivative
from rnn_equivalence.reference.formats import numpy_dtype


class Exact:
    """The arithmetic of the reference: plain NumPy, no error carried; in float64, or in another dtype
    (a float32 run of the same equations, which the tests hold to the bound)."""

    def __init__(self, dtype=np.float64):
        self.dtype = numpy_dtype(dtype)  # "bfloat16" too (ml_dtypes')

    def lift(self, array) -> np.ndarray:
        return np.asarray(array, self.dtype)

    def affine(self, products, biases=(), diagonal=()):
        """sum_k W_k v_k + the biases (+ d * v for each (d, v) of ``diagonal``: peepholes), in that order."""
        total = sum(W @ v for W, v in products)
        for b in biases:
            total = total + b[:, None]
        for d, v in diagonal:
            total = total + d[:, None] * v
        return total

    def act(self, g, a):
        return activation(g)(a)

    def clip(self, a, threshold):
        """``a`` clipped to [-threshold, threshold]; unchanged for threshold None."""
        return a if threshold is None else np.clip(a, -threshold, threshold)

    def slope(self, g, a):
        return derivative(g)(a).astype(self.dtype)

    def mul(self, a, b):
        return a * b

    def add(self, a, b, sign=1.0):
        return a + sign * b

    def one_minus(self, a):
        return self.dtype.type(1.0) - a

    def outer_sum(self, pairs):
        return sum(c @ v.T for c, v in pairs)

    def slack(self, a, roundings, *products):
        return a  # another order of the same operations: only the bound cares


def block(tensor, k: int, H: int):
    """Gate k's rows (or entries) of a stacked tensor."""
    return tensor[k * H:(k + 1) * H]


def biases(p, k: int, side=None, extra=()) -> list:
    """Gate k's biases as terms of its sum: both, or one side's ("x", "h"), and ``extra`` terms; none
    for a cell without biases (but the extra)."""
    if not p.has_bias:
        return list(extra)
    H = p.hidden_size
    return {None: [block(p.b_x, k, H), block(p.b_h, k, H)], "x": [block(p.b_x, k, H)],
            "h": [block(p.b_h, k, H)]}[side] + list(extra)


# --- one step of each cell, on columns: x (I, batch), state {"h": (H or P, batch), "c": (H, batch)} ---
# step(ar, p, x, state, forget_bias=0.0) -> (next state, tape)

def rnn_step(ar, p, x, state, forget_bias=0.0):
    a = ar.affine([(p.W_x, x), (p.W_h, state["h"])], biases(p, 0))
    return {"h": ar.act(p.activation, ar.clip(a, p.gate_clip))}, {"a": a}


def lstm_step(ar, p, x, state, forget_bias=0.0):
    H, (f_act, g_act, h_act) = p.hidden_size, p.gate_activations
    h, c = state["h"], state["c"]
    peep = [block(p.peepholes, k, H) for k in range(3)] if p.peepholes is not None else None
    # TF1's forget_bias, +fb and -fb in f's sum, for every arithmetic (one definition): on ``Arithmetic`` they
    # are the two roundings TF1's folded bias costs. Under ``Exact`` they would cancel only up to a float64
    # rounding, but the reference never passes them: rnn_equivalence.reference.gated and
    # rnn_equivalence.reference.backward.gradients run with forget_bias = 0, so no term is added and the
    # reference's sum is unchanged, bit for bit.
    folded = [np.full(H, forget_bias), np.full(H, -forget_bias)] if forget_bias else []

    def pre_activation(k, extra=(), diagonal=()):  # gates in PyTorch's order: input, forget, candidate, output
        return ar.affine([(block(p.W_x, k, H), x), (block(p.W_h, k, H), h)], biases(p, k, extra=extra), diagonal)

    a = [pre_activation(0, diagonal=[(peep[0], c)] if peep else []),
         pre_activation(1, folded, diagonal=[(peep[1], c)] if peep else []),
         pre_activation(2)]
    i = ar.act(f_act, ar.clip(a[0], p.gate_clip))
    f = ar.one_minus(i) if p.coupled_gates else ar.act(f_act, ar.clip(a[1], p.gate_clip))
    g = ar.act(g_act, ar.clip(a[2], p.gate_clip))
    c_next = ar.clip(ar.add(ar.mul(f, c), ar.mul(i, g)), p.cell_clip)
    a.append(pre_activation(3, diagonal=[(peep[2], c_next)] if peep else []))  # o's peephole reads the new c
    o = ar.act(f_act, ar.clip(a[3], p.gate_clip))
    h_of_c = ar.act(h_act, ar.clip(c_next, p.gate_clip))  # c' itself is kept unclipped
    h_next = ar.mul(o, h_of_c)
    if p.W_proj is not None:
        h_next = ar.clip(ar.affine([(p.W_proj, h_next)]), p.proj_clip)
    return {"h": h_next, "c": c_next}, dict(a=a, i=i, f=f, g=g, o=o, c_next=c_next, h_of_c=h_of_c)


def gru_step(ar, p, x, state, forget_bias=0.0):
    H, (f_act, g_act) = p.hidden_size, p.gate_activations
    h = state["h"]
    W = lambda tensor, k: block(tensor, k, H)  # gates in PyTorch's order: reset, update, new
    a_r = ar.affine([(W(p.W_x, 0), x), (W(p.W_h, 0), h)], biases(p, 0))
    a_z = ar.affine([(W(p.W_x, 1), x), (W(p.W_h, 1), h)], biases(p, 1))
    r, z = ar.act(f_act, ar.clip(a_r, p.gate_clip)), ar.act(f_act, ar.clip(a_z, p.gate_clip))
    tape = dict(a_r=a_r, a_z=a_z, r=r, z=z)
    if p.variant == "reset_after":  # r multiplies W_hn h + b_hn
        tape["hidden_n"] = ar.affine([(W(p.W_h, 2), h)], biases(p, 2, "h"))
        a_n = ar.add(ar.affine([(W(p.W_x, 2), x)], biases(p, 2, "x")), ar.mul(r, tape["hidden_n"]))
    else:  # reset before: r multiplies h alone
        tape["r_h"] = ar.mul(r, h)
        a_n = ar.affine([(W(p.W_x, 2), x), (W(p.W_h, 2), tape["r_h"])], biases(p, 2))
    n = ar.act(g_act, ar.clip(a_n, p.gate_clip))
    tape.update(a_n=a_n, n=n)
    h_next = ar.add(ar.mul(ar.one_minus(z), n), ar.mul(z, h))
    # Another order of the same update, n + z (h - n) (PyTorch's fused kernel), propagates the errors in
    # n, z and h alike (same function, same derivatives) but rounds other intermediates: three more
    # roundings of |n| + |h| + |z h| + |z n| (>= |n| + |h| + |z (h - n)|).
    return {"h": ar.slack(h_next, 3, (n,), (h,), (z, h), (z, n))}, tape


STEPS = {"rnn": rnn_step, "lstm": lstm_step, "gru": gru_step}
