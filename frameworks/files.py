"""The weight files people port, read as arrays only: never code, never a pickle's objects.

    load_weights(path) -> {name: np.ndarray}       the file's named weights, flat
    find_recurrent(weights) -> Inspection           its recurrent modules, each read by its mapping
    read_as(weights, system) -> Module              the file as one module of any system of the suite
    select(modules, location) -> Module             one of them, by its location as ``inspect`` prints it

Formats read (by suffix):

- ``.safetensors``: a PyTorch (or any) state_dict saved with safetensors (``safetensors.numpy``);
- ``.pt``, ``.pth``, ``.bin``: a PyTorch state_dict saved with ``torch.save``, loaded with
  ``torch.load(weights_only=True)``, PyTorch's own loader for untrusted files, which refuses any
  object but tensors and plain containers (a ``{"state_dict": ...}`` checkpoint is unwrapped);
- the same suffixes holding a TorchScript archive (``torch.jit.save`` of a scripted or traced module, which
  ``weights_only`` refuses: it has ``code/`` and ``constants.pkl``): its tensors by their module paths
  (``rnn.weight_ih_l0``), read without torch: its ``data.pkl`` unpickled by ``_DataUnpickler`` with the
  archive's own ``__torch__`` classes as inert attribute holders and each tensor rebuilt in NumPy from
  ``data/<key>`` (dtype, offset, size, stride); its code is never read, ``torch.jit.load`` (which runs it)
  never called;
- ``.npz``: NumPy arrays by name, ``allow_pickle=False``;
- ``.weights.h5`` (Keras 3), ``.h5`` (Keras 2 / tf_keras ``save_weights``), read with h5py (arrays only),
  and ``.keras`` (Keras 3's zip: its ``model.weights.h5``, read from memory; its config is not read);
- ``.onnx``: the ``RNN``, ``LSTM`` and ``GRU`` nodes of the graph, their W, R, B (an LSTM's P) initializers, read
  with ``onnx.load`` (a protobuf: data only), each node's ``linear_before_reset``, ``clip`` and ``input_forget`` kept
  beside them (a reverse node, or activations other than the defaults, refused by name); ONNX Runtime's
  ``DynamicQuantizeLSTM`` (``quantize_dynamic``'s int8 LSTM): its integers, scales and zero points, checked, read as
  the dequantized LSTM it computes with (``Module.quantized`` keeps how it is stored, and its grid);
- a TF1 checkpoint (``model.ckpt.index``, or the prefix ``model.ckpt``): its variables, read with
  ``tf.train.load_checkpoint`` (tensors only; the graph's ``.meta`` is not read);
- ``.msgpack``: Flax's ``flax.serialization.to_bytes`` of a variables dict (linen) or of an nnx state's
  pure dict, read with ``flax.serialization.msgpack_restore`` (msgpack: data only), paths joined by "/";
- ``.pdparams``: PaddlePaddle's ``paddle.save(layer.state_dict(), path)``, a pickle of NumPy arrays (protocol
  2 to 4), unpickled by ``_DataUnpickler`` admitting NumPy's array globals only, as this module's own functions;
- MLX's ``mlx.nn.Module.save_weights``: a ``.safetensors`` or an ``.npz``, read as above.

A pickle is never given to ``pickle.load``: any global but the few a format needs (``_DataUnpickler``'s
table) is refused by name before anything is called, so a payload (``os.system``, ``builtins.eval``) never runs.

A recurrent module is found by PyTorch's own parameter names (``nn.RNN``/``nn.LSTM``/``nn.GRU``:
``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}``;
the cells: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``) under any module path
(``encoder.rnn.``); its family is the gate count, ``weight_hh``'s rows over the hidden size; it is
then read by the suite's mapping (``rnn_equivalence.frameworks.convert.read``), which checks every shape in
PyTorch's names. Keras layers are found by their cells' weights (Keras 3: ``<layer>/cell/vars/0, 1, 2``
= kernel, recurrent_kernel, bias; Keras 2: ``<layer>/.../kernel:0``, ``recurrent_kernel:0``, ``bias:0``),
a ``Bidirectional`` by its ``forward_*`` and ``backward_*`` halves; the family from recurrent_kernel's
columns over its rows, a GRU's variant from its bias (two rows: reset_after). ONNX nodes by their
op_type. TF1 cells by their variable scope (``basic_rnn_cell``, ``basic_lstm_cell``, ``lstm_cell``,
``gru_cell``; ``rnn/multi_rnn_cell/cell_0/...``, ``bidirectional_rnn/fw/...`` each a cell), read with
the TF1 mapping, ``forget_bias`` 1.0 (the cells' default, which the checkpoint does not record) folded
out. Flax cells by the names under one path (linen's ``ii``, ``if``, ... ``hi.bias``; nnx's ``dense_i``,
``if_``, ...: exactly one Flax system's). Paddle's ``nn.SimpleRNN``/``nn.LSTM``/``nn.GRU`` have PyTorch's names
and gate order, and bias layout (tests/cli/test_paddle_files.py: Paddle's own outputs reproduced by the
reference within the bound), so the PyTorch mapping reads them; each layer's cells are in the file again
(``0.cell.weight_ih``, ``0.cell_fw.``/``0.cell_bw.`` where bidirectional): those copies are checked equal to the
layer's weights and listed as copies, not read as modules of their own (one that differs is refused, as is a
projection, ``proj_size``, whose ``weight_ho`` Paddle keeps in the cells only). MLX's ``nn.RNN``, ``nn.LSTM`` and
``nn.GRU`` by the exact set of their parameters' names under one module path (``save_weights`` names them by the
module tree's dotted paths: ``encoder.Wx``, ``layers.0.Wh``): ``Wxh, Whh[, bias]`` (system ``mlx``), ``Wx, Wh[,
bias]`` (``mlx-lstm``), ``Wx, Wh[, b, bhn]`` (``mlx-gru``; without bias, an LSTM's and a GRU's are told apart by
``Wh``'s gate count), each one layer, one direction, read with the MLX mapping (frameworks/mlx_layers.py;
tests/cli/test_mlx_files.py: MLX's own outputs reproduced by the reference within the bound). ``Wx``, ``Wh``,
``Wxh``, ``Whh`` and ``bhn`` are no other system's names: a path holding one is MLX's, and its names that are no
MLX layer's exactly (a tensor missing, one more), or a shape that does not read, are refused by name. Every
other weight (an embedding, a dense head, an optimizer's slots) is listed as skipped.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rnn_equivalence.frameworks.convert import mapping, read
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.stack import StackParams


class FileRefused(ValueError):
    """A file that cannot be read as named weights (the reason, and what was expected, are said)."""


# The largest weight read, in elements: a recurrent layer of hidden size 16384 has 4 * 16384^2 = 1.07e9
# (an LSTM's W_h). A file declaring more (an HDF5 dataset or ONNX tensor is a shape and a promise) is refused
# before anything is allocated.
MAX_ELEMENTS = 2**31
# The largest file read, checked before reading (a recurrent model's weights are megabytes).
MAX_FILE_BYTES = int(float(os.environ.get("RNN_EQ_MAX_FILE_GIB", "4")) * 2**30)

READERS = {".safetensors": "safetensors", ".pt": "torch", ".pth": "torch", ".bin": "torch", ".npz": "numpy",
           ".h5": "h5", ".keras": "keras", ".onnx": "onnx", ".index": "tf_checkpoint", ".msgpack": "flax",
           ".pdparams": "paddle"}
PYTORCH_FAMILIES = {1: ("rnn", "torch", "torch-rnn"), 4: ("lstm", "torch-lstm", "torch-lstm-rnn"),
                    3: ("gru", "torch-gru", "torch-gru-rnn")}  # gates: (family, cell system, layer system)
# weight_ih_l0_reverse -> (weight, ih, 0, True); weight_ih -> (weight, ih, None, False)
PYTORCH_NAME = re.compile(r"^(?P<prefix>(?:.*\.)?)(?P<kind>weight|bias)_(?P<side>ih|hh|hr)"
                          r"(?:_l(?P<layer>\d+)(?P<reverse>_reverse)?)?$")


def load_weights(path) -> dict[str, np.ndarray]:
    """The named arrays of a weight file (see the module's docstring for the formats), flat, as NumPy."""
    path = Path(path)
    if not path.is_file() and path.with_name(path.name + ".index").is_file():
        path = path.with_name(path.name + ".index")  # a TF1 checkpoint named by its prefix, as TF names it
    if not path.is_file():
        raise FileRefused(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise FileRefused(f"{path}: {size / 2**30:.1f} GiB: expected at most {MAX_FILE_BYTES / 2**30:.0f} GiB "
                          f"of weights (set RNN_EQ_MAX_FILE_GIB to read more)")
    if size == 0:
        raise FileRefused(f"{path}: empty file: expected weights "
                          f"({READERS.get(path.suffix.lower(), 'a known format')})")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise FileRefused(f"{path}: expected one of {', '.join(sorted(READERS))}, got {path.suffix or 'no suffix'!r}")
    readers = {"safetensors": _safetensors, "torch": _torch, "numpy": _numpy, "h5": _h5, "keras": _keras_zip,
               "onnx": _onnx, "tf_checkpoint": _tf_checkpoint, "flax": _flax_msgpack, "paddle": _paddle}
    weights = readers[reader](path)
    if not weights:
        raise FileRefused(f"{path}: expected named weights, got none")
    return weights


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise FileRefused(f"{path}: reading .safetensors needs the safetensors package "
                          f"(pip install 'rnn-equivalence[files]')") from None
    _bfloat16_known()
    try:
        return dict(load_file(str(path)))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for a bad header
        raise FileRefused(f"{path}: not a readable safetensors file ({type(error).__name__}: {error})") from None


def _torch(path: Path) -> dict[str, np.ndarray]:
    """A ``torch.save`` state_dict, by ``torch.load(weights_only=True)``; a TorchScript archive
    (``torch.jit.save``), which that refuses, by ``_torchscript``, without torch."""
    if not zipfile.is_zipfile(path):
        raise FileRefused(f"{path}: expected a torch.save file (a zip archive), got something else")
    try:
        with zipfile.ZipFile(path) as archive:
            if _is_torchscript(archive.namelist()):
                return _torchscript(path, archive)
    except FileRefused:
        raise
    except Exception as error:  # noqa: BLE001 - zipfile raises BadZipFile, zlib.error, EOFError, ... for a bad entry
        raise FileRefused(f"{path}: not a readable zip archive ({type(error).__name__}: {str(error)[:200]})") from None
    try:
        import torch
    except ImportError:
        raise FileRefused(f"{path}: reading a torch.save file needs torch (or save it as .safetensors)") from None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - weights_only refuses any object with an UnpicklingError
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FileRefused(f"{path}: torch.load(weights_only=True) refused it: {first[:200]}. Nothing in it was "
                          f"run. Save the weights alone: torch.save(model.state_dict(), path), or "
                          f"safetensors.torch.save_file(model.state_dict(), 'model.safetensors')") from None
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]  # a training checkpoint: its model's weights
    if not isinstance(loaded, dict):
        raise FileRefused(f"{path}: expected a state_dict (a dict of tensors), got {type(loaded).__name__}")
    weights = {}
    for name, value in loaded.items():
        if not (isinstance(name, str) and isinstance(value, torch.Tensor)):
            raise FileRefused(f"{path}: expected a state_dict of named tensors, got {name!r}: {type(value).__name__}")
        weights[name] = _torch_to_numpy(value.detach().cpu())
    return weights


def refusal(error: Exception) -> str:
    """The mapping's error as a file's refusal: a tensor of another dtype (the mapping takes floating point weights
    only) is said to be unsupported, and why, rather than only what was expected."""
    if isinstance(error, TypeError) and "got dtype" in str(error):
        return f"{error}, which is not supported (integer weights: a quantized model, docs/TOLERANCES.md, int8)"
    return str(error)


def _bfloat16_known() -> None:
    """NumPy reads a bfloat16 tensor (safetensors' BF16) once ml_dtypes has registered the type, where installed."""
    import importlib

    try:
        importlib.import_module("ml_dtypes")  # its import registers bfloat16 with NumPy
    except ImportError:
        pass


def _torch_to_numpy(tensor) -> np.ndarray:
    """A tensor as NumPy, in its own dtype: bfloat16, which torch's ``numpy()`` refuses, as ml_dtypes' (its bits)."""
    import torch

    if tensor.dtype == torch.bfloat16:
        from rnn_equivalence.reference.formats import numpy_dtype

        return tensor.view(torch.int16).numpy().view(numpy_dtype("bfloat16"))
    return tensor.numpy()


def _numpy(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as error:  # an object array needs pickle: refused
        raise FileRefused(f"{path}: expected numeric arrays, got {error}") from None
    except (OSError, zipfile.BadZipFile, EOFError) as error:
        raise FileRefused(f"{path}: not a readable .npz file ({error})") from None


def _h5(path, source=None) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file, by its path (h5py reads arrays; nothing is deserialised)."""
    try:
        import h5py
    except ImportError:
        raise FileRefused(f"{path}: reading .h5 needs h5py (pip install h5py)") from None
    weights = {}
    try:
        with h5py.File(source or path, "r") as f:
            def visit(name, item):
                if isinstance(item, h5py.Dataset):
                    if item.dtype.kind not in "fiu":
                        raise FileRefused(f"{path}: {name}: expected numeric weights, got dtype {item.dtype}")
                    _check_size(path, name, item.shape)
                    weights[name] = np.asarray(item[()])
            f.visititems(visit)
    except FileRefused:
        raise
    except Exception as error:  # noqa: BLE001 - h5py raises OSError and others for a file that is not HDF5
        raise FileRefused(f"{path}: not a readable HDF5 file ({type(error).__name__}: {error})") from None
    return weights


def _tf_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """A TF checkpoint's variables (its index and data files; ``path`` is the ``.index``)."""
    try:
        import tensorflow as tf
    except ImportError:
        raise FileRefused(f"{path}: reading a TF checkpoint needs tensorflow") from None
    prefix = str(path)[:-len(".index")]
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes = reader.get_variable_to_shape_map()
        for name, shape in shapes.items():
            _check_size(path, name, shape)
        return {name: np.asarray(reader.get_tensor(name)) for name in shapes if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    except FileRefused:
        raise
    except Exception as error:  # noqa: BLE001 - TF raises its own error types for a broken checkpoint
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FileRefused(f"{path}: not a readable TF checkpoint ({type(error).__name__}: {first})") from None


def _flax_msgpack(path: Path) -> dict[str, np.ndarray]:
    """A Flax msgpack file's arrays, by their paths joined with "/"."""
    try:
        from flax.serialization import msgpack_restore
    except ImportError:
        raise FileRefused(f"{path}: reading .msgpack needs flax") from None
    try:
        restored = msgpack_restore(path.read_bytes())
    except Exception as error:  # noqa: BLE001 - msgpack raises its own errors for a malformed file
        raise FileRefused(f"{path}: not a readable Flax msgpack file ({type(error).__name__}: {error})") from None
    weights = {}

    def flatten(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                flatten(value, f"{prefix}/{key}" if prefix else str(key))
        else:
            array = np.asarray(node)
            if array.dtype.kind not in "fiu":
                raise FileRefused(f"{path}: {prefix}: expected numeric weights, got {array.dtype}")
            _check_size(path, prefix, array.shape)
            weights[prefix] = array

    flatten(restored, "")
    return weights


# --- pickles read as data: PaddlePaddle's .pdparams, TorchScript archives ---------------------------------
# Both formats are pickles. Neither is unpickled by ``pickle.load``: ``_DataUnpickler`` builds only what a
# table of globals of its own hands out (this module's functions, which rebuild NumPy arrays from the bytes
# the file holds), and refuses any other global by name before anything is called.


class _Pickled:
    """An object a pickle may set the state of (BUILD): an array, a dtype, an archive's object; no other."""

    def __setstate__(self, state):
        raise NotImplementedError


class _NumpyNdarray:
    """``numpy.ndarray`` as a pickle names it: only ``_reconstruct``'s first argument, never instantiated."""


class _PickledDtype(_Pickled):
    """``numpy.dtype(spec, align, copy)`` and its state (version, byte order, ...): a numeric dtype only."""

    def __init__(self, spec, align=False, copy=False):
        self.spec, self.order = spec, "="

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) >= 5 and state[1] in ("<", ">", "|", "=")
                and state[2:5] == (None, None, None)):
            raise ValueError(f"dtype {_brief(self.spec)}: expected the state of a plain numeric dtype, got "
                             f"{_brief(state)}")
        self.order = state[1]

    def dtype(self) -> np.dtype:
        if not (isinstance(self.spec, str) and re.fullmatch(r"[fiub][1248]", self.spec)):
            raise ValueError(f"dtype {_brief(self.spec)}: expected a numeric one (f2, f4, f8, i1..i8, u1..u8, b1)")
        return np.dtype(self.spec).newbyteorder(self.order)


class _PickledArray(_Pickled):
    """``numpy.core.multiarray._reconstruct(ndarray, (0,), b"b")`` and its state, ``ndarray.__reduce__``'s
    (version, shape, dtype, is_fortran, bytes): the array rebuilt from the bytes, its size checked first."""

    def __init__(self):
        self.array = None

    def __setstate__(self, state):
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[2], _PickledDtype)
                and isinstance(state[4], bytes) and _is_shape(state[1])):
            raise ValueError(f"an array's state: expected (version, shape, dtype, is_fortran, bytes), got "
                             f"{_brief(state)}")
        _, shape, dtype, fortran, data = state
        dtype = dtype.dtype()
        _check_size(self.where, "an array", shape)
        if len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise ValueError(f"an array of shape {tuple(shape)} {dtype}: expected "
                             f"{int(np.prod(shape, dtype=np.int64)) * dtype.itemsize} bytes, got {len(data)}")
        array = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
        self.array = np.ascontiguousarray(array, dtype.newbyteorder("="))  # a copy, native order, writable


