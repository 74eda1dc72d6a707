"""``torch.onnx.export`` of a ``torch.nn.RNN``, run in ONNX Runtime.

The weights are PyTorch's (the mapping is ``frameworks.pytorch``'s, unchanged);
what is checked is that the exported model computes what PyTorch and the
reference compute. The dynamo exporter (needs ``onnxscript``) unrolls the
recurrence into MatMul and Add nodes; the legacy TorchScript exporter emits
the ONNX ``RNN`` operator. Both are checked where the installed torch offers them.
"""

from __future__ import annotations

import hashlib
import io
import warnings

import numpy as np

from frameworks.base import GatedAdapter, LayerConfig, Native, NativeSpec, import_framework, scaled, transposed
from frameworks.pytorch import TorchRNN, _swap_names, load_parameters


class TorchOnnxExport(TorchRNN):
    cell = "torch.onnx.export(torch.nn.RNN) in ONNX Runtime"
    dtypes = ("float32",)  # ONNX Runtime's CPU RNN kernel and the usual export are float32
    dynamo: bool
    configs = (
        LayerConfig(1, False, options=(("batch_first", False),)),
        LayerConfig(1, True, options=(("batch_first", True),)),
        LayerConfig(2, True, options=(("batch_first", False),)),
    )
    mutation_config = LayerConfig(1, True, options=(("batch_first", False),))
    mutations = {
        "weight_hh_l0 transposed": transposed("weight_hh_l0"),
        "forward and reverse swapped in layer 0": lambda n: _swap_names(n, "_l0", "_l0_reverse"),
    }
    compare_with = "torch-rnn"  # the exported model must also agree with the module it came from

    def __init__(self):
        super().__init__()
        self._results = {}
        self.onnx = import_framework("onnx", self.name)
        self.ort = import_framework("onnxruntime", self.name)
        if self.dynamo:
            import_framework("onnxscript", self.name)

    def describe(self) -> str:
        return f"torch.onnx.export(torch.nn.RNN, dynamo={self.dynamo}) in ONNX Runtime"

    def export(self, native: Native, xs, h0, g: str, config: LayerConfig) -> bytes:
        rnn, args = self.module(native, xs, h0, g, config)
        names = ["x", "h0"][: len(args)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation notices of the exporters themselves
            if self.dynamo:
                program = self.torch.onnx.export(rnn, args, dynamo=True, input_names=names,
                                                 output_names=["output", "h_n"], verbose=False)
                return program.model_proto.SerializeToString()
            buffer = io.BytesIO()
            self.torch.onnx.export(rnn, args, buffer, dynamo=False, input_names=names,
                                   output_names=["output", "h_n"])
            return buffer.getvalue()

    def run_native(self, native: Native, xs, h0, g: str, config: LayerConfig):
        # An export takes seconds (dynamo unrolls all T steps); the same call twice in one
        # process (reference test, then comparison with PyTorch) exports once.
        key = (g, str(config), _digest(xs), _digest(h0), tuple((n, _digest(v)) for n, v in sorted(native.items())))
        if key not in self._results:
            self._results[key] = self._run(native, xs, h0, g, config)
        return self._results[key]

    def _run(self, native: Native, xs, h0, g: str, config: LayerConfig):
        model = self.export(native, xs, h0, g, config)
        session = self.ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        _, args = self.module(native, xs, h0, g, config)
        feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
        output, h_n = session.run(["output", "h_n"], feeds)
        return {"output": np.asarray(output), "h_n": np.asarray(h_n)}


def _digest(array) -> str | None:
    if array is None:
        return None
    array = np.ascontiguousarray(array)
    return hashlib.sha256(array.tobytes() + str((array.shape, array.dtype)).encode()).hexdigest()


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
    distributions = ("torch", "onnxruntime")
    requires = ("torch", "onnx", "onnxruntime")


class TorchExportedGated(GatedAdapter):
    """``torch.onnx.export`` of a one-layer ``nn.LSTM`` / ``nn.GRU``, run in ONNX Runtime.

    Weights as PyTorch's gated cells keep them (``frameworks.pytorch.TorchGatedCell``), with
    ``nn.LSTM``'s ``_l0`` suffix. PyTorch's GRU is reset-after, so an exported GRU operator
    must carry linear_before_reset=1 (some exporter versions emitted 0:
    pytorch/pytorch#189225, microsoft/onnxscript#2852); ``gru_operators`` reports what the
    export contains, and the tests assert it.
    """

    distributions = ("torch", "onnxruntime")
    bias_names = ("bias_ih_l0", "bias_hh_l0")
    dtypes = ("float32",)
    dynamo: bool

    def __init__(self):
        self.torch = import_framework("torch", self.name)
        self.onnx = import_framework("onnx", self.name)
        self.ort = import_framework("onnxruntime", self.name)
        if self.dynamo:
            import_framework("onnxscript", self.name)
        self.last_model = None

    def describe(self) -> str:
        return f"torch.onnx.export(torch.nn.{self.cell_type.upper()}, dynamo={self.dynamo}) in ONNX Runtime"

    def native_spec(self, input_size: int, hidden_size: int) -> NativeSpec:
        G, I, H = (4 if self.cell_type == "lstm" else 3), input_size, hidden_size
        return {"weight_ih_l0": ((G * H, I), f"({G}*hidden_size, input_size)"),
                "weight_hh_l0": ((G * H, H), f"({G}*hidden_size, hidden_size)"),
                "bias_ih_l0": ((G * H,), f"({G}*hidden_size,)"), "bias_hh_l0": ((G * H,), f"({G}*hidden_size,)")}

    def to_native(self, params) -> Native:
        return {"weight_ih_l0": params.W_x, "weight_hh_l0": params.W_h,
                "bias_ih_l0": params.b_x, "bias_hh_l0": params.b_h}

    def from_native(self, native: Native):
        from reference.gated import GatedParams

        return GatedParams(self.cell_type, native["weight_ih_l0"], native["weight_hh_l0"],
                           native["bias_ih_l0"], native["bias_hh_l0"])

    mutations = {"bias_hh_l0 dropped": scaled("bias_hh_l0", 0.0)}

    def gru_operators(self) -> list[int]:
        """linear_before_reset of every GRU node in the last export (0 is the ONNX default)."""
        return [next((a.i for a in node.attribute if a.name == "linear_before_reset"), 0)
                for node in self.last_model.graph.node if node.op_type == "GRU"]

    def run_native(self, native: Native, xs, h0, c0):
        torch = self.torch
        self.check_gated_call(native, xs, h0, c0)
        lstm = self.cell_type == "lstm"
        module = (torch.nn.LSTM if lstm else torch.nn.GRU)(xs.shape[2], h0.shape[1])
        load_parameters(torch, module, native)
        state = (torch.from_numpy(h0)[None], torch.from_numpy(c0)[None]) if lstm else torch.from_numpy(h0)[None]
        args = (torch.from_numpy(xs), state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.dynamo:
                data = torch.onnx.export(module, args, dynamo=True, verbose=False).model_proto.SerializeToString()
            else:
                buffer = io.BytesIO()
                torch.onnx.export(module, args, buffer, dynamo=False)
                data = buffer.getvalue()
        self.last_model = self.onnx.load_from_string(data)
        session = self.ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        flat = [xs, h0[None]] + ([c0[None]] if lstm else [])
        results = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), flat)})
        out = {"h": np.asarray(results[0])}
        if lstm:
            out["c_last"] = np.asarray(results[2])[0]
        return out


def _exported(cell_type: str, dynamo: bool):
    exporter = "dynamo" if dynamo else "legacy"
    return type(f"TorchExported_{cell_type}_{exporter}", (TorchExportedGated,), {
        "name": f"torch-onnx-{exporter}-{cell_type}", "cell": f"torch.onnx.export(nn.{cell_type.upper()})",
        "cell_type": cell_type, "dynamo": dynamo, "__module__": __name__,
        "max_steps": TorchOnnxDynamo.max_steps if dynamo else None,  # see TorchOnnxDynamo
        "requires": ("torch", "onnx", "onnxruntime") + (("onnxscript",) if dynamo else ()),
        "distributions": ("torch", "onnxruntime") + (("onnxscript",) if dynamo else ()),
    })


EXPORTED_GATED = {cls.name: cls for cls in (_exported(c, d) for c in ("lstm", "gru") for d in (True, False))}
