"""Gradients of a case: the loss every system differentiates, its float64 backward pass, and the bound.

The loss is L = sum_k <output_k, C_k> over what a system returns (``Adapter.arrange``'s outputs), with
fixed cotangents C_k: exact float32 values, so every framework differentiates the same L. A system
returns some of the canonical results (``rnn_equivalence.reference.stack.drive``'s output, h_n, c_n, c_output), each
in its own shape (batch first, one direction's last step, ...): ``arrange`` only selects and reshapes,
so its adjoint sends each C_k back to the canonical entries it selected (summed where it selects one
twice: a unidirectional Keras layer's last output is its final state too). The reference's loss is
then the same L, on the canonical results (``rnn_equivalence.reference.backward``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from rnn_equivalence.frameworks.plan import arithmetic_of
from rnn_equivalence.harness.cases import data_format
from rnn_equivalence.harness.reference_cache import kept
from rnn_equivalence.reference.formats import numpy_dtype
from rnn_equivalence.reference.tolerance import Arithmetic, exact
from rnn_equivalence.reference.backward import stack_gradients
from rnn_equivalence.reference.stack import DIRECTIONS, StackParams

PARAMETERS = ("W_x", "W_h", "b_x", "b_h")


def system_cotangents(adapter, case, dtype: str) -> dict:
    """The cotangents in the system's own outputs (``arrange``'s names and shapes): seeded, exactly
    float32, in ``dtype``."""
    rng = np.random.default_rng([case.seed, 11])
    shapes = {key: np.shape(value) for key, value in adapter.arrange(case.reference(), case.config).items()}
    return {key: rng.uniform(-1, 1, shape).astype(np.float32).astype(numpy_dtype(dtype))  # a half format: rounded
            for key, shape in sorted(shapes.items())}


def canonical_cotangents(adapter, case, cotangents: dict) -> dict:
    """The same loss on the canonical results: ``arrange``'s adjoint applied to ``cotangents``. Each
    canonical entry is labelled with its own index, ``arrange`` moves the labels as it moves values,
    and each system output's cotangent goes back to the entries its labels name."""
    reference = case.reference()
    offsets, start = {}, 0
    for key in sorted(reference):
        offsets[key] = start
        start += reference[key].size
    labels = {key: (offsets[key] + np.arange(reference[key].size)).reshape(reference[key].shape).astype(np.float64)
              for key in reference}
    flat = np.zeros(start)
    for key, moved in adapter.arrange(labels, case.config).items():
        np.add.at(flat, np.asarray(moved).astype(np.int64).ravel(), np.asarray(cotangents[key], np.float64).ravel())
    return {key: flat[offsets[key]:offsets[key] + reference[key].size].reshape(reference[key].shape)
            for key in reference}


def names(stack: StackParams) -> list[tuple[int, int, str, str]]:
    """(layer, direction, parameter, the name a comparison reports) of every canonical parameter."""
    out = []
    for k, d, params in stack.cells():
        where = "" if stack.num_layers == 1 and stack.num_directions == 1 else f" (layer {k} {DIRECTIONS[d]})"
        out += [(k, d, name, name + where) for name in PARAMETERS if getattr(params, name) is not None]
    return out


def flatten(gradients: dict, stack: StackParams, state_given: bool, reversed_inputs: bool = False) -> dict:
    """{name: array}: every parameter's gradient (``names``), the inputs' ("x"), the initial state's
    ("h0", "c0", where one was given). ``gradients["params"]`` is a StackParams or nested dicts."""
    params = gradients["params"]
    cell = (lambda k, d: params.layers[k][d]) if isinstance(params, StackParams) else (lambda k, d: params[k][d])
    get = (lambda c, name: getattr(c, name)) if isinstance(params, StackParams) else (lambda c, name: c[name])
    array = lambda value: value if hasattr(value, "error") else np.asarray(value)  # an Approx stays one
    flat = {label: array(get(cell(k, d), name)) for k, d, name, label in names(stack)}
    flat["x"] = array(gradients["inputs"])[::-1] if reversed_inputs else array(gradients["inputs"])
    if state_given:
        flat.update({f"{key}0": array(value) for key, value in gradients["state"].items()})
    return flat


def reference_gradients(adapter, case, dtype: str, arithmetic: str | None = None) -> tuple[dict, dict, dict]:
    """The system's cotangents, and the float64 gradients of its loss with their bounds for ``dtype``
    (each a ``flatten``ed dict; the bound allows the float64 reference's own error too). A half format: the
    case's data and the cotangents rounded to it, the bound of the arithmetic the system runs it in
    (``arithmetic_of``: PyTorch's, float32 within each operation and each result stored in half), or of
    ``arithmetic`` where given (a test that shows the right one is needed)."""
    cotangents = system_cotangents(adapter, case, dtype)
    canonical = canonical_cotangents(adapter, case, cotangents)
    key = (case, data_format(dtype), tuple((k, v.tobytes()) for k, v in sorted(canonical.items())))
    values, bound = _gradients_and_bound(key, arithmetic or arithmetic_of(adapter, dtype))
    _, exact_bound = _gradients_and_bound(key, "float64")
    return cotangents, values, {name: bound[name] + exact_bound[name] for name in bound}


@lru_cache(maxsize=None)
def _gradients_and_bound(key, dtype: str) -> tuple[dict, dict]:
    """``rnn_equivalence.reference.backward`` on ``rnn_equivalence.reference.tolerance.Arithmetic``: the exact
    gradients (the values, from the exact data in the key's format) and the running bound on the error of a
    computation in the arithmetic ``dtype``."""
    case, data, canonical = key[0], key[1], {k: np.frombuffer(v) for k, v in key[2]}
    reference = case.reference()
    canonical = {k: v.reshape(reference[k].shape) for k, v in canonical.items()}
    stack, xs, state = case.exact_data(data)
    arguments = (dtype, stack, case._read(xs), state, canonical, case._read_padding(), case.padded_output,
                 case.forget_bias, case.reversed_inputs)

    def compute():
        result = stack_gradients(Arithmetic(dtype), stack, exact(case._read(xs)),
                                 None if state is None else {k: exact(v) for k, v in state.items()}, canonical,
                                 case._read_padding(), case.padded_output, case.forget_bias)
        flat = flatten(result, stack, state is not None, case.reversed_inputs)
        return {k: a.value for k, a in flat.items()}, {k: a.error for k, a in flat.items()}

    # kept across runs besides, by the content of what it reads (rnn_equivalence.harness.reference_cache)
    return kept("stack_gradients", arguments, compute, __name__)