def _brief(value, expand: bool = True) -> str:
    """A value from a pickle, named without printing it whole (it may be large, or deep: one level is shown)."""
    if value is None or isinstance(value, (bool, int, float)) or isinstance(value, str) and len(value) <= 40:
        return repr(value)
    if expand and isinstance(value, (tuple, list)) and len(value) <= 8:
        return f"{type(value).__name__} ({', '.join(_brief(item, False) for item in value)})"
    return type(value).__name__ + (f" of length {len(value)}" if isinstance(value, (str, bytes, tuple, list, dict))
                                   else "")


def _is_shape(shape) -> bool:
    return isinstance(shape, tuple) and all(type(n) is int and n >= 0 for n in shape)


def _numpy_reconstruct(subtype, shape, typecode):
    if subtype is not _NumpyNdarray:
        raise ValueError(f"_reconstruct: expected numpy.ndarray, got {_brief(subtype)}")
    return _PickledArray()


def _latin1(text, encoding):
    """``_codecs.encode(text, "latin1")``: how a protocol-2 pickle holds bytes (paddle.save(protocol=2))."""
    if not (isinstance(text, str) and encoding == "latin1"):
        raise ValueError(f"_codecs.encode: expected a string and 'latin1', got {type(text).__name__}, {encoding!r}")
    return text.encode("latin1")


