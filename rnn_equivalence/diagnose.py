"""When two modules disagree, the mistakes people make when porting weights, tried one by one.

    explain(a, b, xs, state) -> [Explanation, ...]     those that explain b within the bound, best first

Each mistake is a function of canonical parameters (``rnn_equivalence.reference.params``): applied to ``a``'s, does it
give ``b``'s function? It is judged as ``rnn_equivalence.verify`` judges a pair: the float64 references of
mistake(a) and b on the same inputs and initial state, against the float32 bound of a run of each (a
half-format b: against the bound of mistake(a)'s weights rounded to its format, ``judges``).
An explanation says the mistake, its err/bound after the change, and before it ("b is a with the
LSTM gates i and f exchanged in W_x and W_h (err/bound 0.04 after, 3e+05 before)").

The catalogue, in the canonical names (``rnn_equivalence.reference.params``: W_x (G*H, I), W_h (G*H, H), b_x, b_h, gates
in PyTorch's order, LSTM i f g o, GRU r z n):
- gate blocks permuted (every permutation), in all four tensors, or in the kernels only; two blocks exchanged
  in one kernel only (W_x or W_h);
- a kernel's gate blocks transposed (a square H x H block of W_h; W_x where I = H);
- the biases: b_x or b_h dropped, one doubled (the sum put in both slots), both halved;
- TF1's forget_bias (1.0) not folded into the LSTM's f bias, or folded twice;
- the other GRU variant (reset_after <-> reset_before: where r multiplies);
- the other hard sigmoid (Keras 3's relu6(x + 3) / 6 <-> Keras 2's clip(0.2 x + 0.5, 0, 1)), where one is used;
- W_x and W_h exchanged where I = H (a concatenated kernel split as [x; h] instead of [h; x]);
- the directions of a bidirectional layer exchanged; two layers of the same shapes exchanged.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from rnn_equivalence.reference.tolerance import reference_and_bound
from rnn_equivalence.reference.comparison import compare_references
from rnn_equivalence.reference.params import GATES
from rnn_equivalence.reference.stack import StackParams

FORGET_BIAS = 1.0  # TF1's BasicLSTMCell/LSTMCell default


@dataclass
class Explanation:
    mistake: str
    ratio_after: float
    ratio_before: float

    def as_dict(self) -> dict:
        return {"mistake": self.mistake, "err_over_bound_after": self.ratio_after,
                "err_over_bound_before": self.ratio_before}

    def sentence(self, a: str, b: str) -> str:
        return (f"{b} is {a} with {self.mistake} (err/bound {self.ratio_after:.2g} after that change, "
                f"{self.ratio_before:.2g} before)")


def _cells(stack: StackParams, change) -> StackParams:
    """``change(cell)`` applied to every cell of the stack."""
    return StackParams([[change(cell) for cell in layer] for layer in stack.layers])


def _blocks(array, order, G):
    """``array``'s G gate blocks (rows) in ``order``."""
    if array is None:
        return None
    blocks = np.split(np.asarray(array), G)
    return np.concatenate([blocks[i] for i in order])


