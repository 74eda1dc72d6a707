"""``torch.onnx.export`` of ``torch.nn.RNN`` (a layer) and of a one-layer ``nn.LSTM`` / ``nn.GRU``,
run in ONNX Runtime.

The weights are PyTorch's: the mapping is ``rnn_equivalence.frameworks.pytorch``'s layer mapping
(``TorchLayer``), unchanged, so a one-layer LSTM or GRU names its weights with the ``_l0``
suffix. What is checked is that the exported model computes what PyTorch and the reference
compute. The dynamo exporter (needs ``onnxscript``) unrolls the recurrence into MatMul and
Add nodes (or emits the LSTM/GRU operator); the legacy TorchScript exporter emits the ONNX
``RNN``, ``LSTM`` or ``GRU`` operator. Both are checked where the installed torch offers them.

Padded batches: a module whose forward packs its input (``pack_padded_sequence`` with the lengths
as an input of the model, the layer, ``pad_packed_sequence``), as a user writes it. The legacy
exporter turns the packing into the operator's ``sequence_lens`` (sorted with TopK where
``enforce_sorted=False``): its model takes any lengths at run time. The dynamo exporter refuses
the module (``torch.export`` cannot guard on the data-dependent ``batch_sizes``;
tests/equivalence/test_padded_onnx.py keeps the refusal checked), so it has no padded
configurations. Chunked runs: each call's h_n (c_n) fed as the next call's h0 (c0), both exporters.

No options: ONNX's LSTM has no projection, and neither exporter exports ``nn.LSTM(proj_size=P)``. The
legacy exporter refuses it; the dynamo exporter writes an LSTM node of hidden_size P without weight_hr,
which ONNX Runtime refuses to run (tests/equivalence/test_options_torch.py). Projected parameters are
refused by name (``Adapter.check_params``).
"""

from __future__ import annotations

import io
import warnings

import numpy as np

from rnn_equivalence.frameworks.base import (
    CELL, LayerConfig, Native, import_framework, scaled, states_with_last_c, swapped_names,
    transposed,
)
from rnn_equivalence.frameworks.conversion_cache import converted_once, weights_digests
from rnn_equivalence.frameworks.pytorch import TorchLayer, TorchRNN

MODULES = {"rnn": "RNN", "lstm": "LSTM", "gru": "GRU"}