def _ordered_dict(*args):
    """``collections.OrderedDict()``: a state_dict, and a tensor's (empty) backward hooks."""
    import collections

    return collections.OrderedDict(*args)


# paddle.save of a state_dict: {name: numpy array}, pickled by NumPy's ndarray.__reduce__ (numpy._core since
# NumPy 2, numpy.core before); protocol 2 holds bytes as _codecs.encode(str, "latin1").
NUMPY_GLOBALS = {("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct,
                 ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct,
                 ("numpy", "ndarray"): _NumpyNdarray, ("numpy", "dtype"): _PickledDtype,
                 ("_codecs", "encode"): _latin1, ("collections", "OrderedDict"): _ordered_dict}


class _DataUnpickler(pickle._Unpickler):
    """A pickle read as data. ``find_class`` hands out only ``table``'s objects (this module's own: they rebuild
    arrays and plain containers from the pickle's bytes); any other global, which a payload needs to run code
    (``os.system``, ``builtins.eval``), is refused by name before anything is called: every callable a pickle
    calls (REDUCE, NEWOBJ) comes from ``find_class``. BUILD, which sets an object's state (and with a slot
    state any attribute of it), is admitted on ``_Pickled`` objects only, so a file cannot change the reader's
    own functions and classes. The pure-Python unpickler: its memo is a dict (the C one's is an array that a
    6-byte ``LONG_BINPUT 2**32-1`` makes 32 GiB), and its BUILD can be replaced."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data: bytes, where, table: dict, admitted: str):
        super().__init__(io.BytesIO(data))
        self.where, self.table, self.admitted = where, table, admitted

    def find_class(self, module, name):
        found = self.table.get((module, name))
        if found is None:
            raise FileRefused(f"{self.where}: its pickle names {module}.{name}, which is refused: expected only "
                              f"{self.admitted}. Nothing in the file was run")
        return found

    def load_build(self):
        state = self.stack.pop()
        target = self.stack[-1]
        if not isinstance(target, _Pickled):
            raise ValueError(f"BUILD on a {type(target).__name__}: expected an array, a dtype or an archive's object")
        target.where = self.where
        target.__setstate__(state)

    def load_extension(self):
        raise ValueError("an extension code (EXT1, EXT2, EXT4): expected globals by name")

    dispatch[pickle.BUILD[0]] = load_build
    for _opcode in (pickle.EXT1, pickle.EXT2, pickle.EXT4):  # copyreg's cache would hand out objects unchecked
        dispatch[_opcode[0]] = load_extension
    del _opcode


def _unpickle(unpickler: _DataUnpickler, what: str):
    """``unpickler.load()``; a pickle that does not read (truncated, malformed, a refused global) refused."""
    try:
        return unpickler.load()
    except FileRefused:
        raise
    except Exception as error:  # noqa: BLE001 - a malformed pickle raises anything from EOFError to TypeError
        reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise FileRefused(f"{unpickler.where}: not a readable {what} ({type(error).__name__}"
                          f"{': ' + reason if reason else ''}). Nothing in it was run") from None


PADDLE_NAMES = "StructuredToParameterName@@"  # paddle.save's table: structured name -> Paddle's parameter name


def _paddle(path: Path) -> dict[str, np.ndarray]:
    """A ``.pdparams`` file: ``paddle.save(layer.state_dict(), path)``, a pickle of {name: NumPy array} (and
    of ``StructuredToParameterName@@``, {name: Paddle's parameter name}, which is not a weight), read by
    ``_DataUnpickler`` with NumPy's array globals only."""
    admitted = "NumPy arrays (numpy._core.multiarray._reconstruct, numpy.ndarray, numpy.dtype) and dicts"
    loaded = _unpickle(_DataUnpickler(path.read_bytes(), path, NUMPY_GLOBALS, admitted), "paddle.save pickle")
    if not isinstance(loaded, dict):
        raise FileRefused(f"{path}: expected paddle.save of a state_dict (a dict of arrays), got "
                          f"{type(loaded).__name__}")
    weights = {}
    for name, value in loaded.items():
        if name == PADDLE_NAMES and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            continue
        if not (isinstance(name, str) and isinstance(value, _PickledArray) and value.array is not None):
            raise FileRefused(f"{path}: expected a state_dict of named arrays, got {_brief(name)}: "
                              f"{type(value).__name__}")
        weights[name] = value.array
    return weights


# TorchScript: a zip of <archive>/data.pkl (the module's objects; each tensor a _rebuild_tensor_v2 of a
# storage, persistent id ("storage", torch.<Type>Storage, key, device, numel), its bytes in
# <archive>/data/<key>), <archive>/code/ (the classes' TorchScript source) and <archive>/constants.pkl.
TORCH_STORAGES = {"FloatStorage": "f4", "DoubleStorage": "f8", "HalfStorage": "f2", "LongStorage": "i8",
                  "IntStorage": "i4", "ShortStorage": "i2", "CharStorage": "i1", "ByteStorage": "u1",
                  "BoolStorage": "b1"}
MAX_DEPTH = 64  # the deepest module nesting read
MAX_OBJECTS = 100_000  # the most module paths walked (a module shared by two parents is walked twice)


class _StorageType:
    def __init__(self, name: str):
        self.name, self.dtype = name, np.dtype(TORCH_STORAGES[name])


class _ScriptObject(_Pickled):
    """An object of the archive's own classes (``__torch__.*``) as data: its attributes, never its class,
    whose code (in the archive's ``code/``) is not read."""

    qualified_name = ""

    def __setstate__(self, state):
        self.state = state


def _rebuild_parameter(data, requires_grad, backward_hooks, *rest):
    if not isinstance(data, np.ndarray):
        raise ValueError(f"_rebuild_parameter: expected a tensor, got {type(data).__name__}")
    return data


def _identity(value, *type_tag):
    """torch.jit._pickle's restore_type_tag(value, "List[str]") and build_*list(value): the value."""
    return value


class _TorchScriptUnpickler(_DataUnpickler):
    """``data.pkl`` of a TorchScript archive: the archive's ``__torch__`` classes as inert ``_ScriptObject``
    types; tensors rebuilt by ``rebuild_tensor`` from ``<archive>/data/<key>``."""

    def __init__(self, archive: zipfile.ZipFile, prefix: str, path: Path, byteorder: str):
        info = archive.getinfo(f"{prefix}data.pkl")
        if info.file_size > MAX_FILE_BYTES:
            raise FileRefused(f"{path}: {prefix}data.pkl declares {info.file_size} bytes: expected at most "
                              f"{MAX_FILE_BYTES}")
        table = {("torch._utils", "_rebuild_tensor_v2"): self.rebuild_tensor,
                 ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
                 ("collections", "OrderedDict"): _ordered_dict,
                 **{("torch.jit._pickle", name): _identity for name in
                    ("restore_type_tag", "build_tensorlist", "build_intlist", "build_doublelist", "build_boollist")},
                 **{("torch", name): _StorageType(name) for name in TORCH_STORAGES}}
        storages = ", ".join(name[:-len("Storage")] for name in TORCH_STORAGES)
        admitted = ("the archive's own __torch__ classes (as data), tensors (torch._utils._rebuild_tensor_v2 of a "
                    f"torch.<Type>Storage, <Type> one of {storages}), lists and dicts")
        super().__init__(archive.read(info), path, table, admitted)
        self.archive, self.prefix, self.byteorder = archive, prefix, "<" if byteorder == "little" else ">"
        self.storages: dict[str, tuple] = {}
        self.classes: dict[str, type] = {}

    def find_class(self, module, name):
        if module == "__torch__" or module.startswith("__torch__."):
            qualified = f"{module}.{name}"
            if qualified not in self.classes:
                self.classes[qualified] = type("ScriptObject", (_ScriptObject,), {"qualified_name": qualified})
            return self.classes[qualified]
        return super().find_class(module, name)

    def persistent_load(self, pid):
        """("storage", storage type, key, device, numel): the storage's dtype, key and size, checked; its
        bytes read when a tensor is rebuilt from it."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and isinstance(pid[2], str) and re.fullmatch(r"\w+", pid[2]) and type(pid[4]) is int and pid[4] >= 0):
            raise ValueError(f"a storage reference: expected ('storage', torch.<Type>Storage, key, device, numel), "
                             f"got {_brief(pid)}")
        _, kind, key, _, numel = pid
        _check_size(self.where, f"storage {key}", (numel,))
        return (kind.dtype.newbyteorder(self.byteorder), key, numel)

    def storage_bytes(self, key: str, nbytes: int) -> bytes:
        if key not in self.storages:
            name = f"{self.prefix}data/{key}"
            try:
                info = self.archive.getinfo(name)
            except KeyError:
                raise FileRefused(f"{self.where}: its tensor's storage {name} is missing from the archive") from None
            if info.file_size < nbytes:
                raise FileRefused(f"{self.where}: {name} holds {info.file_size} bytes: expected at least {nbytes} "
                                  f"for its declared size")
            with self.archive.open(info) as entry:
                data = entry.read(nbytes)
            if len(data) != nbytes:
                raise FileRefused(f"{self.where}: {name}: read {len(data)} bytes, expected {nbytes}")
            self.storages[key] = data
        return self.storages[key]

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
        """``torch._utils._rebuild_tensor_v2`` in NumPy: the view (offset, size, stride) of the storage, copied."""
        if not (isinstance(storage, tuple) and len(storage) == 3 and type(offset) is int and offset >= 0
                and _is_shape(tuple(size)) and _is_shape(tuple(stride)) and len(size) == len(stride)):
            raise ValueError(f"a tensor: expected (storage, offset, size, stride, ...), got size {_brief(size)}, "
                             f"stride {_brief(stride)}")
        dtype, key, numel = storage
        size, stride = tuple(size), tuple(stride)
        _check_size(self.where, f"a tensor of storage {key}", size)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else -1
        if last >= numel:
            raise FileRefused(f"{self.where}: a tensor of shape {size} (offset {offset}, stride {stride}) reaches "
                              f"element {last} of storage {key}, which declares {numel}")
        data = np.frombuffer(self.storage_bytes(key, numel * dtype.itemsize), dtype, count=numel)
        view = np.lib.stride_tricks.as_strided(data[offset:] if all(size) else data[:0], size,
                                               tuple(s * dtype.itemsize for s in stride), writeable=False)
        return np.ascontiguousarray(view, dtype.newbyteorder("="))


def _is_torchscript(names: list[str]) -> bool:
    """A TorchScript archive (``torch.jit.save``), not a state_dict (``torch.save``): it has ``code/`` and
    ``constants.pkl`` (what ``torch.load`` looks for, to hand it to ``torch.jit.load``, which runs its code)."""
    return any(len(parts) > 1 and (parts[1] == "code" or parts[1] == "constants.pkl")
               for parts in (name.split("/") for name in names))


def _torchscript(path: Path, archive: zipfile.ZipFile) -> dict[str, np.ndarray]:
    """A TorchScript archive's tensors by their module paths (``rnn.weight_ih_l0``), read without torch: its
    ``data.pkl`` by ``_TorchScriptUnpickler``, the module tree walked for tensor attributes (a list of tensors,
    an LSTM's ``_flat_weights``, holds the same tensors again: not read)."""
    pickles = [name for name in archive.namelist() if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        raise FileRefused(f"{path}: a TorchScript archive: expected one <archive>/data.pkl, got {pickles or 'none'}")
    prefix = pickles[0][:-len("data.pkl")]
    names = set(archive.namelist())
    byteorder = "little"  # without the entry (written since torch 2.1): earlier archives are little-endian
    if f"{prefix}byteorder" in names and archive.getinfo(f"{prefix}byteorder").file_size <= 16:
        byteorder = archive.read(f"{prefix}byteorder").decode("ascii", "replace").strip()
    elif f"{prefix}byteorder" in names:
        byteorder = "(over 16 bytes)"
    if byteorder not in ("little", "big"):
        raise FileRefused(f"{path}: {prefix}byteorder says {byteorder[:20]!r}: expected little or big")
    top = _unpickle(_TorchScriptUnpickler(archive, prefix, path, byteorder), "TorchScript data.pkl")
    if not isinstance(top, _ScriptObject):
        raise FileRefused(f"{path}: expected a scripted or traced module, got {type(top).__name__}")
    weights: dict[str, np.ndarray] = {}
    _script_tensors(path, top, "", weights, 0)
    return weights


def _script_tensors(path, module: _ScriptObject, prefix: str, out: dict, depth: int, visits=None) -> None:
    """Every tensor attribute of ``module`` and of the objects under it, by its path. An object whose state is
    not its attributes (a class with its own ``__getstate__``: the archive's code would rebuild it, and its
    state's names are not the module's) is refused where it holds a tensor, and passed over where it holds none.
    ``visits`` counts the objects walked: a pickle can make a tree of 2**64 paths of a few objects."""
    visits = visits if visits is not None else [0]
    visits[0] += 1
    where = prefix.rstrip(".") or "the top-level module"
    if depth > MAX_DEPTH or visits[0] > MAX_OBJECTS:
        raise FileRefused(f"{path}: {where}: objects nested deeper than {MAX_DEPTH}, or more than {MAX_OBJECTS} "
                          f"module paths: expected a module tree")
    state = getattr(module, "state", None)
    if not isinstance(state, dict):
        if _holds_tensor(state):
            raise FileRefused(f"{path}: {where} ({module.qualified_name}) keeps its tensors in a state of its own "
                              f"(its __getstate__, {type(state).__name__}): not read, as only its code would say "
                              f"what they are; expected a scripted or traced nn.Module's attributes")
        return
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            out[f"{prefix}{name}"] = value
        elif isinstance(value, _ScriptObject):
            _script_tensors(path, value, f"{prefix}{name}.", out, depth + 1, visits)


def _holds_tensor(value) -> bool:
    """Whether a tensor is anywhere in ``value`` (lists, tuples, dicts, objects; each container once)."""
    pending, seen = [value], set()
    while pending:
        item = pending.pop()
        if isinstance(item, np.ndarray):
            return True
        if isinstance(item, _ScriptObject):
            item = getattr(item, "state", None)
        if isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            pending.extend(item.values() if isinstance(item, dict) else item)
    return False


def _check_file_size(path: Path) -> None:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise FileRefused(f"{path}: over {MAX_FILE_BYTES / 2**30:.0f} GiB: refused before reading")


def _check_size(path, name, shape) -> None:
    size = int(np.prod(shape, dtype=np.float64)) if len(shape) else 1
    if size > MAX_ELEMENTS:
        raise FileRefused(f"{path}: {name}: declares shape {tuple(shape)}, {size:.3g} elements: expected at most "
                          f"{MAX_ELEMENTS:.3g} for one weight")


def _keras_zip(path: Path) -> dict[str, np.ndarray]:
    """A ``.keras`` file: a zip holding ``model.weights.h5``, read from memory."""
    import io

    try:
        with zipfile.ZipFile(path) as archive:
            data = archive.read("model.weights.h5")
    except (zipfile.BadZipFile, KeyError, OSError) as error:
        raise FileRefused(f"{path}: expected a .keras archive holding model.weights.h5 ({error})") from None
    return _h5(path, io.BytesIO(data))


ONNX_RECURRENT = {"RNN": 1, "LSTM": 4, "GRU": 3}  # op_type: gates


def _onnx(path: Path) -> dict[str, np.ndarray]:
    """The recurrent nodes' initializers, as "<node>/W", "<node>/R", "<node>/B" (and their
    linear_before_reset, a GRU's variant, as "<node>/linear_before_reset"); every other initializer by
    its own name."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise FileRefused(f"{path}: reading .onnx needs onnx (pip install onnx)") from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # noqa: BLE001 - a protobuf that does not parse
        raise FileRefused(f"{path}: not a readable ONNX model ({type(error).__name__}: {error})") from None
    folder = path.resolve().parent
    for tensor in model.graph.initializer:
        _check_size(path, tensor.name, tuple(tensor.dims))
        if tensor.data_location == onnx.TensorProto.EXTERNAL:  # data in another file: only beside the model
            location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
            target = (folder / location).resolve()
            if not target.is_relative_to(folder) or not target.is_file():
                raise FileRefused(f"{path}: initializer {tensor.name!r} keeps its data in {location!r}, outside the "
                                  f"model's folder or missing: expected external data beside the model")
            _check_file_size(target)
    try:
        initializers = {t.name: numpy_helper.to_array(t, base_dir=str(folder)) for t in model.graph.initializer}
    except Exception as error:  # noqa: BLE001 - a tensor whose data does not fit its declared shape or type
        raise FileRefused(f"{path}: an initializer does not read as an array ({type(error).__name__}: {error})") \
            from None
    weights, used = {}, set()
    for index, node in enumerate(model.graph.node):
        quantized = node.op_type == ONNX_QUANTIZED_LSTM and node.domain == "com.microsoft"
        if node.op_type not in ONNX_RECURRENT and not quantized:
            continue
        label = node.name or f"{node.op_type}_{index}"
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        _check_onnx_attributes(path, label, "lstm" if quantized else node.op_type.lower(), attributes)
        roles = ONNX_QUANTIZED_INPUTS if quantized else ONNX_INPUTS
        for position, role in roles.items():
            name = node.input[position] if position < len(node.input) else ""
            if name:
                if name not in initializers:
                    raise FileRefused(f"{path}: node {label!r}: input {role} ({name!r}) is computed in the graph, "
                                      f"not an initializer; expected stored weights")
                weights[f"{label}/{role}"] = initializers[name]
                used.add(name)
        if node.op_type == "GRU":
            weights[f"{label}/linear_before_reset"] = np.array(attributes.get("linear_before_reset", 0))
        for attribute in ("clip", "input_forget"):  # the mapping's options (ONNX_OPTIONS), as 0-d arrays: read, so
            if attribute in attributes:              # that a family's mapping without them refuses them by name
                weights[f"{label}/{attribute}"] = np.array(attributes[attribute], np.float32)
    weights.update({name: value for name, value in initializers.items() if name not in used})
    return weights


# A node's weights by input position: ONNX's RNN, LSTM, GRU (P, the peepholes, an LSTM's only), and ONNX Runtime's
# com.microsoft DynamicQuantizeLSTM (``onnxruntime.quantization.quantize_dynamic`` of an LSTM; its contrib op's
# inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point).
ONNX_INPUTS = {1: "W", 2: "R", 3: "B", 7: "P"}
ONNX_QUANTIZED_LSTM = "DynamicQuantizeLSTM"
ONNX_QUANTIZED_INPUTS = {1: "W_quantized", 2: "R_quantized", 3: "B", 7: "P", 8: "W_scale", 9: "W_zero_point",
                         10: "R_scale", 11: "R_zero_point"}
ONNX_DEFAULT_ACTIVATIONS = {"rnn": ["Tanh"], "lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"]}


def _check_onnx_attributes(path, label: str, family: str, attributes: dict) -> None:
    """What a weight file's reading cannot carry into the verdict, refused by name rather than read as another
    function: a reverse node (it runs its sequence backwards), and activations other than the family's defaults
    (the reference runs a file's module with them, as for every other format)."""
    direction = attributes.get("direction", b"forward")
    if direction not in (b"forward", b"bidirectional"):
        raise FileRefused(f"{path}: node {label!r}: direction {direction.decode(errors='replace')!r}: expected "
                          f"forward or bidirectional (a reverse node runs its sequence backwards, which a weight "
                          f"file's module does not say)")
    activations = [name.decode(errors="replace") for name in attributes.get("activations", [])]
    default = ONNX_DEFAULT_ACTIVATIONS[family]
    if activations and (len(activations) % len(default) or
                        activations != default * (len(activations) // len(default))):
        raise FileRefused(f"{path}: node {label!r}: activations {activations}: expected the defaults "
                          f"{default} per direction (a weight file's module runs with its family's defaults)")


@dataclass
class Quantization:
    """How a module is stored quantized (ONNX Runtime's ``DynamicQuantizeLSTM``: int8 or uint8 weights with a scale
    and zero point per direction or per row, biases kept float; frameworks/onnx_quantized.py has the layout). Its
    ``Module.params`` are the dequantized weights the node computes with; ``grid`` holds, in the same canonical
    layout, each weight's bound |W~ - W| = s / 2 of the float weight it was rounded from (0 for the float biases),
    which is what the quantization bound of ``rnn_equivalence.reference.quantized`` takes."""

    op: str  # the quantized node's op type
    held: dict  # ``frameworks.onnx_quantized.held_weights``: the stored integers, scales and zero points
    grid: StackParams
    dtype: str  # the stored integers' dtype, "int8" or "uint8"
    per_row: bool  # a scale per row (``per_channel=True``), else one per direction
    largest: int  # the largest |q - zero point| stored: 64 or less where quantized with ``reduce_range``

    def summary(self) -> dict:
        return {"op": self.op, "weights": self.dtype, "scales": "per row" if self.per_row else "per direction",
                "largest_level": self.largest, "biases": "float (not quantized)"}


@dataclass
class Module:
    """One recurrent module of a file: where it is, which system of the suite reads it, its structure."""

    location: str  # the module path, "" at the top
    system: str
    family: str
    config: LayerConfig
    input_size: int
    hidden_size: int
    weights: dict[str, np.ndarray]  # its own, by the names its system uses (the location stripped)
    params: StackParams  # what it computes with: a quantized module's dequantized weights, W~ = (q - zp) * scale
    quantized: Quantization | None = None  # stored as integers and their scales (an int8 model), where so

    def summary(self) -> dict:
        p = self.params
        quantized = {"quantized": self.quantized.summary()} if self.quantized else {}
        return {**quantized, "location": self.location or "(top level)", "system": self.system, "family": self.family,
                "gru_variant": p.layers[0][0].variant if self.family == "gru" else None,
                "input_size": self.input_size, "hidden_size": self.hidden_size, "num_layers": self.config.num_layers,
                "bidirectional": self.config.bidirectional, "bias": self.config.bias,
                "projection_size": None if p.layers[0][0].W_proj is None else int(p.layers[0][0].W_proj.shape[0]),
                "activation": "tanh (PyTorch's default; a weight file does not say the activation)"
                if self.family == "rnn" else "PyTorch's fixed gates",
                "weights": {name: list(value.shape) for name, value in self.weights.items()},
                "canonical": _canonical_summary(p)}


def _canonical_summary(stack: StackParams) -> dict:
    """Each canonical tensor's shape and largest magnitude, layer by layer and direction by direction."""
    out = {}
    for k, directions in enumerate(stack.layers):
        for d, p in enumerate(directions):
            for name in ("W_x", "W_h", "b_x", "b_h", "W_proj"):
                value = getattr(p, name, None)
                if value is not None:
                    out[f"layer{k}.{'forward' if d == 0 else 'backward'}.{name}"] = {
                        "shape": list(value.shape), "max_abs": float(np.max(np.abs(value))) if value.size else 0.0}
    return out


@dataclass
class Inspection:
    modules: list[Module] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # weights of no recurrent module
    copies: dict[str, str] = field(default_factory=dict)  # {a Paddle cell's copy: its layer's name}: not read twice


TOP_LEVEL = "(top level)"  # the location of a module at the top of its file, as ``inspect`` prints it


def location_of(module: Module) -> str:
    """``module``'s location as ``inspect`` prints it: its module path, or "(top level)"."""
    return module.location or TOP_LEVEL


def select(modules: list[Module], location: str, where: str = "the file") -> Module:
    """The one module of ``modules`` at ``location`` (as ``inspect`` prints it: "(top level)" for a module at
    the top); none, or several, refused naming the modules there are (``where``: the file, for the message)."""
    found = [m for m in modules if location_of(m) == location]
    if len(found) == 1:
        return found[0]
    names = [location_of(m) for m in modules]
    if found:
        raise FileRefused(f"{len(found)} modules at {location!r} in {where} (its modules are {names}): expected one")
    raise FileRefused(f"no module {location!r} in {where}; its modules are {names}" if names else
                      f"no module {location!r} in {where}: it has no recurrent module")


def find_recurrent(weights: dict[str, np.ndarray]) -> Inspection:
    """Every recurrent module among ``weights`` (PyTorch's, Paddle's, Keras's, ONNX's, TF1's, Flax's, MLX's: see the
    module's docstring), each read by its system's mapping; a group of recurrent names that does not read is
    refused by name."""
    groups: dict[tuple[str, bool], dict[str, np.ndarray]] = {}
    skipped = []
    keras, onnx, tf1, flax = _keras_groups(weights), _onnx_groups(weights), _tf1_groups(weights), _flax_groups(weights)
    mlx = _mlx_groups(weights)
    copies = _paddle_copies(weights)
    claimed = {name for group in (*keras.values(), *onnx.values(), *tf1.values(), *(g for _, g in flax.values()),
                                  *mlx.values())
               for name in group.values()} | set(copies)
    for name, value in weights.items():
        match = PYTORCH_NAME.match(name)
        if name in claimed:
            continue
        if match is None:
            skipped.append(name)
            continue
        prefix, layered = match["prefix"], match["layer"] is not None
        groups.setdefault((prefix, layered), {})[name[len(prefix):]] = np.asarray(value)
    inspection = Inspection(skipped=skipped, copies=copies)
    for (prefix, layered), own in groups.items():
        inspection.modules.append(_read_pytorch(prefix.rstrip("."), layered, own))
    for location, directions in _keras_layers(keras).items():
        keras2 = any(KERAS3_VAR.match(name) is None for d in directions for name in d.values())  # kernel:0 names
        inspection.modules.append(_read_keras(location, [{k: weights[n] for k, n in d.items()} for d in directions],
                                              "tf-keras" if keras2 else "keras-tf"))
    for label, roles in onnx.items():
        inspection.modules.append(_read_onnx(label, {role: weights[name] for role, name in roles.items()}))
    for scope, names in tf1.items():
        inspection.modules.append(_read_tf1(scope, {own: weights[name] for own, name in names.items()}))
    for location, (system, names) in flax.items():
        native = {own: weights[name] for own, name in names.items()}
        try:
            inspection.modules.append(read_as(native, system, location=location))
        except FileRefused as error:
            raise FileRefused(f"Flax cell {location!r}: {error}") from None
    for location, names in mlx.items():
        inspection.modules.append(_read_mlx(location, {own: np.asarray(weights[name]) for own, name in names.items()}))
    return inspection


# MLX's nn.RNN, nn.LSTM, nn.GRU (frameworks/mlx_layers.py), by the exact set of their parameters' names under one
# module path (``Module.save_weights``: the module tree's dotted paths, "rnn.Wx", "layers.0.Wh"): {names: system};
# an LSTM's and a GRU's without bias are both {Wx, Wh}, told apart by Wh's rows over its columns (4 or 3 gates).
MLX_LAYERS = {frozenset({"Wxh", "Whh", "bias"}): "mlx", frozenset({"Wxh", "Whh"}): "mlx",
              frozenset({"Wx", "Wh", "bias"}): "mlx-lstm", frozenset({"Wx", "Wh", "b", "bhn"}): "mlx-gru",
              frozenset({"Wx", "Wh"}): None}
MLX_OWN = frozenset({"Wx", "Wh", "Wxh", "Whh", "bhn"})  # names no other framework's recurrent layer has
MLX_GATES = {4: "mlx-lstm", 3: "mlx-gru"}
MLX_CELLS = {"nn.RNN": ("Wxh", "Whh", "bias"), "nn.LSTM": ("Wx", "Wh", "bias"), "nn.GRU": ("Wx", "Wh", "b", "bhn")}


def _mlx_groups(weights) -> dict[str, dict[str, str]]:
    """{module path: {the layer's own name "Wx": the file's name "rnn.Wx"}} for every path holding one of MLX's own
    names (``MLX_OWN``) among its direct weights, naturally sorted (a list's layers.0, layers.1, ..., layers.10).
    Every name directly under such a path is the layer's: a set that is no MLX layer's exactly (a tensor missing,
    one of another layer, one more) is refused by ``_read_mlx``, naming what each MLX layer holds."""
    under: dict[str, dict[str, str]] = {}
    for name in weights:
        location, _, own = name.rpartition(".")
        under.setdefault(location, {})[own] = name
    return {location: under[location] for location in sorted(under, key=_natural) if MLX_OWN & set(under[location])}


def _read_mlx(location: str, own: dict[str, np.ndarray]) -> Module:
    where = f"MLX layer {location!r}" if location else "the top-level MLX layer"
    names = frozenset(own)
    if names not in MLX_LAYERS:
        expected = "; ".join(f"{cell} {', '.join(spec)}" for cell, spec in MLX_CELLS.items())
        raise FileRefused(f"{where}: weights {sorted(names)} are no MLX recurrent layer's: expected exactly "
                          f"{expected} (bias=False: the bias names left out)")
    system = MLX_LAYERS[names]
    if system is None:  # {Wx, Wh}: an LSTM or a GRU without bias, by Wh's gate count
        Wh = own["Wh"]
        gates = Wh.shape[0] // Wh.shape[1] if np.ndim(Wh) == 2 and Wh.shape[1] else 0
        system = MLX_GATES.get(gates) if np.ndim(Wh) == 2 and gates * Wh.shape[1] == Wh.shape[0] else None
        if system is None:
            raise FileRefused(f"{where}: Wx and Wh without bias (nn.LSTM or nn.GRU, bias=False): expected Wh of shape "
                              f"(4*hidden_size, hidden_size) or (3*hidden_size, hidden_size), got {np.shape(Wh)}")
    config = LayerConfig(1, False, len(names) > 2)
    own = {name: own[name] for name in mapping(system).native_spec(config, 1, 1)}  # MLX's order: Wx, Wh, bias
    try:
        params = read(own, system, config)
    except (ValueError, TypeError) as error:  # TypeError: a tensor's dtype
        raise FileRefused(f"{where}: {refusal(error)}") from None
    first = params.layers[0][0]
    return Module(location, system, mapping(system).family, config, int(first.W_x.shape[1]),
                  int(first.W_h.shape[1]), own, params)



# PaddlePaddle's nn.SimpleRNN, nn.LSTM, nn.GRU: PyTorch's names (weight_ih_l0, ..., _reverse), and each layer's
# cells again as "<k>.cell.<name>" (one direction) or "<k>.cell_fw." and "<k>.cell_bw." (PaddlePaddle/Paddle#45412):
# one parameter under two names (paddle.save writes an array for each; its StructuredToParameterName@@ table
# names one parameter for both). An LSTM's projection (proj_size) is in its cells only, as "weight_ho".
PADDLE_COPY = re.compile(r"^(?P<prefix>(?:.*\.)?)(?P<layer>\d+)\.cell(?P<direction>|_fw|_bw)\."
                         r"(?P<name>weight_ih|weight_hh|bias_ih|bias_hh|weight_ho)$")


def _paddle_copies(weights) -> dict[str, str]:
    """{copy: its layer's name} for each Paddle cell copy beside its layer's weight (``0.cell_bw.weight_ih``:
    ``weight_ih_l0_reverse``), each checked equal to it: a copy that differs is refused, as is a projection
    (Paddle keeps one parameter under both names; a file where they differ was edited after paddle.save, and
    Paddle's ``set_state_dict`` would load the copy, silently, after the layer's name: tests/equivalence/
    test_paddle.py, measured with paddlepaddle 3.3.1)."""
    copies = {}
    for name in weights:
        match = PADDLE_COPY.match(name)
        if match is None:
            continue
        prefix, k = match["prefix"], match["layer"]
        if match["name"] == "weight_ho":
            if f"{prefix}weight_hh_l{k}" in weights:
                raise FileRefused(f"{name}: a Paddle LSTM with proj_size, its projection {np.shape(weights[name])} "
                                  f"in its cells only: not read (the suite reads Paddle's layers without one)")
            continue
        layer = f"{prefix}{match['name']}_l{k}{'_reverse' if match['direction'] == '_bw' else ''}"
        if layer not in weights:
            continue  # a cell of its own (Paddle's nn.RNN(cell) holds one as "cell.")
        copy, own = np.asarray(weights[name]), np.asarray(weights[layer])
        if copy.shape != own.shape or copy.dtype != own.dtype or not np.array_equal(copy, own):
            difference = f"max |diff| {np.max(np.abs(copy - own)):.3g}" if copy.shape == own.shape \
                else f"shape {copy.shape} vs {own.shape}"
            raise FileRefused(f"{name} differs from {layer} ({difference}): expected Paddle's cell copy of the "
                              f"layer's weight, the same array (one parameter under two names)")
        copies[name] = layer
    return copies


# Flax's cells, by the set of their parameters' names (each system's own, with and without the bias names of
# a bias-free configuration: Flax keeps them).
FLAX_SYSTEMS = ("flax-linen", "flax-linen-lstm", "flax-linen-gru", "flax-nnx", "flax-nnx-lstm", "flax-nnx-gru")


def _flax_groups(weights) -> dict[str, tuple[str, dict[str, str]]]:
    """{path: (system, {the cell's own name "ii.kernel": the file's name})} for every path under which the
    names are exactly one Flax cell's (an nnx state's trailing "value" left out)."""
    names_of = {}
    for system in FLAX_SYSTEMS:
        names_of[frozenset(mapping(system).native_spec(LayerConfig(), 1, 1))] = system
    under: dict[str, dict[str, str]] = {}
    for name in weights:
        parts = name.split("/")
        if parts[-1] in ("value", "raw_value") and len(parts) > 2:
            parts = parts[:-1]
        if len(parts) < 2:
            continue
        location = "/".join(parts[:-2])
        under.setdefault(location, {})[f"{parts[-2]}.{parts[-1]}"] = name
    return {location: (names_of[frozenset(own)], own) for location, own in under.items()
            if frozenset(own) in names_of}


# TF1 cells by their variable scope: <scope>/<cell>/<name>; the cell's name says which class made it.
TF1_CELLS = {"basic_rnn_cell": "tf1", "basic_lstm_cell": "tf1-basic-lstm", "lstm_cell": "tf1-lstm",
             "gru_cell": "tf1-gru"}
TF1_VAR = re.compile(r"^(?P<scope>(?:.*/)?(?P<cell>basic_rnn_cell|basic_lstm_cell|lstm_cell|gru_cell))/"
                     r"(?P<name>kernel|bias|gates/kernel|gates/bias|candidate/kernel|candidate/bias|"
                     r"w_i_diag|w_f_diag|w_o_diag|projection/kernel)$")


def _tf1_groups(weights) -> dict[str, dict[str, str]]:
    """{scope: {the cell's own name (kernel, gates/kernel, ...): the checkpoint's name}}."""
    groups: dict[str, dict[str, str]] = {}
    for name in weights:
        if (match := TF1_VAR.match(name)) is not None:
            groups.setdefault(match["scope"], {})[match["name"]] = name
    return groups


def _read_tf1(scope: str, native: dict[str, np.ndarray]) -> Module:
    system = TF1_CELLS[scope.rsplit("/", 1)[-1]]
    try:
        module = read_as(native, system, location=scope)
    except FileRefused as error:
        raise FileRefused(f"TF1 cell {scope!r}: {error}") from None
    return module


# Keras 3 (cell/vars/0..2) and Keras 2 (kernel:0, recurrent_kernel:0, bias:0) cells, by their group's path.
KERAS3_VAR = re.compile(r"^(?P<group>.*)/cell/vars/(?P<index>[0-2])$")
KERAS2_VAR = re.compile(r"^(?P<group>.*)/(?P<name>kernel|recurrent_kernel|bias)(?::0)?$")
KERAS3_NAMES = ("kernel", "recurrent_kernel", "bias")


def _keras_groups(weights) -> dict[str, dict[str, str]]:
    """{group path: {"kernel": name, "recurrent_kernel": name, "bias": name}} for every Keras cell."""
    groups: dict[str, dict[str, str]] = {}
    for name in weights:
        if (match := KERAS3_VAR.match(name)) is not None:
            groups.setdefault(match["group"], {})[KERAS3_NAMES[int(match["index"])]] = name
        elif (match := KERAS2_VAR.match(name)) is not None:
            groups.setdefault(match["group"], {})[match["name"]] = name
    return {group: names for group, names in groups.items() if "recurrent_kernel" in names and "kernel" in names}


def _keras_layers(groups) -> dict[str, list[dict[str, str]]]:
    """Cells grouped into layers: a Bidirectional's forward_* and backward_* halves are one layer, at the
    path above them; any other cell is a layer at its own path (Keras 3's ``layers/<name>``)."""
    layers: dict[str, list[dict[str, str]]] = {}
    for group in sorted(groups, key=_natural):  # lstm, lstm_1, ..., lstm_10: the order Keras names them in
        parts = group.split("/")
        forward = next((i for i, p in enumerate(parts) if p.startswith("forward")), None)
        if forward is not None:
            backward = "/".join(parts[:forward] + ["backward" + parts[forward][len("forward"):]] + parts[forward + 1:])
            if backward in groups:
                layers["/".join(parts[:forward])] = [groups[group], groups[backward]]
                continue
        if any(p.startswith("backward") for p in parts):
            continue  # the other half of a pair found above
        layers[group] = [groups[group]]
    return layers


def _natural(path: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def stacked(modules: list[Module]) -> Module:
    """Consecutive one-layer modules (a Keras model's stacked layers, each its own layer in the file) as one
    stack, where each reads the one before's output: the structure a PyTorch ``num_layers`` module has."""
    first = modules[0]
    for below, above in zip(modules, modules[1:]):
        same = (above.system, above.config.bidirectional, above.config.bias) == \
            (first.system, first.config.bidirectional, first.config.bias)
        if not same or above.input_size != below.config.num_directions * below.hidden_size \
                or below.config.num_layers != 1 or above.config.num_layers != 1:
            raise FileRefused(f"{above.location}: does not stack on {below.location} (another kind of layer, "
                              f"or input_size {above.input_size} is not its output size)")
    params = StackParams([layer for m in modules for layer in m.params.layers])
    config = LayerConfig(len(modules), first.config.bidirectional, first.config.bias)
    weights = mapping(first.system).to_native(params, config)  # the stack's own names: layer1.forward.kernel, ...
    return Module(f"{first.location} .. {modules[-1].location}", first.system, first.family, config,
                  first.input_size, first.hidden_size, weights, params)


def _read_keras(location: str, directions: list[dict[str, np.ndarray]], implementation: str) -> Module:
    """One Keras layer; ``implementation``: "keras-tf" (Keras 3's layout and hard sigmoid) or "tf-keras"
    (Keras 2's: the same layout; its hard_sigmoid is another function, which a weight file does not say)."""
    where = f"Keras layer {location!r}"
    rk = directions[0]["recurrent_kernel"]
    if np.ndim(rk) != 2 or rk.shape[0] == 0 or rk.shape[1] % rk.shape[0]:
        raise FileRefused(f"{where}: expected recurrent_kernel of shape (units, gates*units), got {np.shape(rk)}")
    gates = rk.shape[1] // rk.shape[0]
    family = {1: "rnn", 4: "lstm", 3: "gru"}.get(gates)
    if family is None:
        raise FileRefused(f"{where}: recurrent_kernel {rk.shape} has {gates} gates: expected 1, 3 or 4 "
                          f"(SimpleRNN, GRU, LSTM)")
    bias = directions[0].get("bias")
    before = family == "gru" and bias is not None and np.ndim(bias) == 1
    member = ("" if family == "rnn" else f"-{family}") + ("-reset-before" if before else "") + "-rnn"
    from rnn_equivalence.frameworks.systems import ADAPTERS  # the registry (no framework imported)

    # Keras 2's gated layers are no systems of the suite: their layout is Keras 3's, whose mapping reads them.
    system = implementation + member if implementation + member in ADAPTERS else "keras-tf" + member
    config = LayerConfig(1, len(directions) == 2, bias is not None)
    native = {f"layer0.{('forward', 'backward')[d]}.{name}": value
              for d, cell in enumerate(directions) for name, value in cell.items()}
    try:
        params = read(native, system, config)
    except (ValueError, TypeError) as error:  # TypeError: a tensor's dtype
        raise FileRefused(f"{where}: {refusal(error)}") from None
    return Module(location, system, family, config, int(directions[0]["kernel"].shape[0]), int(rk.shape[0]),
                  native, params)


ONNX_ROLES = {*ONNX_INPUTS.values(), *ONNX_QUANTIZED_INPUTS.values(), "linear_before_reset", "clip", "input_forget"}


def _onnx_groups(weights) -> dict[str, dict[str, str]]:
    """{node label: {"W": name, "R": name, "B": name, "linear_before_reset": name, ...}} of every recurrent node
    (a quantized one's "W_quantized", "R_quantized", their scales and zero points: ``ONNX_QUANTIZED_INPUTS``)."""
    groups: dict[str, dict[str, str]] = {}
    for name in weights:
        label, _, role = name.rpartition("/")
        if label and role in ONNX_ROLES:
            groups.setdefault(label, {})[role] = name
    return {label: roles for label, roles in groups.items()
            if {"W", "R"} <= set(roles) or {"W_quantized", "R_quantized"} <= set(roles)}


def _read_onnx(label: str, roles: dict[str, np.ndarray]) -> Module:
    where = f"ONNX node {label!r}"
    if "W_quantized" in roles:
        return _read_quantized_onnx(label, roles)
    W, R = roles["W"], roles["R"]
    if np.ndim(R) != 3 or R.shape[2] == 0 or R.shape[1] % R.shape[2] or np.ndim(W) != 3:
        raise FileRefused(f"{where}: expected W (directions, gates*hidden, input) and R (directions, "
                          f"gates*hidden, hidden), got W {np.shape(W)}, R {np.shape(R)}")
    gates = R.shape[1] // R.shape[2]
    family = {1: "rnn", 4: "lstm", 3: "gru"}.get(gates)
    if family is None:
        raise FileRefused(f"{where}: R {R.shape} has {gates} gates: expected 1, 3 or 4 (RNN, GRU, LSTM)")
    before = family == "gru" and int(roles.get("linear_before_reset", 0)) == 0
    system = "onnx-ort" + ("" if family == "rnn" else f"-{family}") + ("-reset-before" if before else "")
    config = LayerConfig(1, W.shape[0] == 2, "B" in roles)
    native = {role: value for role, value in roles.items() if role not in ("linear_before_reset",)}
    try:
        params = read(native, system, config)
    except (ValueError, TypeError) as error:  # TypeError: a tensor's dtype
        raise FileRefused(f"{where}: {refusal(error)}") from None
    return Module(label, system, family, config, int(W.shape[2]), int(R.shape[2]), native, params)


def _read_quantized_onnx(label: str, roles: dict[str, np.ndarray]) -> Module:
    """ONNX Runtime's ``DynamicQuantizeLSTM`` node: its stored integers, scales and zero points checked, then read
    through the quantized mapping (frameworks/onnx_quantized.py) as the dequantized LSTM it computes with."""
    from rnn_equivalence.frameworks.onnx_quantized import KERNELS, OnnxQuantizedMapping, held_weights

    where = f"ONNX node {label!r} ({ONNX_QUANTIZED_LSTM})"
    unsupported = sorted({"P", "clip", "input_forget"} & set(roles))
    if unsupported:
        raise FileRefused(f"{where}: {', '.join(unsupported)}: the int8 bound takes an LSTM without peepholes, clip "
                          f"or coupled gates")
    missing = sorted({f"{k}_{part}" for k in KERNELS for part in ("quantized", "scale", "zero_point")} - set(roles))
    if missing:
        raise FileRefused(f"{where}: expected {', '.join(missing)} among its inputs, got none")
    W, R = np.asarray(roles["W_quantized"]), np.asarray(roles["R_quantized"])
    if W.ndim != 3 or R.ndim != 3 or W.shape[0] != R.shape[0] or W.shape[0] not in (1, 2) or \
            R.shape[1] == 0 or R.shape[2] != 4 * R.shape[1] or W.shape[2] != R.shape[2]:
        raise FileRefused(f"{where}: expected W_quantized (directions, input_size, 4*hidden_size) and R_quantized "
                          f"(directions, hidden_size, 4*hidden_size), got {W.shape} and {R.shape}")
    D, rows = W.shape[0], W.shape[2]
    for kernel, q in (("W", W), ("R", R)):
        scale, zero = np.asarray(roles[f"{kernel}_scale"]), np.asarray(roles[f"{kernel}_zero_point"])
        if q.dtype not in (np.int8, np.uint8) or zero.dtype != q.dtype:
            raise FileRefused(f"{where}: expected {kernel}_quantized and {kernel}_zero_point both int8 or both uint8, "
                              f"got {q.dtype} and {zero.dtype}")
        if scale.dtype.kind != "f" or scale.size not in (D, D * rows) or zero.shape != scale.shape:
            raise FileRefused(f"{where}: expected {kernel}_scale floats and {kernel}_zero_point of one shape, "
                              f"{(D,)} (per direction) or {(D, rows)} (per row), got {scale.dtype} {scale.shape} and "
                              f"{zero.shape}")
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise FileRefused(f"{where}: expected {kernel}_scale finite and positive, got "
                              f"{scale[~(np.isfinite(scale) & (scale > 0))].ravel()[:3].tolist()}")
    held = held_weights(roles)
    config = LayerConfig(1, D == 2, "B" in roles)
    quantized_mapping = OnnxQuantizedMapping(mapping("onnx-ort-lstm"))
    native = quantized_mapping.dequantized(held)
    try:
        read(native, "onnx-ort-lstm", config)  # every shape checked in the float node's names (B's too)
    except (ValueError, TypeError) as error:
        raise FileRefused(f"{where}: {refusal(error)}") from None
    params, grid = quantized_mapping.from_quantized(held, config)
    largest = max(int(np.max(np.abs(w.q.astype(np.int64) - w.zero_points[:, None]))) for k in KERNELS for w in held[k])
    quantization = Quantization(ONNX_QUANTIZED_LSTM, held, grid, W.dtype.name,
                                np.asarray(roles["W_scale"]).size == D * rows, largest)
    return Module(label, "onnx-ort-lstm", "lstm", config, int(W.shape[1]), int(R.shape[1]),
                  {role: np.asarray(value) for role, value in roles.items()}, params, quantization)


def _read_pytorch(location: str, layered: bool, own: dict[str, np.ndarray]) -> Module:
    where = f"module {location!r}" if location else "the top-level module"
    suffix = "_l0" if layered else ""
    hh, hr = own.get(f"weight_hh{suffix}"), own.get(f"weight_hr{suffix}")
    if hh is None or np.ndim(hh) != 2:
        raise FileRefused(f"{where}: expected weight_hh{suffix} of shape (gates*hidden_size, hidden_size), "
                          f"got {'none' if hh is None else f'shape {np.shape(hh)}'} (among {sorted(own)})")
    hidden = hr.shape[1] if hr is not None and np.ndim(hr) == 2 else hh.shape[1]
    gates, rest = divmod(hh.shape[0], hidden) if hidden else (0, 1)
    if rest or gates not in PYTORCH_FAMILIES:
        raise FileRefused(f"{where}: weight_hh{suffix} has {hh.shape[0]} rows for hidden_size {hidden}: expected "
                          f"1, 3 or 4 times it (nn.RNN, nn.GRU, nn.LSTM)")
    family, cell_system, layer_system = PYTORCH_FAMILIES[gates]
    if layered:
        layers = 1 + max(int(PYTORCH_NAME.match(n)["layer"]) for n in own)
        bidirectional = any(n.endswith("_reverse") for n in own)
        config = LayerConfig(layers, bidirectional, f"bias_ih{suffix}" in own)  # a projection: read from weight_hr
        system = layer_system
    else:
        config = LayerConfig(1, False, "bias_ih" in own)
        system = cell_system
    try:
        params = read(own, system, config)
    except (ValueError, TypeError) as error:  # TypeError: a tensor's dtype
        raise FileRefused(f"{where}: {refusal(error)}") from None
    first = params.layers[0][0]
    return Module(location, system, family, config, first.W_x.shape[1], hidden, own, params)


MAX_LAYERS = 16  # the deepest stack read_as tries


def read_as(weights: dict[str, np.ndarray], system: str, location: str = "") -> Module:
    """``weights``, named as ``system`` names its own (any system of the suite: Keras's ``kernel``,
    ``recurrent_kernel``, ``bias``; ONNX's ``W``, ``R``, ``B``; ...), as one module of that system. Its
    structure (layers, directions, bias, options) is the one whose names are exactly the weights' names;
    none: refused, naming what the system expects."""
    try:
        source = mapping(system)
    except (KeyError, ValueError) as error:
        raise FileRefused(f"--as {system}: {error}") from None
    names = set(weights)
    shapes = [(1, False)] + ([(k, bi) for k in range(1, MAX_LAYERS + 1) for bi in (False, True)] if source.layer
                             else [(1, True)])
    for layers, bidirectional in shapes:
        for bias in (True, False):
            config = LayerConfig(layers, bidirectional, bias)
            try:
                options, output_size = source.read_options(weights, config)
                spec = source.native_spec(config, 1, 1, options=options, output_size=output_size)
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if set(spec) != names:
                continue
            try:
                params = read(weights, system, config)
            except (ValueError, TypeError) as error:  # TypeError: a tensor's dtype
                raise FileRefused(f"{source.cell}: {refusal(error)}") from None
            first = params.layers[0][0]
            hidden = first.W_proj.shape[1] if first.W_proj is not None else first.W_h.shape[1]
            family = source.family
            return Module(location, source.name, family, config, first.W_x.shape[1], hidden, dict(weights), params)
    expected = sorted(source.native_spec(LayerConfig(1, False, True), 1, 1))
    raise FileRefused(f"{source.cell} ({system}): expected weights named like {expected} (one cell; "
                      f"layers and directions add their own), got {sorted(names)}")


# --- writing: the target system's weights in its framework's own format ---------------------------
WRITERS = {".npz": "any system", ".safetensors": "any system", ".pt": "PyTorch systems (torch-*)",
           ".pth": "PyTorch systems (torch-*)", ".h5": "Keras systems (keras-*, tf-keras-*): a .weights.h5",
           ".keras": "Keras 3 systems (keras-*)", ".onnx": "ONNX systems (onnx-*)",
           ".msgpack": "Flax systems (flax-*)", ".ckpt": "TF1 systems (tf1*): a checkpoint prefix"}
TF1_SCOPES = {system: cell for cell, system in TF1_CELLS.items()}  # tf1-lstm: lstm_cell, ...


def write_weights(native: dict[str, np.ndarray], system: str, config: LayerConfig, path) -> Path:
    """``native`` (``system``'s weights in ``config``) written to ``path``, in the format its suffix names,
    each by the framework's own writer, read back by its own loader: .npz and .safetensors by the
    system's own names; .pt/.pth a state_dict by ``torch.save`` (``load_state_dict`` takes it);
    .weights.h5 and .keras by Keras's own ``save_weights`` and ``save`` of a ``Sequential`` of the layers
    (``tf_keras`` for Keras 2's systems); .onnx by ``onnx.save`` of the node
    (``rnn_equivalence.frameworks.build``); .msgpack by ``flax.serialization.to_bytes`` of the cell's params
    (linen: under "params"); .ckpt a TF1 checkpoint (``tf.raw_ops.SaveV2``, what ``tf.compat.v1.train.Saver``
    writes) under ``rnn/<cell's scope>``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in WRITERS:
        raise FileRefused(f"{path}: expected one of {', '.join(WRITERS)}, got {suffix or 'no suffix'!r}")
    families = {".pt": ("torch",), ".pth": ("torch",), ".h5": ("keras-", "tf-keras"), ".keras": ("keras-",),
                ".onnx": ("onnx-",), ".msgpack": ("flax-",), ".ckpt": ("tf1",)}
    if suffix in families and not system.startswith(families[suffix]):
        raise FileRefused(f"{path}: {suffix} is the format of {WRITERS[suffix]}, not of {system}; "
                          f"write .npz or .safetensors, or the target's own format")
    if suffix == ".npz":
        np.savez(path, **native)
    elif suffix == ".safetensors":
        try:
            from safetensors.numpy import save_file
        except ImportError:
            raise FileRefused(f"{path}: writing .safetensors needs the safetensors package") from None
        save_file({name: np.ascontiguousarray(value) for name, value in native.items()}, str(path))
    elif suffix in (".pt", ".pth"):
        import torch

        torch.save({name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in native.items()}, path)
    elif suffix == ".h5":
        _keras_model(native, system, config).save_weights(path)
    elif suffix == ".keras":
        _keras_model(native, system, config).save(path)
    elif suffix == ".onnx":
        import onnx

        from rnn_equivalence.frameworks.build import build

        onnx.save(build(system, read(native, system, config), config), str(path))
    elif suffix == ".msgpack":
        from flax.serialization import to_bytes

        tree: dict = {}
        for name, value in native.items():
            *modules, weight = name.split(".")
            node = tree
            for module in modules:
                node = node.setdefault(module, {})
            node[weight] = np.asarray(value)
        path.write_bytes(to_bytes({"params": tree} if system.startswith("flax-linen") else tree))
    else:
        import tensorflow as tf

        names = [f"rnn/{TF1_SCOPES[system]}/{name}" for name in native]
        tf.raw_ops.SaveV2(prefix=str(path), tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(value) for value in native.values()])
    return path


def _keras_model(native, system: str, config: LayerConfig):
    """A Sequential of the system's layers (the cell's layer class for a cell system) holding ``native``."""
    source = mapping(system)
    module = __import__("tf_keras" if system.startswith("tf-keras") else "keras")
    layers, reads = [], []
    first = read(native, system, config).layers[0][0]
    I, H = first.W_x.shape[1], first.W_h.shape[1]
    kind = {"rnn": "SimpleRNN", "lstm": "LSTM", "gru": "GRU"}[source.family]
    options = {"reset_after": source.variant == "reset_after"} if source.family == "gru" else {}
    for k in range(config.num_layers):
        layer = getattr(module.layers, kind)(H, return_sequences=True, use_bias=config.bias, **options)
        if config.bidirectional:
            layer = module.layers.Bidirectional(layer)
        layers.append(layer)
    model = module.Sequential([module.Input((None, I)), *layers] if module.__name__ == "keras"
                              else [module.layers.InputLayer((None, I)), *layers])
    for k, layer in enumerate(layers):
        halves = [layer.forward_layer, layer.backward_layer] if config.bidirectional else [layer]
        for d, half in enumerate(halves):
            for name in ("kernel", "recurrent_kernel", "bias")[:3 if config.bias else 2]:
                reads.append((getattr(half.cell, name), native[source.tag(k, d) + name]))
    for variable, value in reads:
        variable.assign(value)
    return model