def mistakes(stack: StackParams):
    """(description, function of a StackParams) for every mistake that applies to ``stack``."""
    first = stack.layers[0][0]
    family, gates = first.family, GATES[first.family]
    G, H = len(gates), first.W_h.shape[0] // len(gates)
    out = []
    if G > 1:
        for order in itertools.permutations(range(G)):
            if order == tuple(range(G)):
                continue
            moved = [gates[i] for i in range(G) if order[i] != i]
            what = (f"the {family.upper()} gates {' and '.join(moved)} exchanged" if len(moved) == 2 else
                    f"the {family.upper()} gates in the order {' '.join(gates[i] for i in order)} instead of "
                    f"{' '.join(gates)}")
            out.append((f"{what} in W_x, W_h and the biases", lambda s, o=order: _cells(s, lambda c: replace(
                c, W_x=_blocks(c.W_x, o, G), W_h=_blocks(c.W_h, o, G), b_x=_blocks(c.b_x, o, G),
                b_h=_blocks(c.b_h, o, G)))))
            out.append((f"{what} in W_x and W_h (the biases in place)", lambda s, o=order: _cells(s, lambda c: replace(
                c, W_x=_blocks(c.W_x, o, G), W_h=_blocks(c.W_h, o, G)))))
            if len(moved) == 2:  # two blocks of one kernel exchanged (a copy into MLX's Wx, Keras's kernel)
                out.append((f"{what} in W_x only", lambda s, o=order: _cells(s, lambda c: replace(
                    c, W_x=_blocks(c.W_x, o, G)))))
                out.append((f"{what} in W_h only", lambda s, o=order: _cells(s, lambda c: replace(
                    c, W_h=_blocks(c.W_h, o, G)))))
    if first.W_proj is None:
        out.append(("each gate block of W_h transposed", lambda s: _cells(s, lambda c: replace(
            c, W_h=np.concatenate([b.T for b in np.split(c.W_h, G)])))))
    if all(cell.W_x.shape[1] == H for _, _, cell in stack.cells()):  # square input kernels in every layer
        out.append(("each gate block of W_x transposed", lambda s: _cells(s, lambda c: replace(
            c, W_x=np.concatenate([b.T for b in np.split(c.W_x, G)])))))
        out.append(("W_x and W_h exchanged (a concatenated kernel split as [x; h], not [h; x])",
                    lambda s: _cells(s, lambda c: replace(c, W_x=c.W_h, W_h=c.W_x))))
    if first.b_x is not None:
        zero = lambda v: np.zeros_like(v)
        out += [
            ("b_x (bias_ih, the input bias) dropped", lambda s: _cells(s, lambda c: replace(c, b_x=zero(c.b_x)))),
            ("b_h (bias_hh, the recurrent bias) dropped", lambda s: _cells(s, lambda c: replace(c, b_h=zero(c.b_h)))),
            ("both biases dropped", lambda s: _cells(s, lambda c: replace(c, b_x=zero(c.b_x), b_h=zero(c.b_h)))),
            ("the summed bias b_x + b_h put in both slots (doubled)",
             lambda s: _cells(s, lambda c: replace(c, b_x=c.b_x + c.b_h, b_h=c.b_x + c.b_h))),
            ("both biases halved", lambda s: _cells(s, lambda c: replace(c, b_x=c.b_x / 2, b_h=c.b_h / 2))),
        ]
        if family == "lstm":
            for sign, what in ((1, "not folded (TF1's forget_bias 1.0 missing from the f bias)"),
                               (-1, "folded twice (TF1's forget_bias 1.0 added to the f bias once too often)")):
                shift = np.zeros(4 * H)
                shift[H:2 * H] = -sign * FORGET_BIAS
                out.append((f"forget_bias {what}",
                            lambda s, d=shift: _cells(s, lambda c: replace(c, b_x=c.b_x + d.astype(c.b_x.dtype)))))
    hard = {"hard_sigmoid_relu6": "hard_sigmoid_0.2", "hard_sigmoid_0.2": "hard_sigmoid_relu6"}
    names = first.activation.split(",")
    if any(name in hard for name in names):  # Keras 3's relu6(x + 3) / 6 and Keras 2's clip(0.2 x + 0.5, 0, 1)
        swapped_activation = ",".join(hard.get(name, name) for name in names)
        out.append((f"the other hard sigmoid ({swapped_activation} instead of {first.activation}: Keras 2's and "
                    f"Keras 3's differ)",
                    lambda s, a=swapped_activation: _cells(s, lambda c: replace(c, activation=a))))
    if family == "gru":
        other = {"reset_after": "reset_before", "reset_before": "reset_after"}[first.variant]
        out.append((f"the other GRU variant ({other} instead of {first.variant}: where r multiplies)",
                    lambda s, v=other: _cells(s, lambda c: replace(c, variant=v))))
    if stack.num_directions == 2:
        out.append(("the forward and backward directions exchanged",
                    lambda s: StackParams([layer[::-1] for layer in s.layers])))
    shapes = [tuple(c.W_x.shape) for c, *_ in stack.layers]
    for i, j in itertools.combinations(range(stack.num_layers), 2):
        if shapes[i] == shapes[j]:
            out.append((f"layers {i} and {j} exchanged", lambda s, i=i, j=j: StackParams(
                [s.layers[{i: j, j: i}.get(k, k)] for k in range(s.num_layers)])))
    return out


def suspects(a, xs, state, padding=None) -> list[tuple[str, tuple]]:
    """Every mistake of the catalogue made on ``a``, with the float32 reference and bound of ``a`` so changed:
    (description, (exact, bound)). They depend on ``a`` and the inputs alone: computed once for a module that
    ``explain`` compares with many."""
    return [(what, reference_and_bound(change(a.params), xs, state, "float32", padding=padding))
            for what, change in mistakes(a.params)]


def explain(a, b, xs, state, padding=None, suspected=None, judges=None) -> list[Explanation]:
    """The mistakes that, applied to ``a``, give ``b``'s function within the bound, best first.
    ``suspected``: ``suspects(a, xs, state, padding)``, where already computed. ``judges``: (of_a, of_b), the
    (exact, bound) of a stack made from ``a``'s parameters and of ``b``'s, where not a float32 run's each: a
    half-format ``b`` is judged by the bound of the rounding of a's weights (``rnn_equivalence.verify.half_judges``;
    ``suspected`` is then not used)."""
    float32_run = lambda stack: reference_and_bound(stack, xs, state, "float32", padding=padding)  # noqa: E731
    of_a, of_b = judges or (float32_run, float32_run)
    target = of_b(b.params)  # b's, once
    before = compare_references(of_a(a.params), target, xs, state, "float32", "before", padding).ratio
    if suspected is None or judges is not None:  # ``suspects``' are float32's
        suspected = [(what, of_a(change(a.params))) for what, change in mistakes(a.params)]
    found = []
    for what, made in suspected:
        after = compare_references(made, target, xs, state, "float32", what, padding).ratio
        if after <= 1.0:
            found.append(Explanation(what, after, before))
    return sorted(found, key=lambda e: e.ratio_after)
