"""The structure of a run: layers, directions, bias, initial state, and a system's own options.

A plain value, so that the reference, the harness and the mapping library share it without
importing a framework adapter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerConfig:
    """One configuration of a system: the structure, and the system's own options.

    A cell adapter runs the default, ``CELL``: one layer, one direction.
    """

    num_layers: int = 1
    bidirectional: bool = False
    bias: bool = True
    initial_state: bool = True
    options: tuple[tuple[str, object], ...] = ()  # the system's own, e.g. (("batch_first", True),)

    def option(self, key, default=None):
        return dict(self.options).get(key, default)

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def __str__(self) -> str:
        parts = [f"L{self.num_layers}", "bi" if self.bidirectional else "uni"]
        if not self.bias:
            parts.append("nobias")
        parts.append("h0" if self.initial_state else "noh0")
        parts += [k if v is True else f"{k}={v}" for k, v in self.options if v is not False]
        return "-".join(parts)


CELL = LayerConfig()
NO_BIAS = LayerConfig(bias=False)
