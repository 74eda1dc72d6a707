"""The interface every framework adapter implements.

An adapter owns one framework's weight mapping: canonical parameters
(``reference.RNNParams``) to the framework's own named weights and back, and
a run of the framework's own cell on those weights. Frameworks are imported
in ``__init__``, never at module level, so that importing ``frameworks`` is
free and a missing framework breaks only its own adapter.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Callable

import numpy as np

from reference.params import FLOAT_DTYPES, RNNParams

Native = dict[str, np.ndarray]
# name -> (shape, the shape spelled in the framework's own symbols)
NativeSpec = dict[str, tuple[tuple[int, ...], str]]


class Adapter:
    kind = "cell"  # "cell": one step of a cell, unrolled; "layer": a sequence layer
    name: str  # the selection key, e.g. "torch"
    cell: str  # the framework's own class, e.g. "torch.nn.RNNCell"
    distributions: tuple[str, ...]  # pip distributions whose versions identify what was run
    bias_names: tuple[str, ...] = ()  # native names of the bias tensors, absent in a bias-free cell
    requires: tuple[str, ...] = ()  # top-level modules the adapter imports
    # Environment the framework must be imported under (Keras's backend); where this
    # process differs, frameworks.load runs the framework in a child process.
    process_env: dict[str, str] = {}
    activations: tuple[str, ...] = ("tanh", "relu", "sigmoid", "identity")
    dtypes: tuple[str, ...] = ("float32", "float64")
    # (activation, dtype) -> reason: combinations where the framework is known not to
    # compute what it is asked for, with the upstream report. The tests run them as
    # strict expected failures, so a fix upstream turns them red here.
    known_issues: dict[tuple[str, str], str] = {}
    known_issue_raises: tuple[type[BaseException], ...] = (AssertionError,)  # how the bug shows
    # Which tests the bug reaches: "reference" (whole-cell runs), "activation" (g alone).
    known_issue_scopes: tuple[str, ...] = ("reference",)
    # Deliberately wrong mappings, each expressed on the native weights, that
    # the suite must detect; see tests/equivalence/test_mutations.py.
    mutations: dict[str, Callable[[Native], Native]] = {}
    # The longest sequence the adapter is tested on; None: the cases' own (up to 50 steps).
    max_steps: int | None = None

    def describe(self) -> str:
        return self.cell

    def versions(self) -> dict[str, str]:
        return {dist: distribution_version(dist) for dist in self.distributions}

    # --- the mapping ------------------------------------------------------
    def native_spec(self, input_size: int, hidden_size: int, has_bias: bool) -> NativeSpec:
        raise NotImplementedError

    def to_native(self, params: RNNParams) -> Native:
        raise NotImplementedError

    def from_native(self, native: Native) -> RNNParams:
        raise NotImplementedError

    def own_weight_shapes(self, input_size: int, hidden_size: int) -> dict[str, tuple[int, ...]] | None:
        """Names and shapes of the weights the framework's own cell creates, read from a
        freshly built cell, so a test can hold ``native_spec`` against the framework.
        None where there is no framework cell (the mapping is ours)."""
        return None

    # --- running the framework's own cell ------------------------------------
    def run_native(self, native: Native, xs: np.ndarray, h0: np.ndarray, g: str) -> np.ndarray:
        """Unroll the framework's cell over ``xs`` (T, batch, I) from ``h0`` (batch, H)."""
        raise NotImplementedError

    def run(self, params: RNNParams, xs, h0=None, g: str = "tanh") -> np.ndarray:
        """Map ``params`` to native weights and unroll; returns every h_t as (T, batch, H)."""
        xs = np.asarray(xs)
        if h0 is None:
            h0 = np.zeros((xs.shape[1], params.hidden_size), params.dtype)
        return self.run_native(self.to_native(params), xs, np.asarray(h0), g)

    def step(self, params: RNNParams, x, h_prev=None, g: str = "tanh") -> np.ndarray:
        """One step: ``x`` (batch, I), ``h_prev`` (batch, H) -> (batch, H)."""
        return self.run(params, np.asarray(x)[None], h_prev, g)[0]

    # --- checks shared by all adapters -------------------------------------
    def check_call(self, native: Native, xs: np.ndarray, h0: np.ndarray, g: str) -> np.dtype:
        """Validate a run's arguments; return their common dtype."""
        if g not in self.activations:
            raise ValueError(
                f"{self.cell}: activation {g!r} is not supported; expected one of {self.activations}"
            )
        if xs.ndim != 3:
            raise ValueError(f"{self.cell}: inputs: expected shape (T, batch, input_size), got {xs.shape}")
        if h0.ndim != 2 or h0.shape[0] != xs.shape[1]:
            raise ValueError(
                f"{self.cell}: initial state: expected shape (batch, hidden_size) with "
                f"batch={xs.shape[1]}, got {h0.shape}"
            )
        dtype = xs.dtype
        if dtype.name not in self.dtypes:
            raise TypeError(f"{self.cell}: inputs: expected dtype in {self.dtypes}, got {dtype}")
        if h0.dtype != dtype:
            raise TypeError(f"{self.cell}: initial state: expected dtype {dtype} (the inputs'), got {h0.dtype}")
        has_bias = any(name in native for name in self.bias_names)
        spec = self.native_spec(xs.shape[2], h0.shape[1], has_bias)
        sizes = f"input_size={xs.shape[2]} read from the inputs, hidden_size={h0.shape[1]} from the initial state"
        check_native(self.cell, native, spec, dtype, sizes)
        return dtype


