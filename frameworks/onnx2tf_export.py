"""onnx2tf: the ONNX ``RNN``, ``LSTM`` and ``GRU`` nodes the ONNX systems build
(``rnn_equivalence.frameworks.onnx_rnn``, the same mapping), converted to TFLite by ``onnx2tf.convert`` and
run in LiteRT's interpreter (``ai_edge_litert``, its default delegate).

onnx2tf pins exact versions of numpy, onnx, onnxruntime and ai-edge-litert, and its releases since 2.0
need Python 3.12: it cannot live in the suite's main environment. Its systems run in their own, made by
the nox session ``onnx2tf`` (noxfile.py), and are left out of a run that does not name them: a main run
does not generate them, and its summary and report name them and the session (``elsewhere``). Their own
full-depth report, with their versions, is committed beside the main one: docs/environments/onnx2tf/.

onnx2tf 2.x writes the flatbuffer directly (no TensorFlow), keeping the ONNX inputs' and outputs' names
and shapes; ``last_operators`` holds the op types of the converted model's main graph (``OPERATORS``).
What it refuses and what it computes differently is below, each measured in
tests/equivalence/test_onnx2tf.py. float32 only (TFLite's kernels).
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import replace
from pathlib import Path

from rnn_equivalence.frameworks.base import import_framework
from rnn_equivalence.frameworks.onnx_rnn import OnnxGated, OnnxOperator, OnnxRNN, _gated_mutations
from rnn_equivalence.reference.params import GATED

ENVIRONMENT = "onnx2tf"  # the nox session whose environment holds onnx2tf


class Onnx2TfEvaluation:
    """An evaluation, as ``rnn_equivalence.frameworks.onnx_rnn``'s: the node ``OnnxNodeRunner`` builds, converted by
    onnx2tf and run in LiteRT's interpreter."""

    runtime = "onnx2tf, LiteRT"

    def start(self):
        super().start()
        self.onnx2tf = import_framework("onnx2tf", self.name)
        self.litert = import_framework("ai_edge_litert.interpreter", self.name)
        self.last_operators: set[str] = set()

    def describe(self) -> str:
        return f"onnx2tf.convert({self.cell}) in LiteRT"

    def convert(self, model) -> bytes:
        """The float32 TFLite flatbuffer onnx2tf writes for ``model``."""
        with tempfile.TemporaryDirectory(prefix="rnn-eq-onnx2tf-") as folder:
            path = Path(folder) / "model.onnx"
            self.onnx.save(model, path)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                self.onnx2tf.convert(input_onnx_file_path=str(path), output_folder_path=folder, non_verbose=True)
            return (Path(folder) / "model_float32.tflite").read_bytes()

    def evaluate(self, model, feeds, outputs):
        interpreter = self.litert.Interpreter(model_content=self.convert(model))
        self.last_operators = {op["op_name"] for op in interpreter._get_ops_details()}
        results = interpreter.get_signature_runner()(**feeds)
        return [results[name] for name in outputs]


class Onnx2TfSystem(OnnxOperator):
    """An onnx2tf system: what every one declares (the ONNX systems' mapping, run after onnx2tf's conversion)."""

    distributions = ("onnx2tf", "onnx", "ai-edge-litert")
    requires = ("onnx2tf", "onnx", "ai_edge_litert")
    dtypes = ("float32",)  # TFLite's float kernels
    environment = ENVIRONMENT
    converter = "onnx2tf.convert"  # a converted system: the depth rules of rnn_equivalence.harness.depth


# What onnx2tf 2.6.9 does with what the ONNX systems declare (measured: tests/equivalence/test_onnx2tf.py).
# Refused loudly: its flatbuffer writer's validation ("flatbuffer_direct validation failed") refuses the
# RNN's Affine and HardSigmoid, layout=1, clip and sequence_lens, and the GRU's every activation but the
# default, its clip and sequence_lens; an LSTM with P, input_forget or sequence_lens converts to a custom op (ONNX_LSTM)
# that LiteRT refuses to run.
# Computed differently, silently: an RNN node given initial_h returns initial_h as Y_h (Y is right); an LSTM
# with clip or with other activations becomes TFLite's fused LSTM kernel, which computes another cell.
RNN_INITIAL_STATE = ("onnx2tf 2.6.9 converts an RNN node given initial_h into a model that returns initial_h as "
                     "Y_h (Y is right): measured, tests/equivalence/test_onnx2tf.py")
