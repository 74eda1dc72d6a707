"""The weight files people port, read as arrays only: never code, never a pickle's objects.

    load_weights(path) -> {name: np.ndarray}       the file's named weights, flat
    find_recurrent(weights) -> Inspection           its recurrent modules, each read by its mapping
    read_as(weights, system) -> Module              the file as one module of any system of the suite

Formats read (by suffix):

- ``.safetensors``: a PyTorch (or any) state_dict saved with safetensors (``safetensors.numpy``);
- ``.pt``, ``.pth``, ``.bin``: a PyTorch state_dict saved with ``torch.save``, loaded with
  ``torch.load(weights_only=True)``, PyTorch's own loader for untrusted files, which refuses any
  object but tensors and plain containers (a ``{"state_dict": ...}`` checkpoint is unwrapped);
- ``.npz``: NumPy arrays by name, ``allow_pickle=False``.

A recurrent module is found by PyTorch's own parameter names (``nn.RNN``/``nn.LSTM``/``nn.GRU``:
``weight_ih_l{k}[_reverse]``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}``;
the cells: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``) under any module path
(``encoder.rnn.``); its family is the gate count, ``weight_hh``'s rows over the hidden size; it is
then read by the suite's mapping (``frameworks.convert.read``), which checks every shape in
PyTorch's names. Every other weight (an embedding, a dense head) is listed as skipped.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from frameworks.convert import mapping, read
from reference.config import LayerConfig
from reference.stack import StackParams


class FileRefused(ValueError):
    """A file that cannot be read as named weights (the reason, and what was expected, are said)."""


READERS = {".safetensors": "safetensors", ".pt": "torch", ".pth": "torch", ".bin": "torch", ".npz": "numpy"}
PYTORCH_FAMILIES = {1: ("rnn", "torch", "torch-rnn"), 4: ("lstm", "torch-lstm", "torch-lstm-rnn"),
                    3: ("gru", "torch-gru", "torch-gru-rnn")}  # gates: (family, cell system, layer system)
# weight_ih_l0_reverse -> (weight, ih, 0, True); weight_ih -> (weight, ih, None, False)
PYTORCH_NAME = re.compile(r"^(?P<prefix>(?:.*\.)?)(?P<kind>weight|bias)_(?P<side>ih|hh|hr)"
                          r"(?:_l(?P<layer>\d+)(?P<reverse>_reverse)?)?$")


def load_weights(path) -> dict[str, np.ndarray]:
    """The named arrays of a weight file (see the module's docstring for the formats), flat, as NumPy."""
    path = Path(path)
    if not path.is_file():
        raise FileRefused(f"{path}: no such file")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise FileRefused(f"{path}: expected one of {', '.join(sorted(READERS))}, got {path.suffix or 'no suffix'!r}")
    weights = {"safetensors": _safetensors, "torch": _torch, "numpy": _numpy}[reader](path)
    if not weights:
        raise FileRefused(f"{path}: expected named weights, got none")
    return weights


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise FileRefused(f"{path}: reading .safetensors needs the safetensors package "
                          f"(pip install 'rnn-equivalence[files]')") from None
    try:
        return dict(load_file(str(path)))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own error types for a bad header
        raise FileRefused(f"{path}: not a readable safetensors file ({type(error).__name__}: {error})") from None


def _torch(path: Path) -> dict[str, np.ndarray]:
    if not zipfile.is_zipfile(path):
        raise FileRefused(f"{path}: expected a torch.save file (a zip archive), got something else")
    try:
        import torch
    except ImportError:
        raise FileRefused(f"{path}: reading a torch.save file needs torch (or save it as .safetensors)") from None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - weights_only refuses any object with an UnpicklingError
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FileRefused(f"{path}: torch.load(weights_only=True) refused it: {first}") from None
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]  # a training checkpoint: its model's weights
    if not isinstance(loaded, dict):
        raise FileRefused(f"{path}: expected a state_dict (a dict of tensors), got {type(loaded).__name__}")
    weights = {}
    for name, value in loaded.items():
        if not (isinstance(name, str) and isinstance(value, torch.Tensor)):
            raise FileRefused(f"{path}: expected a state_dict of named tensors, got {name!r}: {type(value).__name__}")
        weights[name] = value.detach().cpu().numpy()
    return weights


def _numpy(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as error:  # an object array needs pickle: refused
        raise FileRefused(f"{path}: expected numeric arrays, got {error}") from None
    except (OSError, zipfile.BadZipFile, EOFError) as error:
        raise FileRefused(f"{path}: not a readable .npz file ({error})") from None


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
    params: StackParams

    def summary(self) -> dict:
        p = self.params
        return {"location": self.location or "(top level)", "system": self.system, "family": self.family,
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


def find_recurrent(weights: dict[str, np.ndarray]) -> Inspection:
    """Every PyTorch recurrent module among ``weights`` (see the module's docstring), each read by its
    system's mapping; a group of recurrent names that does not read is refused by name."""
    groups: dict[tuple[str, bool], dict[str, np.ndarray]] = {}
    skipped = []
    for name, value in weights.items():
        match = PYTORCH_NAME.match(name)
        if match is None:
            skipped.append(name)
            continue
        prefix, layered = match["prefix"], match["layer"] is not None
        groups.setdefault((prefix, layered), {})[name[len(prefix):]] = np.asarray(value)
    inspection = Inspection(skipped=skipped)
    for (prefix, layered), own in groups.items():
        inspection.modules.append(_read_pytorch(prefix.rstrip("."), layered, own))
    return inspection


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
    except ValueError as error:
        raise FileRefused(f"{where}: {error}") from None
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
            except ValueError as error:
                raise FileRefused(f"{source.cell}: {error}") from None
            first = params.layers[0][0]
            hidden = first.W_proj.shape[1] if first.W_proj is not None else first.W_h.shape[1]
            family = source.family
            return Module(location, source.name, family, config, first.W_x.shape[1], hidden, dict(weights), params)
    expected = sorted(source.native_spec(LayerConfig(1, False, True), 1, 1))
    raise FileRefused(f"{source.cell} ({system}): expected weights named like {expected} (one cell; "
                      f"layers and directions add their own), got {sorted(names)}")
