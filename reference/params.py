"""The canonical parameters of a vanilla RNN cell, shared by every adapter.

Canonical layout (PyTorch's, because it keeps the most information):

    W_hx  (H, I)   input-to-hidden kernel
    W_hh  (H, H)   hidden-to-hidden kernel
    b_x   (H,)     input-side bias
    b_h   (H,)     hidden-side bias

The lecture's single bias is ``b = b_x + b_h``; frameworks with one bias slot
receive that sum (see each adapter). ``b_x`` and ``b_h`` are both ``None`` for
a cell without bias.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_float_array(name: str, value, expected_shape: tuple[int, ...], shape_text: str):
    """Return ``value`` as an array, or raise naming what was expected and received.

    ``shape_text`` spells the expected shape in symbols, e.g. ``"(H, I)"``.
    """
    array = np.asarray(value)
    if array.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected a float32 or float64 array, got dtype {array.dtype}")
    if array.shape != expected_shape:
        raise ValueError(
            f"{name}: expected shape {shape_text} = {expected_shape}, got {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise ValueError(f"{name}: expected finite values, got {array[index]} at index {index}")
    return array


@dataclass(frozen=True, eq=False)
class RNNParams:
    W_hx: np.ndarray
    W_hh: np.ndarray
    b_x: np.ndarray | None
    b_h: np.ndarray | None

    def __post_init__(self):
        W_hx = np.asarray(self.W_hx)
        if W_hx.ndim != 2:
            raise ValueError(f"W_hx: expected a 2-D array of shape (H, I), got shape {W_hx.shape}")
        H, I = W_hx.shape
        W_hx = check_float_array("W_hx", W_hx, (H, I), "(H, I)")
        W_hh = check_float_array("W_hh", self.W_hh, (H, H), f"(H, H) with H={H} from W_hx")
        if (self.b_x is None) != (self.b_h is None):
            raise ValueError(
                "b_x and b_h: expected both arrays of shape (H,) or both None (no bias), "
                f"got b_x={'None' if self.b_x is None else 'an array'}, "
                f"b_h={'None' if self.b_h is None else 'an array'}"
            )
        tensors = {"W_hx": W_hx, "W_hh": W_hh}
        if self.b_x is not None:
            tensors["b_x"] = check_float_array("b_x", self.b_x, (H,), f"(H,) with H={H} from W_hx")
            tensors["b_h"] = check_float_array("b_h", self.b_h, (H,), f"(H,) with H={H} from W_hx")
        dtypes = {name: t.dtype for name, t in tensors.items()}
        if len(set(dtypes.values())) != 1:
            raise TypeError(f"expected one dtype for all parameters, got {dtypes}")
        for name, tensor in tensors.items():
            object.__setattr__(self, name, tensor)

    @property
    def input_size(self) -> int:
        return self.W_hx.shape[1]

    @property
    def hidden_size(self) -> int:
        return self.W_hx.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.W_hx.dtype

    @property
    def has_bias(self) -> bool:
        return self.b_x is not None

    @property
    def b(self) -> np.ndarray | None:
        """The lecture's single bias ``b = b_x + b_h`` (rounded in this dtype)."""
        return None if self.b_x is None else self.b_x + self.b_h

    def astype(self, dtype) -> "RNNParams":
        convert = lambda t: None if t is None else t.astype(dtype)
        return RNNParams(convert(self.W_hx), convert(self.W_hh), convert(self.b_x), convert(self.b_h))

    def replace(self, **tensors) -> "RNNParams":
        fields = {"W_hx": self.W_hx, "W_hh": self.W_hh, "b_x": self.b_x, "b_h": self.b_h}
        fields.update(tensors)
        return RNNParams(**fields)

    def without_bias(self) -> "RNNParams":
        return self.replace(b_x=None, b_h=None)

    @classmethod
    def random(cls, input_size: int, hidden_size: int, seed: int, dtype=np.float64) -> "RNNParams":
        """Seeded parameters in which every value is distinct and exactly a float32.

        Exact float32 values let a float32 framework and the float64 reference
        start from identical numbers, so only arithmetic is compared. All values
        distinct (across tensors too) and biases non-zero, so a transposed,
        swapped, dropped or doubled tensor changes the result.

        ``W_hh`` is scaled so that its absolute row sums stay near 0.8: the
        recurrence contracts, and errors (and relu states) do not grow
        exponentially over long sequences.
        """
        rng = np.random.default_rng(seed)
        H, I = hidden_size, input_size
        while True:
            W_hx = rng.uniform(-1, 1, (H, I)) / np.sqrt(I)
            W_hh = rng.uniform(-1, 1, (H, H)) * (1.6 / H)
            b_x = rng.uniform(0.05, 0.5, H) * rng.choice([-1, 1], H)
            b_h = rng.uniform(0.05, 0.5, H) * rng.choice([-1, 1], H)
            values = [t.astype(np.float32) for t in (W_hx, W_hh, b_x, b_h)]
            flat = np.concatenate([v.ravel() for v in values])
            if np.unique(np.abs(flat)).size == flat.size:
                break
        return cls(*(v.astype(dtype) for v in values))


def random_inputs(steps: int, batch: int, input_size: int, seed: int, dtype=np.float64) -> np.ndarray:
    """Seeded inputs of shape (T, batch, I), exactly float32 values in [-1, 1)."""
    rng = np.random.default_rng([seed, 1])
    return rng.uniform(-1, 1, (steps, batch, input_size)).astype(np.float32).astype(dtype)


def random_state(batch: int, hidden_size: int, seed: int, dtype=np.float64) -> np.ndarray:
    """Seeded initial state of shape (batch, H), exactly float32 values in [-0.5, 0.5)."""
    rng = np.random.default_rng([seed, 2])
    return rng.uniform(-0.5, 0.5, (batch, hidden_size)).astype(np.float32).astype(dtype)