def check_native(cell: str, native: Native, spec: NativeSpec, dtype=None, sizes: str = "") -> None:
    """Raise, in the framework's own parameter names, unless ``native`` matches ``spec``."""
    if not isinstance(native, dict):
        raise TypeError(f"{cell}: expected a dict of weights {sorted(spec)}, got {type(native).__name__}")
    missing, unexpected = sorted(set(spec) - set(native)), sorted(set(native) - set(spec))
    if missing or unexpected:
        raise ValueError(
            f"{cell}: expected weights {sorted(spec)}, got {sorted(native)}"
            f" (missing {missing}, unexpected {unexpected})"
        )
    for name, (shape, shape_text) in spec.items():
        value = np.asarray(native[name])
        if value.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{cell}: {name}: expected a float32 or float64 array, got dtype {value.dtype}")
        if dtype is not None and value.dtype != dtype:
            raise TypeError(f"{cell}: {name}: expected dtype {dtype} (the inputs'), got {value.dtype}")
        if value.shape != shape:
            raise ValueError(
                f"{cell}: {name}: expected shape {shape_text} = {shape}, got {value.shape}"
                + (f" ({sizes})" if sizes else "")
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{cell}: {name}: expected finite values, got non-finite entries")


def import_framework(module: str, adapter_name: str):
    """Import a framework module, or raise an ImportError that names the adapter."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"adapter {adapter_name!r} needs {module!r}, which failed to import: {error}") from error


def distribution_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# Mutation helpers: the ways a weight mapping goes wrong in practice.
def transposed(name: str):
    return lambda native: {**native, name: native[name].T.copy()}


def swapped(a: str, b: str):
    return lambda native: {**native, a: native[b], b: native[a]}


def scaled(name: str, factor: float):
    """factor 0 drops a tensor (a forgotten bias), factor 2 doubles it (a bias added twice)."""
    return lambda native: {**native, name: native[name] * factor}


# --- sequence layers -----------------------------------------------------------


@dataclass(frozen=True)
class LayerConfig:
    """One configuration of a sequence layer: the structure, and the layer's own options."""

    num_layers: int = 1
    bidirectional: bool = False
    bias: bool = True
    initial_state: bool = True
    options: tuple[tuple[str, object], ...] = ()  # the system's own, e.g. (("batch_first", True),)

    def option(self, key, default=None):
        return dict(self.options).get(key, default)

    def __str__(self) -> str:
        parts = [f"L{self.num_layers}", "bi" if self.bidirectional else "uni"]
        if not self.bias:
            parts.append("nobias")
        parts.append("h0" if self.initial_state else "noh0")
        parts += [k if v is True else f"{k}={v}" for k, v in self.options if v is not False]
        return "-".join(parts)


class LayerAdapter(Adapter):
    """A framework's sequence layer (or stack of layers) run on ``StackedRNNParams``.

    Inputs are canonical: ``xs`` (T, batch, I) and ``h0`` (L*D, batch, H) or None;
    the adapter converts them to the layer's own layout (batch first, say). The
    outputs come back in the layer's own shapes, and ``arrange`` puts the
    reference's canonical results into those same shapes, so each output is
    compared as the framework returns it.
    """

    kind = "layer"
    sums_biases = True  # one bias slot per cell: b_x + b_h, lossy on the way back
    # Layers are tested for structure (stacking, directions, layouts, states); every
    # activation is already tested on the cells. tanh saturates, relu does not.
    activations = ("tanh", "relu")
    configs: tuple[LayerConfig, ...] = ()
    # The configuration the mutations run on: the richest one the layer supports.
    mutation_config: LayerConfig = LayerConfig()

    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int) -> NativeSpec:
        raise NotImplementedError

    def to_native(self, stack, config: LayerConfig) -> Native:
        raise NotImplementedError

    def from_native(self, native: Native, config: LayerConfig):
        raise NotImplementedError

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def run(self, stack, xs, h0, g: str, config: LayerConfig) -> dict[str, np.ndarray]:
        return self.run_native(self.to_native(stack, config), np.asarray(xs), h0, g, config)

    def reads_reversed(self, config: LayerConfig) -> bool:
        """True where the layer reads x_T..x_1 and reports in that order (Keras ``go_backwards``)."""
        return False

    hidden_axis = -1  # the axis of recurrent_kernel_name's weight that is the hidden size

    def recurrent_kernel_name(self, config: LayerConfig) -> str:
        """A native weight whose ``hidden_axis`` is the hidden size."""
        raise NotImplementedError

    def _hidden_size(self, native: Native, h0, config: LayerConfig, input_size: int) -> int:
        if h0 is not None and h0.ndim == 3:
            return h0.shape[-1]
        name = self.recurrent_kernel_name(config)
        if not isinstance(native, dict) or name not in native:
            expected = sorted(self.native_spec(config, input_size, 1))
            got = sorted(native) if isinstance(native, dict) else type(native).__name__
            raise ValueError(f"{self.cell}: expected weights {expected}, got {got} (missing {name!r})")
        return int(np.shape(native[name])[self.hidden_axis])

    def arrange(self, outputs: np.ndarray, h_n: np.ndarray, config: LayerConfig) -> dict[str, np.ndarray]:
        """Canonical (outputs (T, batch, D*H), h_n (L*D, batch, H)) in this layer's own shapes."""
        raise NotImplementedError

    def check_layer_call(self, native: Native, xs, h0, g: str, config: LayerConfig) -> np.dtype:
        if g not in self.activations:
            raise ValueError(f"{self.cell}: activation {g!r} is not supported; expected one of {self.activations}")
        if xs.ndim != 3:
            raise ValueError(f"{self.cell}: inputs: expected shape (T, batch, input_size), got {xs.shape}")
        dtype = xs.dtype
        if dtype.name not in self.dtypes:
            raise TypeError(f"{self.cell}: inputs: expected dtype in {self.dtypes}, got {dtype}")
        D = 2 if config.bidirectional else 1
        hidden_size = self._hidden_size(native, h0, config, xs.shape[2])
        if h0 is not None:
            expected = (config.num_layers * D, xs.shape[1], hidden_size)
            if h0.shape != expected:
                raise ValueError(f"{self.cell}: initial state: expected shape "
                                 f"(num_layers*num_directions, batch, hidden_size) = {expected}, got {h0.shape}")
            if h0.dtype != dtype:
                raise TypeError(f"{self.cell}: initial state: expected dtype {dtype} (the inputs'), got {h0.dtype}")
        spec = self.native_spec(config, xs.shape[2], hidden_size)
        check_native(self.cell, native, spec, dtype,
                     f"input_size={xs.shape[2]} read from the inputs, hidden_size={hidden_size}")
        return dtype


