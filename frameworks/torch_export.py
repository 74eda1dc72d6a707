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

from frameworks.base import LayerConfig, Native, import_framework, transposed
from frameworks.pytorch import TorchRNN, _swap_names


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
    # Each dynamo export of 50 steps takes about 6 s here, so: one and two directions.
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
