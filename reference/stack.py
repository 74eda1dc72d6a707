"""Stacks of cells, and the one driver of layers and directions.

Conventions (PyTorch's ``nn.RNN``/``nn.LSTM``/``nn.GRU``, which ONNX and Keras
``Bidirectional`` share):

- Layer 0 reads the inputs x_t (size I). Layer k > 0 reads the outputs of layer
  k - 1, the concatenation [forward h_t, backward h_t] (size D*H, D = 1 or 2
  directions).
- The backward direction runs the cell over x_T, ..., x_1 and its outputs are
  put back in input time order, so output t of both directions belongs to x_t.
- Initial and final states: one per layer and direction, ordered layer-major
  (layer 0 forward, layer 0 backward, layer 1 forward, ...), shape (L*D, batch, H).
  The backward direction's final state is its state after reading x_1.

A single cell unrolled over a sequence is the one-layer, one-direction stack.
``drive`` is written once and serves the reference (on arrays) and the error
bounds (on ``rnn_equivalence.reference.tolerance.Approx`` values, which slice and concatenate alike).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnn_equivalence.reference.cells import sequence
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.padding import PADDED_OUTPUTS, Padding
from rnn_equivalence.reference.params import CellParams, projection_size

DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True, eq=False)
class StackParams:
    """``layers[k][d]``: the canonical parameters of layer k, direction d (0 forward, 1 backward)."""

    layers: tuple[tuple[CellParams, ...], ...]

    def __post_init__(self):
        layers = tuple(tuple(layer) for layer in self.layers)
        if not layers or not all(layers):
            raise ValueError("layers: expected at least one layer with at least one direction")
        D = len(layers[0])
        if D not in (1, 2) or any(len(layer) != D for layer in layers):
            raise ValueError(f"layers: expected 1 or 2 directions in every layer, got {[len(l) for l in layers]}")
        first = layers[0][0]
        H, P = first.hidden_size, first.output_size
        for k, layer in enumerate(layers):
            expected_input = first.input_size if k == 0 else D * P
            for d, params in enumerate(layer):
                where = f"layer {k} {DIRECTIONS[d]}"
                if (params.hidden_size, params.output_size) != (H, P):
                    raise ValueError(f"{where}: expected hidden size H={H} and output size {P}, got "
                                     f"{params.hidden_size} and {params.output_size}")
                if params.input_size != expected_input:
                    source = "the inputs" if k == 0 else f"D*{'P' if P != H else 'H'}={D}*{P} from layer {k - 1}"
                    raise ValueError(f"{where}: {params._symbols()['W_x']}: expected input size {expected_input} "
                                     f"({source}), got {params.input_size}")
                same = lambda p: (str(p.dtype), p.has_bias, p.kind, p.cell_clip, p.proj_clip, p.gate_clip)
                if same(params) != same(first):
                    raise TypeError(f"{where}: expected dtype, bias, cell and clipping thresholds {same(first)} "
                                    f"like layer 0, got {same(params)}")
        object.__setattr__(self, "layers", layers)

    @classmethod
    def of(cls, params) -> "StackParams":
        """``params`` as a stack: a single cell becomes the one-layer, one-direction stack."""
        return params if isinstance(params, StackParams) else cls([[params]])

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_directions(self) -> int:
        return len(self.layers[0])

    @property
    def bidirectional(self) -> bool:
        return self.num_directions == 2

    @property
    def first(self) -> CellParams:
        return self.layers[0][0]

    def __getattr__(self, name):
        # family, activation, variant, kind (options too), sizes, dtype, has_bias: layer 0's,
        # which the checks above make every layer's.
        if name in ("family", "activation", "variant", "kind", "gates", "input_size", "hidden_size", "dtype",
                    "has_bias", "output_size", "state_size", "options", "gate_activations"):
            return getattr(self.layers[0][0], name)
        raise AttributeError(name)

    def cells(self):
        """(layer, direction, params) in the layer-major order of the final states."""
        for k, layer in enumerate(self.layers):
            for d, params in enumerate(layer):
                yield k, d, params

    def map(self, fn) -> "StackParams":
        return StackParams(tuple(tuple(fn(p) for p in layer) for layer in self.layers))

    def astype(self, dtype) -> "StackParams":
        return self.map(lambda p: p.astype(dtype))

    def rounded_to(self, name: str) -> "StackParams":
        """Every cell's tensors rounded to the format ``name`` (``CellParams.rounded_to``)."""
        return self.map(lambda p: p.rounded_to(name))

    @classmethod
    def random(cls, family, input_size, hidden_size, num_layers=1, bidirectional=False, seed=0,
               dtype=np.float64, bias=True, activation="", variant="", options=()) -> "StackParams":
        D = 2 if bidirectional else 1
        output_size = projection_size(hidden_size) if "projection" in options else hidden_size
        layers = []
        for k in range(num_layers):
            layer_input = input_size if k == 0 else D * output_size
            layer = [CellParams.random(family, layer_input, hidden_size, [seed, k, d], dtype, activation, variant,
                                       options) for d in range(D)]
            layers.append([p if bias else p.without_bias() for p in layer])
        return cls(layers)


def _concatenate(parts, axis=-1):
    return type(parts[0]).concatenate(parts, axis) if hasattr(parts[0], "concatenate") else np.concatenate(parts, axis)


def _stack(parts):
    return type(parts[0]).stack(parts) if hasattr(parts[0], "stack") else np.stack(parts)


def _zeros_like(value):
    return value.zeros_like() if hasattr(value, "zeros_like") else np.zeros_like(value)