LSTM_FUSED = ("onnx2tf 2.6.9 converts it to TFLite's fused UNIDIRECTIONAL_SEQUENCE_LSTM kernel, which computes "
              "another cell (measured: tests/equivalence/test_onnx2tf.py)")
LSTM_CUSTOM = "onnx2tf 2.6.9 converts it to a custom op (ONNX_LSTM) that LiteRT refuses to run"
GRU_CLIP = "onnx2tf 2.6.9 refuses a GRU's clip (\"GRU clip is not supported in builtin lowering\")"
# The ops each family becomes (the sequence length is fixed in the converted model): an RNN node TFLite's
# fused RNN kernel; an LSTM or GRU node with its default activations unrolled into elementwise ops and
# matrix products, one set per step.
OPERATORS = {"rnn": "UNIDIRECTIONAL_SEQUENCE_RNN", "lstm": "unrolled", "gru": "unrolled"}


class Onnx2TfRNNEvaluation(Onnx2TfEvaluation):
    """The RNN node's run, which refuses an initial state: what onnx2tf makes of one is wrong (RNN_INITIAL_STATE)."""

    def run_native(self, native, xs, state, config, g, padding=None):
        self.check_call(native, xs, state, config, g)  # a malformed state is named as such first
        if state is not None:
            raise ValueError(f"{self.name}: an initial state refused: {RNN_INITIAL_STATE}")
        return super().run_native(native, xs, state, config, g, padding)


class Onnx2TfRNN(Onnx2TfRNNEvaluation, OnnxRNN, Onnx2TfSystem):
    name = "onnx2tf-rnn"
    activations = ("tanh", "relu")
    options = ("",)
    # Layout 0 (layout=1 refused), without an initial state (RNN_INITIAL_STATE: refused by run_native), so
    # no chunked runs (each call after the first starts from a state); sequence_lens refused: no padded batches.
    configs = tuple(c for c in OnnxRNN.configs if c.option("layout") == 0)
    initial_states = (False,)
    mutation_config = replace(OnnxRNN.mutation_config, initial_state=False)
    padded_configs = chunked_configs = ()


def _onnx2tf_gated(name: str, family: str, variant: str = "") -> type:
    suffix = "-reset-before" if variant == "reset_before" else ""
    if name != f"onnx2tf-{family}{suffix}":  # a typo in the table cannot register a misnamed system
        raise TypeError(f"onnx2tf system {name!r}: its row describes {f'onnx2tf-{family}{suffix}'!r}")
    qualname = f"Onnx2Tf_{family}{suffix}".replace("-", "_")
    refused = ({"gate_clip": LSTM_FUSED, "peepholes": LSTM_CUSTOM, "coupled_gates": LSTM_CUSTOM} if family == "lstm"
               else {"gate_clip": GRU_CLIP})
    return type(qualname, (Onnx2TfEvaluation, OnnxGated, Onnx2TfSystem), {
        "name": name, "cell": f"ONNX {family.upper()}", "family": family, "variant": variant,
        "options": ("",), "refused_options": refused, "activations": (GATED,),
        "padded_configs": (),  # sequence_lens: refused (GRU) or a custom op LiteRT refuses (LSTM), as the RNN's
        "mutations": _gated_mutations(family, honours_activations=False, peepholes=False),
        "__module__": __name__, "__qualname__": qualname})


for _row in (("onnx2tf-lstm", "lstm"), ("onnx2tf-gru", "gru", "reset_after"),
             ("onnx2tf-gru-reset-before", "gru", "reset_before")):
    _onnx2tf_gated(*_row)