class Exported(TorchLayer):
    """The module ``TorchLayer.module`` builds, exported to ONNX and run in ONNX Runtime."""

    dtypes = ("float32",)  # ONNX Runtime's CPU RNN kernels and the usual export are float32
    dynamo: bool
    converter = "torch.onnx.export"
    converter_distributions = ("onnx",)  # the onnx package writes the model, with either exporter
    # Not TorchLayer's: each exported system declares its own (see the module's docstring).
    padded_configs: tuple[LayerConfig, ...] = ()
    # An exported graph run in ONNX Runtime has no autodiff here: TorchLayer's gradients would be PyTorch's,
    # not the system's. The gradient and optimizer tests leave it out by these.
    autodiff, optimizers = "", {}
    chunked_configs: tuple[LayerConfig, ...] = ()

    def start(self):
        super().start()
        self.last_model = None  # the ONNX model of the last run (a ModelProto)
        self.onnx = import_framework("onnx", self.name)
        self.ort = import_framework("onnxruntime", self.name)
        if self.dynamo:
            import_framework("onnxscript", self.name)

    def _module_class(self):
        return getattr(self.torch.nn, MODULES[self.family])

    def gru_operators(self) -> list[int]:
        """linear_before_reset of every GRU node in the last export (0 is the ONNX default)."""
        return [next((a.i for a in node.attribute if a.name == "linear_before_reset"), 0)
                for node in self.last_model.graph.node if node.op_type == "GRU"]

    def export(self, module, args, input_names) -> bytes:
        """The ONNX model of ``module`` called on ``args`` (flattened, the arrays ``input_names`` names)."""
        names = {"input_names": list(input_names),
                 "output_names": ["output", "h_n", "c_n"][:3 if self.family == "lstm" else 2]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notices of the exporters themselves
            if self.dynamo:
                program = self.torch.onnx.export(module, args, dynamo=True, verbose=False, **names)
                return program.model_proto.SerializeToString()
            buffer = io.BytesIO()
            self.torch.onnx.export(module, args, buffer, dynamo=False, **names)
            return buffer.getvalue()

    def packed(self, module, args, config: LayerConfig, steps: int):
        """``module`` inside a module that packs its input with the lengths it is given, as a user's
        model does, and its arguments (x, lengths[, state])."""
        torch = self.torch
        rnn = torch.nn.utils.rnn
        batch_first, enforce_sorted = bool(config.option("batch_first")), bool(config.option("enforce_sorted"))

        class Packed(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = module

            def forward(self, x, lengths, *state):
                packed = rnn.pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
                output, final = self.layer(packed, *state)
                output, _ = rnn.pad_packed_sequence(output, batch_first=batch_first, total_length=steps)
                return output, final

        return Packed(), args

    def run_exported(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> list[np.ndarray]:
        """The exported model's outputs, flattened as the module returns them (output, h_n[, c_n])."""
        module, args = self.module(native, xs, state, config, g)
        names = ["x"]
        if padding is not None:
            args = (args[0], self.torch.tensor(padding.lengths, dtype=self.torch.int64), *args[1:])
            module, args = self.packed(module, args, config, xs.shape[0])
            names.append("lengths")
        names += ["h0", "c0"] if self.family == "lstm" else ["h0"]
        flat = [a for arg in args for a in (arg if isinstance(arg, tuple) else (arg,))]
        data = self.exported_model(native, module, args, flat, config, g, names[:len(flat)])
        session = self.ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        self.last_model = self.onnx.load_from_string(data)
        return [np.asarray(r)
                for r in session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), flat)})]

    def exported_model(self, native: Native, module, args, flat, config: LayerConfig, g: str, names) -> bytes:
        """The export, made once per model: an export takes seconds (dynamo unrolls all T steps).

        The model depends on the weights, the configuration, the activation and the inputs' shapes, not on the
        inputs' values (``rnn_equivalence.frameworks.conversion_cache``). A padded batch's model takes the
        lengths as an input (``names``): one model for any lengths.
        """
        # The versions (onnx's among them: ``converter_distributions``) are added by ``converted_once``.
        parts = (g, str(config), list(names), [(tuple(a.shape), str(a.dtype)) for a in flat],
                 weights_digests(native))
        return converted_once(self, parts, lambda: self.export(module, args, names))


# --- nn.RNN, a layer ----------------------------------------------------------------


class TorchOnnxExport(Exported, TorchRNN):
    cell = "torch.onnx.export(torch.nn.RNN) in ONNX Runtime"
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(1, True, options=(("batch_first", True),)),
        LayerConfig(2, True, options=(("batch_first", False),)),
    )
    mutation_config = LayerConfig(1, True, options=(("batch_first", False),))
    mutations = {
        "weight_hh_l0 transposed": transposed("weight_hh_l0"),
        "forward and reverse swapped in layer 0": swapped_names("_l0", "_l0_reverse"),
    }
    compare_with = "torch-rnn"  # the exported model must also agree with the module it came from
    chunked_configs = (LayerConfig(2, False, options=(("batch_first", False),)),)

    def describe(self) -> str:
        return f"torch.onnx.export(torch.nn.RNN, dynamo={self.dynamo}) in ONNX Runtime"

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        output, h_n = self.run_exported(native, xs, state, config, g, padding)
        return {"output": output, "h_n": h_n}


class TorchOnnxDynamo(TorchOnnxExport):
    name = "torch-onnx-dynamo"
    dynamo = True
    # The dynamo exporter unrolls the recurrence, and the export with onnxscript's
    # optimizer costs about 0.16 s per step here (8 s for 50 steps, bidirectional):
    # 12 steps run the same per-step graph, and the long-sequence rounding of ONNX
    # Runtime's MatMul, Add and Tanh is what onnx-ort's 50 steps measure. One and two directions.
    max_steps = 12
    configs = TorchOnnxExport.configs[:2]
    mutations = {"forward and reverse swapped in layer 0": TorchOnnxExport.mutations[
        "forward and reverse swapped in layer 0"]}
    distributions = ("torch", "onnxscript", "onnxruntime")
    requires = ("torch", "onnx", "onnxscript", "onnxruntime")


class TorchOnnxLegacy(TorchOnnxExport):
    name = "torch-onnx-legacy"
    dynamo = False
    # Packed input, exported as sequence_lens: PyTorch's own padded configurations.
    padded_configs = TorchLayer.padded_configs
    distributions = ("torch", "onnxruntime")
    requires = ("torch", "onnx", "onnxruntime")


