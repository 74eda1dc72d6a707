"""Sequence layers: stacked and bidirectional vanilla RNNs, built from the lecture's cell.

Conventions (PyTorch's ``nn.RNN``, which ONNX and Keras ``Bidirectional`` share):

- Layer 0 reads the inputs x_t (size I). Layer k > 0 reads the outputs of layer
  k - 1, the concatenation [forward h_t, backward h_t] (size D*H, D = 1 or 2
  directions).
- The backward direction runs the cell over x_T, ..., x_1 and its outputs are
  put back in input time order, so output t of both directions belongs to x_t.
- Final states: one per layer and direction, ordered layer-major
  (layer 0 forward, layer 0 backward, layer 1 forward, ...), shape (L*D, batch, H).
  The backward direction's final state is its state after reading x_1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.params import RNNParams
from reference.rnn import rnn_sequence

FORWARD, BACKWARD = 0, 1


@dataclass(frozen=True, eq=False)
class StackedRNNParams:
    """``layers[k][d]``: canonical parameters of layer k, direction d (0 forward, 1 backward)."""

    layers: tuple[tuple[RNNParams, ...], ...]

    def __post_init__(self):
        layers = tuple(tuple(layer) for layer in self.layers)
        if not layers or not all(layers):
            raise ValueError("layers: expected at least one layer with at least one direction")
        D = len(layers[0])
        if D not in (1, 2) or any(len(layer) != D for layer in layers):
            raise ValueError(f"layers: expected 1 or 2 directions in every layer, got {[len(l) for l in layers]}")
        first = layers[0][0]
        H = first.hidden_size
        for k, layer in enumerate(layers):
            expected_input = first.input_size if k == 0 else D * H
            for d, params in enumerate(layer):
                where = f"layer {k} {'backward' if d else 'forward'}"
                if params.hidden_size != H:
                    raise ValueError(f"{where}: expected hidden size H={H}, got {params.hidden_size}")
                if params.input_size != expected_input:
                    source = "the inputs" if k == 0 else f"D*H={D}*{H} from layer {k - 1}"
                    raise ValueError(f"{where}: W_hx: expected input size {expected_input} ({source}), "
                                     f"got {params.input_size}")
                if params.dtype != first.dtype or params.has_bias != first.has_bias:
                    raise TypeError(f"{where}: expected dtype {first.dtype} and bias={first.has_bias} "
                                    f"like layer 0, got {params.dtype} and bias={params.has_bias}")
        object.__setattr__(self, "layers", layers)

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
    def input_size(self) -> int:
        return self.layers[0][0].input_size

    @property
    def hidden_size(self) -> int:
        return self.layers[0][0].hidden_size

    @property
    def dtype(self) -> np.dtype:
        return self.layers[0][0].dtype

    @property
    def has_bias(self) -> bool:
        return self.layers[0][0].has_bias

    def cells(self):
        """(layer, direction, params) in the layer-major order of the final states."""
        for k, layer in enumerate(self.layers):
            for d, params in enumerate(layer):
                yield k, d, params

    def map(self, fn) -> "StackedRNNParams":
        return StackedRNNParams(tuple(tuple(fn(p) for p in layer) for layer in self.layers))

    def astype(self, dtype) -> "StackedRNNParams":
        return self.map(lambda p: p.astype(dtype))

    @classmethod
    def random(cls, input_size, hidden_size, num_layers, bidirectional, seed, dtype=np.float64, bias=True):
        D = 2 if bidirectional else 1
        layers = []
        for k in range(num_layers):
            layer_input = input_size if k == 0 else D * hidden_size
            layer = [RNNParams.random(layer_input, hidden_size, seed=[seed, k, d], dtype=dtype) for d in range(D)]
            layers.append([p if bias else p.without_bias() for p in layer])
        return cls(layers)


def run_direction(params: RNNParams, xs, h0, g, direction, step=rnn_sequence):
    """One direction of one layer; outputs in input time order (T, batch, H).

    ``step`` computes a forward sequence; the error bound passes its own.
    """
    if direction == FORWARD:
        return step(params, xs, h0, g)
    return step(params, xs[::-1], h0, g)[::-1]


def rnn_stack(stack: StackedRNNParams, xs, h0=None, g="tanh"):
    """Run the stack over ``xs`` (T, batch, I) from ``h0`` (L*D, batch, H) or zeros.

    Returns ``(outputs, h_n)``: the last layer's outputs (T, batch, D*H) and the
    final state of every layer and direction (L*D, batch, H).
    """
    xs = np.asarray(xs)
    D = stack.num_directions
    expected_h0 = (stack.num_layers * D, xs.shape[1] if xs.ndim == 3 else None, stack.hidden_size)
    if h0 is not None and np.shape(h0) != expected_h0:
        raise ValueError(f"h0: expected shape (num_layers*num_directions, batch, H) = {expected_h0}, "
                         f"got {np.shape(h0)}")
    layer_input, finals = xs, []
    for k, layer in enumerate(stack.layers):
        outputs = []
        for d, params in enumerate(layer):
            hs = run_direction(params, layer_input, None if h0 is None else h0[k * D + d], g, d)
            outputs.append(hs)
            finals.append(hs[-1] if d == FORWARD else hs[0])
        layer_input = np.concatenate(outputs, axis=-1)
    return layer_input, np.stack(finals)
