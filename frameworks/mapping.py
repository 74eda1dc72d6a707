"""The weight mapping of every system, NumPy only: a framework's named weights to and from the
canonical parameters, and conversion between any two systems.

Importing this module, or any module of ``frameworks``, imports no framework; nor does
instantiating a system's class (its framework is imported by ``Adapter.start``). So a user can
read a PyTorch state_dict into Keras's layout, or check a converter's output, with NumPy alone:

    from rnn_equivalence.frameworks import convert
    keras_weights = convert(torch_state_dict, "torch-lstm-rnn", "keras-tf-lstm-rnn", config=LayerConfig(2, True))

The canonical parameters are ``rnn_equivalence.reference.params.CellParams`` (per cell) and
``rnn_equivalence.reference.stack.StackParams`` (layers x directions); each system's class states its
framework's layout beside the canonical one, in its module's docstring, and implements:

    cell_spec         native names -> (shape, the shape in the framework's own symbols), one cell
    cell_to_native    canonical cell -> native weights, one cell (names tagged by layer, direction)
    cell_from_native  native weights -> canonical cell
    tag               the tag of layer k, direction d in the native names ("" for a cell)

from which ``native_spec``, ``to_native`` and ``from_native`` of a whole stack, the adjoint
(``gradients_from_native``) and the checks (``check_params``, ``check_native``) are written once.
What a system can hold (family, GRU variant, which biases it keeps apart, its options) is
declared as class attributes; ``convert`` refuses, by name, what the target cannot hold.
"""

from __future__ import annotations

import functools

import numpy as np

from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.reference.params import FLOAT_DTYPES_TEXT, GATES, CellParams, is_float_dtype
from rnn_equivalence.reference.stack import StackParams

Native = dict[str, np.ndarray]
# name -> (shape, the shape spelled in the framework's own symbols)
NativeSpec = dict[str, tuple[tuple[int, ...], str]]