class StackOfCells(LayerAdapter):
    """A layer whose weights are one cell's weights per layer and direction, each named
    by ``tag(layer, direction)``: PyTorch's ``_l1_reverse`` suffixes, say.

    Subclasses give the cell's mapping as ``cell_to_native(params, tag)``,
    ``cell_from_native(native, tag)`` and ``cell_spec(input_size, hidden_size, has_bias, tag)``.
    ``stack`` may be ``StackedRNNParams`` or a plain list of layers of cells (gated layers).
    """

    def tag(self, layer: int, direction: int) -> str:
        raise NotImplementedError

    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int) -> NativeSpec:
        D = 2 if config.bidirectional else 1
        spec = {}
        for k in range(config.num_layers):
            for d in range(D):
                layer_input = input_size if k == 0 else D * hidden_size
                spec.update(self.cell_spec(layer_input, hidden_size, config.bias, self.tag(k, d)))
        return spec

    def to_native(self, stack, config: LayerConfig) -> Native:
        native = {}
        for k, layer in enumerate(getattr(stack, "layers", stack)):
            for d, params in enumerate(layer):
                native.update(self.cell_to_native(params, self.tag(k, d)))
        return native

    def from_native(self, native: Native, config: LayerConfig):
        D = 2 if config.bidirectional else 1
        return self.stack([[self.cell_from_native(native, self.tag(k, d)) for d in range(D)]
                           for k in range(config.num_layers)])

    def stack(self, cells):
        """The parameter object for ``cells[k][d]``."""
        from reference.stack import StackedRNNParams

        return StackedRNNParams(cells)


# --- gated cells -----------------------------------------------------------------