# --- one-layer nn.LSTM and nn.GRU, cells ----------------------------------------------


class TorchExportedGated(Exported):
    """``torch.onnx.export`` of a one-layer ``nn.LSTM`` / ``nn.GRU``, run in ONNX Runtime, as a cell:
    {"h": (T, batch, H)}, and for an LSTM the final c, {"c_last": (batch, H)}. In a configuration
    that names ``batch_first`` (its padded ones: one layer, one or two directions) a layer:
    ``TorchLayer``'s outputs and shapes.

    Weights as ``nn.LSTM`` keeps them, the layer mapping's with the ``_l0`` suffix. PyTorch's GRU
    is reset-after, so an exported GRU operator must carry linear_before_reset=1 (some exporter
    versions emitted 0: pytorch/pytorch#189225, microsoft/onnxscript#2852); ``gru_operators``
    reports what the export contains, and the tests assert it.
    """

    layer = False
    configs = (CELL,)
    mutation_config = CELL
    layout_config = CELL
    mutations = {"bias_hh_l0 dropped": scaled("bias_hh_l0", 0.0)}
    chunked_configs = (CELL,)  # the cell's state carried: h_T and c_last

    def describe(self) -> str:
        return f"torch.onnx.export(torch.nn.{self.family.upper()}, dynamo={self.dynamo}) in ONNX Runtime"

    @staticmethod
    def layerwise(config: LayerConfig) -> bool:
        return config.option("batch_first") is not None

    def arrange(self, result: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        if self.layerwise(config):
            return super().arrange(result, config)
        return states_with_last_c(result, self.family)

    def returned_state(self, outputs: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        if self.layerwise(config):
            return super().returned_state(outputs, config)
        return {"h": outputs["h"][-1:], **({"c": outputs["c_last"][None]} if self.family == "lstm" else {})}

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        if self.layerwise(config):  # a layer configuration: TorchLayer's outputs
            results = self.run_exported(native, xs, state, config, g, padding)
            return dict(zip(["output", "h_n", "c_n"], results))
        dtype, H = self.check_call(native, xs, state, config, g)
        # The module is always given its initial states: zeros where not given.
        state = {key: value[None] for key, value in self.cell_state(state, xs.shape[1], H, dtype).items()}
        results = self.run_exported(native, xs, state, config, g, padding)
        out = {"h": results[0]}
        if self.family == "lstm":
            out["c_last"] = results[2][0]
        return out


# The legacy exporter's packed one-layer LSTM / GRU (the dynamo exporter refuses packing).
GATED_PADDED_CONFIGS = (
    LayerConfig(1, False, options=(("batch_first", False), ("enforce_sorted", False))),
    LayerConfig(1, True, options=(("batch_first", True), ("enforce_sorted", True))),
)


def _exported(name: str, family: str, dynamo: bool) -> type:
    exporter = "dynamo" if dynamo else "legacy"
    if name != f"torch-onnx-{exporter}-{family}":  # a typo in the table cannot register a misnamed system
        raise TypeError(f"exported system {name!r}: its row describes {f'torch-onnx-{exporter}-{family}'!r}")
    qualname = f"TorchExported_{family}_{exporter}"
    return type(qualname, (TorchExportedGated,), {
        "padded_configs": () if dynamo else GATED_PADDED_CONFIGS,
        "name": name, "cell": f"torch.onnx.export(nn.{family.upper()})",
        "family": family, "variant": "reset_after" if family == "gru" else "", "dynamo": dynamo,
        "max_steps": TorchOnnxDynamo.max_steps if dynamo else None,  # see TorchOnnxDynamo
        "requires": ("torch", "onnx", "onnxruntime") + (("onnxscript",) if dynamo else ()),
        "distributions": ("torch", "onnxruntime") + (("onnxscript",) if dynamo else ()),
        "__module__": __name__, "__qualname__": qualname,
    })


# The exported LSTM and GRU systems, one row each, by their literal names (each registers itself).
for _row in (("torch-onnx-dynamo-lstm", "lstm", True),
             ("torch-onnx-legacy-lstm", "lstm", False),
             ("torch-onnx-dynamo-gru", "gru", True),
             ("torch-onnx-legacy-gru", "gru", False)):
    _exported(*_row)