class Mapping:
    """One system's layout: what it stores and how, with no framework (NumPy only)."""

    name: str  # the system's name, e.g. "torch-lstm"
    cell: str  # the framework's own class, e.g. "torch.nn.LSTMCell"
    family: str  # "rnn", "lstm" or "gru"
    variant: str = ""  # the GRU variant the system computes: "reset_after" or "reset_before"
    layer: bool = False  # True: the framework's sequence layer (layers, directions); False: one cell
    # Gates whose hidden-side bias b_h the framework keeps apart from b_x. The others are
    # stored as the one sum b_x + b_h (one rounding), and come back as b_x, with b_h = 0.
    kept_hidden_biases: tuple[str, ...] = ()
    forget_bias: float = 0.0  # a constant the cell adds to its f gate, folded out by the mapping (TF1)
    zero_b_hn: bool = False  # the cell has no slot for b_hn (Flax nnx GRUCell)
    state_names: dict[str, str] = {"h": "h0", "c": "c0"}  # the framework's names of the initial states
    projection_name: str = "proj_size"  # the framework's name of a projection's size P
    hidden_axis: int = -1  # the axis of ``recurrent_kernel``'s weight that is the hidden size
    # The options (rnn_equivalence.reference.params.OPTIONS) the system holds: every name in ``Adapter.options``,
    # set on registration.
    supported_options: frozenset[str] = frozenset()
    # option -> why the system refuses it although the framework has something of that name (ONNX
    # Runtime's LSTM clip computes another function than the spec's): said in the refusal.
    refused_options: dict[str, str] = {}

    # What a system declares of its mapping (its identity and what it can hold), as opposed to how it maps,
    # which a framework's mapping class writes once. A system class sets these beside its plan, greppable by
    # its name; ``mapping_of`` copies them onto the framework's mapping class to make the system's mapping.
    DECLARED = ("name", "cell", "family", "variant", "layer", "kept_hidden_biases", "forget_bias", "zero_b_hn",
                "state_names", "projection_name", "hidden_axis", "supported_options", "refused_options")

    # --- the mapping, one cell at a time --------------------------------------
    # A layer names each cell's weights with a tag (PyTorch's "_l1_reverse" suffix, Keras's
    # "layer1.backward." prefix); a cell adapter's only tag is "".
    def tag(self, layer: int, direction: int) -> str:
        return ""

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        raise NotImplementedError

    def cell_to_native(self, params: CellParams, tag: str) -> Native:
        raise NotImplementedError

    def cell_from_native(self, native: Native, tag: str) -> CellParams:
        raise NotImplementedError

    def recurrent_kernel(self, config: LayerConfig) -> str:
        """A native weight whose ``hidden_axis`` is the hidden size: the check reads H from it."""
        raise NotImplementedError

    def read_hidden_size(self, native: Native, config: LayerConfig) -> tuple[int, str]:
        """The hidden size read from the weights, and where it was read (for the messages)."""
        name = self.recurrent_kernel(config)
        return int(np.shape(native[name])[self.hidden_axis]), f"{name}'s shape"

    def read_input_size(self, native: Native, config: LayerConfig, hidden_size: int, extra: dict | None = None
                        ) -> tuple[int, str]:
        """The input size read from the weights (the one weight whose shape depends on it), and where."""
        extra = extra or {}
        one, two = (self.native_spec(config, size, hidden_size, **extra) for size in (1, 2))
        for name, ((shape, _), (other, _)) in {k: (one[k], two[k]) for k in one}.items():
            if shape != other and name in native:
                # that axis is affine in the input size (I, or I + H for a concatenated kernel)
                axis = next(i for i, (a, b) in enumerate(zip(shape, other)) if a != b)
                if len(np.shape(native[name])) == len(shape):
                    size, slope = np.shape(native[name])[axis] - shape[axis], other[axis] - shape[axis]
                    if size % slope == 0 and size // slope >= 0:
                        return 1 + size // slope, f"{name}'s shape"
        return 0, "no weight"  # check_native then names what is missing or misshapen

    def params(self, W_x, W_h, b_x, b_h) -> CellParams:
        """Canonical parameters of this system's family member (for ``cell_from_native``)."""
        return CellParams(self.family, W_x, W_h, b_x, b_h, variant=self.variant)

    # --- the mapping of a whole system (per cell; ONNX stacks directions instead) ---
    def native_spec(self, config: LayerConfig, input_size: int, hidden_size: int, options: tuple[str, ...] = (),
                    output_size: int | None = None) -> NativeSpec:
        """Every native weight's shape. ``options`` (rnn_equivalence.reference.params.OPTIONS) and ``output_size`` (P,
        with a projection) reach ``cell_spec`` only when there are options, so an adapter without
        options keeps the four-argument ``cell_spec``."""
        D, spec = config.num_directions, {}
        extra = {"options": tuple(options), "output_size": output_size or hidden_size} if options else {}
        for k in range(config.num_layers):
            for d in range(D):
                layer_input = input_size if k == 0 else D * (output_size or hidden_size)
                spec.update(self.cell_spec(layer_input, hidden_size, config.bias, self.tag(k, d), **extra))
        return spec

    def read_options(self, native: Native, config: LayerConfig) -> tuple[tuple[str, ...], int | None]:
        """The options a set of native weights holds (rnn_equivalence.reference.params.OPTIONS) and, with a
        projection, its size P (else None): read from the weights' names and shapes, so that the
        checks expect what they hold. A system without options holds none."""
        return (), None

    def to_native(self, params, config: LayerConfig = CELL) -> Native:
        native = {}
        for k, d, cell in StackParams.of(params).cells():
            native.update(self.cell_to_native(cell, self.tag(k, d)))
        return native

    def from_native(self, native: Native, config: LayerConfig = CELL) -> StackParams:
        stack = StackParams([[self.cell_from_native(native, self.tag(k, d)) for d in range(config.num_directions)]
                             for k in range(config.num_layers)])
        return stack if config.bias else without_held_zero_biases(self.cell, stack, config)

    def gradients_from_native(self, native_gradients: Native, config: LayerConfig) -> StackParams:
        """The canonical gradients, from the gradients of the native weights, by the adapter's own way
        back (``cell_from_native``), written once for every system:

        - a mapping is affine, native = A(canonical) + constant (TF1 folds ``forget_bias`` into its
          bias): the gradient goes back through A's adjoint alone, so the constant, which the way back
          undoes on weights, is left out here (the way back of zero weights is subtracted);
        - A permutes, transposes and splits (gate order, kernel layout, a concatenated kernel), so its
          adjoint is its inverse, except where it sums: a framework that stores one bias b = b_x + b_h
          gives dL/db, and dL/db_x = dL/db_h = dL/db, so each canonical bias receives the whole of it
          (the way back of weights puts b in b_x and 0 in b_h). A converter that halves it between the
          two is wrong (test_gradients.py's mutations).
        A bias-free configuration's held zero biases (TF1, Flax) have gradients, which no canonical
        parameter receives."""
        zeros = {name: np.zeros_like(value) for name, value in native_gradients.items()}
        cells = []
        for k in range(config.num_layers):
            layer = []
            for d in range(config.num_directions):
                tag = self.tag(k, d)
                grads, offset = self.cell_from_native(native_gradients, tag), self.cell_from_native(zeros, tag)
                grads = grads.replace(**{name: getattr(grads, name) - getattr(offset, name)
                                         for name in ("W_x", "W_h", "b_x", "b_h") if getattr(grads, name) is not None})
                if grads.has_bias:
                    b_h, H = grads.b_h.copy(), grads.hidden_size
                    for j, gate in enumerate(GATES[self.family]):
                        if gate == "n" and self.zero_b_hn:  # no slot for b_hn: no gradient of it either
                            b_h[j * H:(j + 1) * H] = 0.0
                        elif gate not in self.kept_hidden_biases:
                            b_h[j * H:(j + 1) * H] = grads.b_x[j * H:(j + 1) * H]
                    grads = grads.replace(b_h=b_h)
                layer.append(grads if config.bias else grads.without_bias())
            cells.append(layer)
        return StackParams(cells)

    def check_params(self, stack: StackParams, config: LayerConfig) -> None:
        """Parameters of the family member this system computes, in the structure of ``config``."""
        if stack.family != self.family or stack.variant != self.variant:
            computes = self.family + (f" ({self.variant})" if self.variant else "")
            got = stack.family + (f" ({stack.variant})" if stack.variant else "")
            raise ValueError(f"{self.cell} computes a {computes} cell; got parameters of a {got} cell")
        unsupported = [name for name in stack.options if name not in self.supported_options]
        if unsupported:
            name = unsupported[0]
            if name in self.refused_options:
                raise ValueError(f"{self.cell}: option {name!r} refused: {self.refused_options[name]}")
            own = f"; it has {sorted(self.supported_options)}" if self.supported_options else ""
            raise ValueError(f"{self.cell} has no option {name!r} (rnn_equivalence.reference.params.OPTIONS){own}: "
                             f"it would be dropped, not computed")
        structure = (stack.num_layers, stack.num_directions, stack.has_bias)
        expected = (config.num_layers, config.num_directions, config.bias)
        if structure != expected:
            raise ValueError(f"{self.cell}: configuration {config} expects (layers, directions, bias) = {expected}, "
                             f"got parameters with {structure}")