class GatedAdapter(Adapter):
    """A framework's LSTM or GRU cell, unrolled over a sequence, on ``reference.gated.GatedParams``.

    ``run`` returns {"h": (T, batch, H)} for a GRU and also "c" for an LSTM, each
    in canonical time-major shape; ``c0`` is ignored by a GRU.
    """

    kind = "gated"
    cell_type: str  # "lstm" or "gru"
    gru_variant: str = "reset_after"  # the GRU candidate this cell computes
    forget_bias: float = 0.0  # a constant the cell adds to its f gate (TF1 LSTM)
    zero_b_hn: bool = False  # the cell has no slot for b_hn (Flax nnx GRUCell): test with b_hn = 0
    activations = ("default",)  # gates use sigmoid and tanh; not a choice here

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        raise NotImplementedError

    def run_native(self, native: Native, xs, h0, c0) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def run(self, params, xs, h0=None, c0=None) -> dict[str, np.ndarray]:
        xs = np.asarray(xs)
        zeros = np.zeros((xs.shape[1], params.hidden_size), params.dtype)
        return self.run_native(self.to_native(params), xs, zeros if h0 is None else np.asarray(h0),
                               zeros if c0 is None else np.asarray(c0))

    def check_gated_call(self, native: Native, xs, h0, c0) -> np.dtype:
        if xs.ndim != 3:
            raise ValueError(f"{self.cell}: inputs: expected shape (T, batch, input_size), got {xs.shape}")
        dtype = xs.dtype
        if dtype.name not in self.dtypes:
            raise TypeError(f"{self.cell}: inputs: expected dtype in {self.dtypes}, got {dtype}")
        for name, state in (("h0", h0), ("c0", c0)):
            if state.ndim != 2 or state.shape[0] != xs.shape[1] or state.dtype != dtype:
                raise ValueError(f"{self.cell}: {name}: expected shape (batch, hidden_size) with batch="
                                 f"{xs.shape[1]} and dtype {dtype}, got {state.shape} {state.dtype}")
        check_native(self.cell, native, self.native_spec(xs.shape[2], h0.shape[1]), dtype,
                     f"input_size={xs.shape[2]} read from the inputs, hidden_size={h0.shape[1]} from h0")
        return dtype


def reorder_gates(array: np.ndarray, order, axis: int = 0) -> np.ndarray:
    """The gate blocks stacked along ``axis``, taken in ``order`` (indices of the blocks).

    With canonical blocks (LSTM i f g o, GRU r z n) and ``order`` the canonical
    index of each of a framework's gates, this is the framework's stacking;
    ``np.argsort(order)`` goes back.
    """
    blocks = np.split(array, len(order), axis=axis)
    return np.concatenate([blocks[k] for k in order], axis=axis)


def swapped_gates(name: str, a: int, b: int, gates: int, axis: int = -1):
    """Mutation: exchange gate blocks a and b of a stacked tensor (the classic converter bug)."""

    def mutate(native):
        blocks = np.split(native[name], gates, axis=axis)
        blocks[a], blocks[b] = blocks[b], blocks[a]
        return {**native, name: np.concatenate(blocks, axis=axis)}

    return mutate


class GatedLayerAdapter(StackOfCells):
    """A sequence layer of LSTM or GRU cells, stacked and bidirectional as ``LayerConfig`` says.

    Parameters are ``layers[k][d]`` of ``GatedParams`` (see ``reference.gated.gated_stack``);
    ``run_native(native, xs, h0, c0, config)`` returns the layer's outputs in its own
    shapes, and ``arrange(outputs, h_n, c_n, config)`` puts the reference into them.
    """

    kind = "gated-layer"
    cell_type: str
    gru_variant: str = "reset_after"
    activations = ("default",)

    def stack(self, cells):
        return cells  # a list of layers of GatedParams: gated cells always have both biases

    def run(self, layers, xs, h0, c0, config: LayerConfig):
        return self.run_native(self.to_native(layers, config), np.asarray(xs), h0, c0, config)

    def check_gated_layer_call(self, native: Native, xs, h0, c0, config: LayerConfig) -> np.dtype:
        if xs.ndim != 3:
            raise ValueError(f"{self.cell}: inputs: expected shape (T, batch, input_size), got {xs.shape}")
        dtype = xs.dtype
        if dtype.name not in self.dtypes:
            raise TypeError(f"{self.cell}: inputs: expected dtype in {self.dtypes}, got {dtype}")
        H = self._hidden_size(native, h0, config, xs.shape[2])
        D = 2 if config.bidirectional else 1
        for name, state in (("h0", h0), ("c0", c0)):
            if state is not None and (state.shape != (config.num_layers * D, xs.shape[1], H) or state.dtype != dtype):
                raise ValueError(f"{self.cell}: {name}: expected shape (num_layers*num_directions, batch, hidden_size)"
                                 f" = {(config.num_layers * D, xs.shape[1], H)} and dtype {dtype}, "
                                 f"got {state.shape} {state.dtype}")
        check_native(self.cell, native, self.native_spec(config, xs.shape[2], H), dtype,
                     f"input_size={xs.shape[2]} read from the inputs, hidden_size={H}")
        return dtype