def drive(stack: StackParams, xs, state, run_sequence, padding: Padding | None = None,
          padded_output: str = "zeros") -> dict:
    """Run every layer and direction of ``stack`` over ``xs`` (T, batch, I).

    ``state``: {"h": (L*D, batch, H), "c": ...} or None (zeros); ``run_sequence(params, xs, state)``
    runs one direction forward from a {"h": (batch, H), ...} state (or None) and returns
    {"h": (T, batch, H), ...}. ``padding``: the real steps of each element (``rnn_equivalence.reference.padding``),
    and ``padded_output`` what a padded step reports; None: every element runs all T steps. A pair
    (forward, backward) pads the directions apart (how the tests build a backward direction that
    wrongly starts at the padded end).
    Returns the layer's canonical results:

        output    (T, batch, D*H)  the top layer's h_t, directions concatenated
        h_n       (L*D, batch, H)  every layer's and direction's final h
        c_n, c_output              the same for c (LSTM)
    """
    if padded_output not in PADDED_OUTPUTS:
        raise ValueError(f"padded_output: expected one of {PADDED_OUTPUTS}, got {padded_output!r}")
    D = stack.num_directions
    layer_input, finals, top = xs, {key: [] for key in state_keys(stack.family)}, {}
    for k, layer in enumerate(stack.layers):
        traces = []
        for d, params in enumerate(layer):
            initial = None if state is None else {key: value[k * D + d] for key, value in state.items()}
            padded = padding[d] if isinstance(padding, tuple) else padding
            if padded is None:
                order = slice(None) if d == 0 else slice(None, None, -1)  # backward: read reversed, report in order
                trace = {key: value[order] for key, value in run_sequence(params, layer_input[order], initial).items()}
                final = {key: value[-1] if d == 0 else value[0] for key, value in trace.items()}
            else:
                trace, final = _padded_direction(params, layer_input, initial, run_sequence, padded, d == 1,
                                                 padded_output)
            traces.append(trace)
            for key, value in final.items():
                finals[key].append(value)
        top = {key: _concatenate([trace[key] for trace in traces]) for key in traces[0]}
        layer_input = top["h"]
    result = {"output": top["h"], "h_n": _stack(finals["h"])}
    if "c" in top:
        result.update(c_output=top["c"], c_n=_stack(finals["c"]))
    return result


def _padded_direction(params, xs, initial, run_sequence, padding: Padding, backward: bool, padded_output: str):
    """One direction over a padded batch: each element runs over its own real steps only (read in
    reverse for the backward direction, from its own last real step), and its results go back to
    their time positions. A padded position gets zeros, or under "repeat" the last real step's
    result in reading order (zeros before the first). The final state is the state after the
    element's last real step. A padded step computes nothing, so it adds no rounding: the same
    code carries the error bounds (``rnn_equivalence.reference.tolerance``)."""
    traces, finals = {}, {}
    for b in range(xs.shape[1]):
        reading, row_in_time_order = reading_plan(padding, b, xs.shape[0], backward, padded_output)
        start = None if initial is None else {key: value[b:b + 1] for key, value in initial.items()}
        run = run_sequence(params, xs[reading, b:b + 1], start)
        for key, values in run.items():
            table = _concatenate([_zeros_like(values[:1]), values], axis=0)
            traces.setdefault(key, []).append(table[row_in_time_order])
            finals.setdefault(key, []).append(values[-1])
    return ({key: _concatenate(parts, axis=1) for key, parts in traces.items()},
            {key: _concatenate(parts, axis=0) for key, parts in finals.items()})


def reading_plan(padding: Padding | None, b: int, steps: int, backward: bool, padded_output: str = "zeros"):
    """How one direction reads element b and reports it: the time indices of the steps it runs, in
    reading order, and for each time position the row of the table [zeros, step 1, step 2, ...] it
    reports: its own step where it is real; on a padded one, zeros, or under "repeat" the last step
    read so far (zeros before the first). Without padding every step is real (b is not used).
    The backward pass (``rnn_equivalence.reference.backward``) sends each position's cotangent back to that row."""
    reading_order = np.arange(steps)[::-1] if backward else np.arange(steps)
    real = np.arange(steps) if padding is None else padding.real_steps(b, steps)
    is_real = np.isin(reading_order, real)
    read = np.cumsum(is_real)  # real steps read so far, at each position in reading order
    row = np.where(is_real | (padded_output == "repeat"), read, 0)  # row 0 of the table: zeros
    return (real[::-1] if backward else real), row[np.argsort(reading_order)]


def run_stack(stack, xs, state=None, padding: Padding | None = None, padded_output: str = "zeros") -> dict:
    """The float64 (or the arguments' dtype) reference of a stack: ``drive`` over
    ``rnn_equivalence.reference.cells``."""
    stack = StackParams.of(stack)
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != stack.input_size:
        raise ValueError(f"xs: expected shape (T, batch, I) with I={stack.input_size}, got {xs.shape}")
    if state is not None:
        unknown = sorted(set(state) - set(state_keys(stack.family)))
        if unknown:
            raise ValueError(f"state: expected keys {list(state_keys(stack.family))} for {stack.family}, got {unknown}")
        for key, value in state.items():
            expected = (stack.num_layers * stack.num_directions, xs.shape[1], stack.state_size(key))
            if np.shape(value) != expected:
                size = "P" if stack.state_size(key) != stack.hidden_size else "H"
                raise ValueError(f"{key}0: expected shape (num_layers*num_directions, batch, {size}) = {expected}, "
                                 f"got {np.shape(value)}")
    for padded in padding if isinstance(padding, tuple) else (padding,):
        if padded is not None:
            padded.check(xs.shape[0], xs.shape[1])
    return drive(stack, xs, state, sequence, padding, padded_output)
