"""Weights of one system as another system's, through the canonical parameters, NumPy only.

    convert(native, source, target, config=LayerConfig(...)) -> the target's native dict

reads ``native`` with the source's mapping (``Mapping.from_native``: its names, layout, gate
order, folded constants), checks that the target can hold the same function, and writes it with
the target's mapping (``Mapping.to_native``). Nothing is dropped or approximated silently: where
the target cannot hold the function it is refused, by name (a GRU variant it does not compute, a
non-zero b_hn where it has no slot, an option it has not, more layers than a cell), with a
``ConversionRefused``. Biases a target stores as one sum b_x + b_h are summed (one rounding, the
only one a conversion makes); between two systems that keep both, a conversion is exact.

No framework is imported (tests/mapping/test_convert.py checks it in a fresh process), so this is
the function to call from a converter, a notebook, or a test of one's own port.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.mapping import Mapping, Native, check_native, mapping_of
from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.reference.stack import StackParams


class ConversionRefused(ValueError):
    """The target system cannot hold the function the source's weights compute (the reason is said)."""


def system_class(system: str | type[Mapping]) -> type[Mapping]:
    """A system's class, by name (``frameworks.ADAPTERS``) or as given."""
    from rnn_equivalence.frameworks.systems import adapter_class  # the registry; importing it imports no framework

    return adapter_class(system) if isinstance(system, str) else system


def mapping(system: str | type[Mapping]) -> Mapping:
    """The mapping of a system, by name or class: an object with the mapping only (``mapping_of``: its framework's
    mapping class, ``Adapter.mapping_class``, with what the system declares), no runner, no plan."""
    return mapping_of(system_class(system))


def read(native: Native, system: str | type[Mapping], config: LayerConfig = CELL) -> StackParams:
    """The canonical parameters of a system's native weights, checked name by name and shape by shape
    in the framework's own names (an error names what was expected and what was received)."""
    source = mapping(system)
    if not isinstance(native, dict):
        raise TypeError(f"{source.cell}: expected a dict of named weights, got {type(native).__name__}")
    name = source.recurrent_kernel(config)
    if name not in native:
        raise ValueError(f"{source.cell}: expected weights {sorted(source.native_spec(config, 1, 1))} "
                         f"(sizes aside), got {sorted(native)} (missing {name!r})")
    try:
        H, where = source.read_hidden_size(native, config)
    except (IndexError, TypeError, ValueError):  # a weight that is no array of the right rank
        raise ValueError(f"{source.cell}: {name}: expected an array of shape "
                         f"{source.native_spec(config, 1, 1)[name][1]}, got shape {np.shape(native[name])}") from None
    options, P = source.read_options(native, config)
    extra = {"options": options, "output_size": P} if options else {}
    I, read_from = source.read_input_size(native, config, H, extra)
    check_native(source.cell, native, source.native_spec(config, I, H, **extra),
                 sizes=f"input_size={I} from {read_from}, hidden_size={H} from {where}")
    return source.from_native({key: np.asarray(value) for key, value in native.items()}, config)


def write(stack: StackParams, system: str | type[Mapping], config: LayerConfig | None = None,
          activation: str | None = None) -> Native:
    """The native weights of ``system`` for canonical parameters, or a ``ConversionRefused`` naming
    what the system cannot hold."""
    target = mapping(system)
    stack = StackParams.of(stack)
    config = config or LayerConfig(stack.num_layers, stack.bidirectional, stack.has_bias)
    if not target.layer and (stack.num_layers, stack.num_directions) != (1, 1) and not _stacks_directions(target):
        raise ConversionRefused(f"{target.cell} is one cell; got {stack.num_layers} layer(s) x "
                                f"{stack.num_directions} direction(s): convert each cell, or choose a layer system")
    # What a system computes is its plan's, not its mapping's: read from its class.
    computes = getattr(system_class(system), "activations", (activation,))
    if activation is not None and activation not in computes:
        raise ConversionRefused(f"{target.cell} does not compute activation {activation!r}; it computes "
                                f"{list(computes)}")
    try:
        target.check_params(stack, config)
        # refused here too: a structure the layout has no room for, a b_hn where it has no slot
        return target.to_native(stack, config)
    except ValueError as error:
        raise ConversionRefused(str(error)) from None


def _stacks_directions(target: Mapping) -> bool:
    """ONNX's LSTM and GRU nodes, cells of the suite, hold both directions of one layer."""
    return "W" in target.native_spec(LayerConfig(1, True), 1, 1)


def convert(native: Native, source: str | type[Mapping], target: str | type[Mapping],
            config: LayerConfig = CELL, target_config: LayerConfig | None = None,
            activation: str | None = None) -> Native:
    """``native``, the weights of system ``source`` in configuration ``config`` (layers, directions,
    bias), as the weights of system ``target`` (in ``target_config``, by default the same structure
    with the target's default options). ``activation``: the function the weights are used with, to
    refuse a target that does not compute it (weights alone do not say it)."""
    stack = read(native, source, config)
    if target_config is None:
        target_config = LayerConfig(config.num_layers, config.bidirectional, config.bias)
    return write(stack, target, target_config, activation)