def without_held_zero_biases(cell: str, stack: StackParams, config: LayerConfig) -> StackParams:
    """A framework that cannot drop its bias (TF1, Flax) holds zeros for a bias-free cell: on the way
    back they are no bias again, and a non-zero one is an error rather than silently dropped."""
    for k, d, params in stack.cells():
        if params.has_bias and (np.any(params.b_x != 0) or np.any(params.b_h != 0)):
            raise ValueError(f"{cell}: configuration {config} has no bias, but the native biases of layer {k} "
                             f"direction {d} are non-zero; dropping them would change the cell")
    return stack.map(lambda params: params.without_bias() if params.has_bias else params)


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
        if not is_float_dtype(value.dtype):
            raise TypeError(f"{cell}: {name}: expected {FLOAT_DTYPES_TEXT}, got dtype {value.dtype}")
        if dtype is not None and value.dtype != dtype:
            raise TypeError(f"{cell}: {name}: expected dtype {dtype} (the inputs'), got {value.dtype}")
        if value.shape != shape:
            raise ValueError(
                f"{cell}: {name}: expected shape {shape_text} = {shape}, got {value.shape}"
                + (f" ({sizes})" if sizes else "")
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{cell}: {name}: expected finite values, got non-finite entries")


def gates_text(family: str, symbol: str) -> str:
    """"4*hidden_size" for an LSTM, "hidden_size" for the vanilla cell: sizes in a framework's own symbols."""
    G = len(GATES[family])
    return symbol if G == 1 else f"{G}*{symbol}"


def reorder_gates(array: np.ndarray, order, axis: int = 0) -> np.ndarray:
    """The gate blocks stacked along ``axis``, taken in ``order`` (indices of the blocks).

    With canonical blocks (LSTM i f g o, GRU r z n) and ``order`` the canonical
    index of each of a framework's gates, this is the framework's stacking;
    ``np.argsort(order)`` goes back.
    """
    blocks = np.split(array, len(order), axis=axis)
    return np.concatenate([blocks[k] for k in order], axis=axis)


def is_pure(mapping_class: type) -> bool:
    """A mapping class that is a mapping only: every class it derives from is a ``Mapping`` (no runner, no plan)."""
    return issubclass(mapping_class, Mapping) and all(issubclass(base, Mapping) or base is object
                                                      for base in mapping_class.__mro__)


def mapping_of(system: type) -> Mapping:
    """A system's mapping as an object of its own: its framework's mapping class (``system.mapping_class``, NumPy
    only) with what the system declares of it (``Mapping.DECLARED``). The system's class derives from that
    mapping class, so the system runs the very mapping this object is; it has no runner and no plan."""
    return _mapping_class(system)()


@functools.cache
def _mapping_class(system: type) -> type:
    declared = {name: getattr(system, name) for name in Mapping.DECLARED}
    return type(f"{system.__name__}Mapping", (system.mapping_class,),
                {**declared, "__module__": system.__module__, "__qualname__": f"{system.__qualname__}Mapping",
                 "__doc__": f"The mapping of {system.name}: {system.mapping_class.__qualname__}."})
