"""Floating-point formats by name, the half ones included, and data exactly in a format.

The suite names a dtype by a string ("float32"). Two formats have no NumPy type of their own or no
NumPy arithmetic worth the name: float16 is NumPy's, bfloat16 is not NumPy's at all, and
``ml_dtypes`` (the library JAX and TensorFlow use for it) supplies it, with its ``finfo``. Every place
that turns a name into a NumPy dtype or its limits goes through ``numpy_dtype`` and ``finfo``.

A mixed precision policy (Keras ``mixed_float16``, ``mixed_bfloat16``) is named like a dtype where a
bound is asked for (``rnn_equivalence.reference.tolerance``): its variables and arithmetic are float32,
the results it stores (a layer's inputs, outputs, states and every intermediate tensor) are half;
``storage_format`` names the half format.

Like float32 today, a run in a half format starts the framework and the reference from identical
numbers: ``round_to`` rounds data to the format (the suite's data are exact float32 values, so the
half data of a case is its float32 data rounded once), and ``check_exact`` refuses data that is not
exactly in the format, naming the tensor.
"""

from __future__ import annotations

import numpy as np

HALF_FORMATS = ("float16", "bfloat16")
FORMATS = ("float64", "float32", *HALF_FORMATS)
# A mixed policy: its name, and the half format its results are stored in (its arithmetic is float32).
MIXED_POLICIES = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
# A mixed policy whose activations are not single operations (issue 37: XLA on a CPU, Flax's and Equinox's half rows):
# products and elementwise operations as the mixed policy (float32 within each operation, each result stored in
# half), but jax.nn.sigmoid is 1 / (1 + exp(-z)) and jax.nn.hard_sigmoid relu6(z + 3) / 6, each of their operations
# stored in half: their inner roundings are counted too (reference/tolerance.py, ``Arithmetic.composed_error``).
# Its name, and the half format it stores in.
COMPOSED_ACTIVATION_POLICIES = {"mixed_float16_composed_activations": "float16",
                                "mixed_bfloat16_composed_activations": "bfloat16"}


def dtype_text(dtype: str, arithmetic: str = "") -> str:
    """A row's dtype as a report shows it: with the arithmetic its bound models where that is not the dtype's
    own ("float16 (float32 within each op)": a mixed policy's arithmetic on data in the format)."""
    if not arithmetic or arithmetic == dtype:
        return dtype
    if arithmetic in MIXED_POLICIES:
        return f"{dtype} (float32 within each op)"
    if arithmetic in COMPOSED_ACTIVATION_POLICIES:
        return f"{dtype} (float32 within each op, activations composed in half)"
    return f"{dtype} ({arithmetic})"


def _ml_dtypes():
    """ml_dtypes, imported where bfloat16 is asked for: the environments that install the package without its
    dependencies (noxfile.py's onnx2tf and nobuco sessions) need it for nothing else."""
    import ml_dtypes

    return ml_dtypes


def numpy_dtype(name) -> np.dtype:
    """The NumPy dtype of a format's name (or of a dtype, returned as it is): bfloat16 is ml_dtypes'."""
    if isinstance(name, str) and name == "bfloat16":
        return np.dtype(_ml_dtypes().bfloat16)
    return np.dtype(name)


def finfo(name):
    """The format's limits (``max``, ``eps``, ``tiny``): NumPy's, and ml_dtypes' for bfloat16."""
    dtype = numpy_dtype(name)
    return np.finfo(dtype) if dtype.kind == "f" else _ml_dtypes().finfo(dtype)


def storage_format(dtype: str) -> str:
    """The format a computation in ``dtype`` (a format or a mixed policy) stores its results in."""
    if dtype in COMPOSED_ACTIVATION_POLICIES:
        return COMPOSED_ACTIVATION_POLICIES[dtype]
    if dtype not in FORMATS and dtype not in MIXED_POLICIES:
        raise ValueError(f"dtype: expected a format {FORMATS} or a mixed policy {tuple(MIXED_POLICIES)}, "
                         f"got {dtype!r}")
    return MIXED_POLICIES.get(dtype, dtype)


def round_to(array, name: str) -> np.ndarray:
    """``array`` rounded to the format ``name`` (to nearest, ties to even), as float64 values exactly in it.

    From float32 values (the suite's data) the rounding is one rounding. From float64 values NumPy rounds
    to float16 once, and ml_dtypes rounds to bfloat16 through float32, twice (1 + 2**-8 + 2**-40 becomes
    1, not 1 + 2**-7): still a bfloat16 value, within u_bf16 + u_32 of the argument, relatively. A value
    beyond the format's range is refused (it would become inf), naming it."""
    array = np.asarray(array, np.float64)
    with np.errstate(over="ignore"):
        rounded = array.astype(numpy_dtype(name)).astype(np.float64)
    overflow = np.isfinite(array) & ~np.isfinite(rounded)
    if np.any(overflow):
        index = tuple(int(i) for i in np.argwhere(overflow)[0])
        raise ValueError(f"round_to {name}: {float(array[index])!r} at index {index} is beyond the format's largest "
                         f"finite value {float(finfo(name).max)!r}")
    return rounded


def exactly_in(array, name: str) -> bool:
    """Whether every value of ``array`` is a value of the format ``name``."""
    array = np.asarray(array, np.float64)
    with np.errstate(over="ignore"):
        return bool(np.array_equal(array.astype(numpy_dtype(name)).astype(np.float64), array))


def check_exact(named_arrays: dict, name: str) -> None:
    """Raise if any array of ``{what: array}`` holds a value that is not exactly in the format ``name``:
    a bound assumes the computation starts from the very numbers the reference starts from."""
    for what, array in named_arrays.items():
        array = np.asarray(array, np.float64)
        with np.errstate(over="ignore"):
            off = array.astype(numpy_dtype(name)).astype(np.float64) != array
        if np.any(off):
            index = tuple(int(i) for i in np.argwhere(off)[0])
            raise ValueError(f"{what}: expected values exactly representable in {name} (round the data with "
                             f"rnn_equivalence.reference.formats.round_to), got {float(array[index])!r} at index "
                             f"{index}")
