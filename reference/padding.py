"""Padded batches: which steps of each batch element are real, and what a padded step reports.

A batch of sequences of different lengths is stored as one (T, batch, I) array. Element b has
``lengths[b]`` real steps, first and followed by padding (``side="post"``, the usual: steps
0 .. L_b - 1), or last and preceded by it (``side="pre"``: steps T - L_b .. T - 1). The padded
steps of the suite's inputs hold random values, not zeros, so a system that reads one is caught. The
conventions every framework agrees on, which the reference implements:

- a padded step does not touch the state: the cell runs over each element's real steps only;
- the final state is the state after each element's last real step (its initial state if it
  has none);
- a backward direction reads each element's real steps in reverse, starting from its *own* last
  real step, not from the padded end, and reports them at their own time positions.

Where the frameworks differ is the output they report on a padded step (``PADDED_OUTPUTS``):

- "zeros": PyTorch's ``pad_packed_sequence``, the ONNX ``Y`` output, TF1's ``dynamic_rnn``, Keras
  with ``zero_output_for_mask=True`` (which ``Bidirectional`` forces when it returns sequences);
- "repeat": a Keras RNN layer with a mask, by default: the last real step's output, taken in the
  order the layer reads (so zeros before the first real step it reads: a backward direction on a
  post-padded row, or a forward one on a pre-padded row, starts with zeros).

Flax's ``nnx.RNN`` with ``seq_lengths`` has neither: it runs the cell on over the padding and
reports that ("The output elements corresponding to padding elements are NOT zeroed out",
flax/linen/recurrent.py); its adapter zeroes them, as its users must
(tests/equivalence/test_padded_flax_tf1.py proves what Flax reports there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SIDES = ("post", "pre")
HOLES = "holes"  # the "side" of a mask with masked steps between real ones (``Mask``): Keras's any mask
PADDED_OUTPUTS = ("zeros", "repeat")


@dataclass(frozen=True)
class Padding:
    """The real length of every batch element, and where the padding is."""

    lengths: tuple[int, ...]
    side: str = "post"

    def __post_init__(self):
        object.__setattr__(self, "lengths", tuple(int(n) for n in self.lengths))
        if self.side not in SIDES:
            raise ValueError(f"padding side: expected one of {SIDES}, got {self.side!r}")

    def __str__(self) -> str:
        return f"lengths{'-'.join(map(str, self.lengths))}" + ("-pre" if self.side == "pre" else "")

    def check(self, steps: int, batch: int, name: str = "lengths") -> None:
        """Raise, naming ``name``, unless there is one length per element, each in 1..T.

        A zero length is refused here although the reference could run it (the output all padding,
        the final state the initial one): frameworks disagree on it (PyTorch refuses it,
        tests/equivalence/test_padded.py records what each does), so the suite does not compare it.
        """
        if len(self.lengths) != batch:
            raise ValueError(f"{name}: expected one length per batch element ({batch}, from the inputs), "
                             f"got {len(self.lengths)}: {list(self.lengths)}")
        bad = [n for n in self.lengths if not 1 <= n <= steps]
        if bad:
            raise ValueError(f"{name}: expected every length in 1..T = 1..{steps} (T from the inputs), "
                             f"got {list(self.lengths)}")

    def real_steps(self, b: int, steps: int) -> np.ndarray:
        """The time indices of element b's real steps, in time order."""
        n = self.lengths[b]
        return np.arange(n) if self.side == "post" else np.arange(steps - n, steps)

    def mask(self, steps: int) -> np.ndarray:
        """(T, batch) booleans, True on real steps (Keras's ``mask`` is its transpose)."""
        mask = np.zeros((steps, len(self.lengths)), bool)
        for b in range(len(self.lengths)):
            mask[self.real_steps(b, steps), b] = True
        return mask

    @classmethod
    def from_mask(cls, mask, name: str = "mask") -> "Padding":
        """The padding a (T, batch) boolean mask describes, or an error naming ``name``: each
        element's real steps must be one run at the start (post-padding) or the end (pre-padding),
        all elements on the same side."""
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise TypeError(f"{name}: expected a boolean array of shape (T, batch), got dtype {mask.dtype}")
        if mask.ndim != 2:
            raise ValueError(f"{name}: expected shape (T, batch), got {mask.shape}")
        lengths = tuple(int(n) for n in mask.sum(axis=0))
        for side in SIDES:
            padding = cls(lengths, side)
            if np.array_equal(padding.mask(mask.shape[0]), mask):
                return padding
        raise ValueError(f"{name}: expected each element's real steps to be one run at the start (post-padding) "
                         f"or at the end (pre-padding), the same for every element; got a mask that is neither")


@dataclass(frozen=True)
class Mask(Padding):
    """Any (T, batch) boolean mask, masked steps anywhere: holes between real steps included (Keras's
    ``Masking`` on a sequence with an all-zero step in the middle, or its ``mask`` argument). The
    reference runs each element over its real steps only, in reading order, so a masked step leaves
    the state as it was and reports zeros or the last output (``PADDED_OUTPUTS``), as for padding. Its
    side is ``HOLES``: a system that takes lengths (each element's real steps one run) refuses it by
    name, as it refuses a side it does not take (``Adapter.check_padding``)."""

    rows: tuple[tuple[bool, ...], ...] = ()  # the mask, T rows of batch booleans

    @classmethod
    def of(cls, mask) -> "Mask":
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.ndim != 2:
            raise ValueError(f"mask: expected booleans of shape (T, batch), got {mask.dtype} of shape {mask.shape}")
        return cls(tuple(int(n) for n in mask.sum(axis=0)), HOLES, tuple(map(tuple, mask.tolist())))

    def __post_init__(self):
        object.__setattr__(self, "lengths", tuple(int(n) for n in self.lengths))
        if self.side != HOLES:
            raise ValueError(f"Mask: its side is {HOLES!r}, got {self.side!r}")

    def __str__(self) -> str:
        return "holes-" + "-".join("".join("1" if r else "0" for r in column) for column in zip(*self.rows))

    def check(self, steps: int, batch: int, name: str = "mask") -> None:
        """Raise, naming ``name``, unless the mask is (T, batch) with at least one real step per element."""
        shape = (len(self.rows), len(self.rows[0]) if self.rows else 0)
        if shape != (steps, batch):
            raise ValueError(f"{name}: expected a mask of shape (T, batch) = {(steps, batch)} (from the inputs), "
                             f"got {shape}")
        if min(self.lengths) < 1:
            raise ValueError(f"{name}: expected at least one real step per element, got {list(self.lengths)}")

    def real_steps(self, b: int, steps: int) -> np.ndarray:
        return np.flatnonzero(np.asarray(self.rows, bool)[:steps, b])

    def mask(self, steps: int) -> np.ndarray:
        return np.asarray(self.rows, bool)[:steps]
