"""What the systems that convert a PyTorch layer with a ``torch.export``-based tool share (litert-torch:
frameworks/litert_torch_export.py; ExecuTorch: frameworks/executorch_export.py): the module a user writes around
the layer, taking the initial states as tensors and returning a flat tuple, and the conversion cache's key.

The weights are PyTorch's: each system is a PyTorch layer system (``TorchLSTM``, ``TorchGRU``, ``TorchRNN``) with
its mapping (``TorchLayerMapping``) unchanged; what runs is the converted program. Importing this imports no
framework. ``TorchConverted`` is a base of each such system, so that this file is part of the conversion cache's
code digest (``conversion_cache.source_files``).
"""

from __future__ import annotations

from rnn_equivalence.frameworks.base import LayerConfig, Native
from rnn_equivalence.frameworks.conversion_cache import weights_digests


class TorchConverted:
    """The module around the layer, its flat arguments and the cache key's structure, for a PyTorch layer system
    whose run is a converted program (the class comes before the PyTorch system in the bases)."""

    def flat_program(self, native: Native, xs, state, config: LayerConfig, g: str):
        """The loaded layer in ``flat_module`` and its flat arguments (``TorchLayer.module``'s, x then the
        states), each a fresh row-major tensor: a batch-first input of one step is a transposed view whose size-1
        axis keeps another stride, which counts as contiguous in torch and which ``torch.export`` records as the
        program's input layout (ExecuTorch's runtime then refuses the run: "2 input tensors have different dim
        orders")."""
        layer, args = self.module(native, xs, state, config, g)
        fresh = tuple(a.clone(memory_format=self.torch.contiguous_format) for a in flat_arguments(args))
        return flat_module(self.torch, layer, self.family), fresh

    def structure(self, native: Native, flat, config: LayerConfig, g: str) -> tuple:
        return structure_parts(native, flat, config, g)


def flat_module(torch, layer, family: str):
    """``layer`` wrapped as a user exports it: ``forward(x, *states)`` (h0, and c0 for an LSTM, or none), returning
    ``(output, h_n[, c_n])``, flat."""
    lstm = family == "lstm"

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, *states):
            given = (tuple(states) if lstm else states[0]) if states else None
            output, final = self.layer(x, given)
            return (output, *final) if lstm else (output, final)

    return Flat().eval()


def flat_arguments(args) -> tuple:
    """``TorchLayer.module``'s arguments, (x, (h0, c0)) or (x, h0) or (x,), flattened."""
    return tuple(a for arg in args for a in (arg if isinstance(arg, tuple) else (arg,)))


def structure_parts(native: Native, flat, config: LayerConfig, g: str) -> tuple:
    """What a converted model depends on besides the system and the versions (``converted_once`` adds those): the
    activation, the configuration, the arguments' shapes and dtypes and the weights' digests; not the inputs'
    values."""
    return (g, str(config), [(tuple(a.shape), str(a.dtype)) for a in flat], weights_digests(native))


def output_keys(family: str) -> tuple[str, ...]:
    return ("output", "h_n", "c_n") if family == "lstm" else ("output", "h_n")
