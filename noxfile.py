"""The version matrix: the suite against pinned framework versions, one virtualenv per entry.

    nox                                  every entry at full depth, then the merged table (docs/MATRIX.md)
    nox -- --depth=default               every entry at the default depth (arguments after -- go to pytest)
    nox -s "tensorflow(tf='2.20')"       one entry
    nox -s matrix                        commit what the entries left in matrix-reports/ to docs/matrix/,
                                         then docs/MATRIX.md from every entry there

Each entry installs its pins, checks that they import, runs the suite on the
systems those pins affect with ``--equivalence-report``, and leaves
``matrix-reports/<entry>/session.json`` beside the report. An entry whose pins
do not install or import records that and fails; the others go on, and
``matrix`` shows it as a row rather than crashing. matrix-reports/ is not
committed: ``matrix`` writes each entry it finds there to
``docs/matrix/<entry>.json`` (replacing that entry's earlier run) and makes
the table of every entry in docs/matrix/, so one entry rerun updates its
column and keeps the others. torch stays at 2.13.0
(the CPU wheel on this machine's disk) except in the torch entries: any other
torch is a CUDA build of several GB, which runs on the CPU.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from rnn_equivalence.frameworks import ADAPTERS  # noqa: E402  (the registry imports no framework)
from docgen import matrix as matrix_plan  # noqa: E402
from docgen.matrix import write_session  # noqa: E402

REPORTS = ROOT / "matrix-reports"
PYTHON = "3.11"
TORCH = "torch==2.13.0"
SUITE = ("tests/reference", "tests/equivalence")

nox.options.sessions = ["tensorflow", "keras", "jax", "onnxruntime", "openvino", "torch", "matrix"]
nox.options.reuse_venv = "yes"


def systems(*prefixes: str) -> str:
    """The systems whose names start with one of ``prefixes``, comma-separated."""
    return ",".join(matrix_plan.starting_with(ADAPTERS, prefixes))


def selection(kind: str) -> str:
    """The systems of the main environment an entry of ``kind`` runs (docgen.matrix.SELECTIONS), comma-separated:
    not those of a session of their own (``Adapter.environment``; torchscript-* and torch-export-* start with
    "torch" too)."""
    return ",".join(matrix_plan.selected(kind, [name for name, cls in ADAPTERS.items() if not cls.environment]))


def _entry(session, label: str, requested: dict, pins: list[str], extras: str, modules: list[str],
           selected: str, env: dict | None = None, torch_pin: str | None = None) -> None:
    out = REPORTS / label
    record = dict(session=label, requested=requested)
    shutil.rmtree(out, ignore_errors=True)  # a report left by an earlier run must not stand in for this one
    try:
        if torch_pin:  # first, so that nothing asks pip for another torch
            session.install(torch_pin)
        session.install("-e", f".[{extras}]", *pins)
    except nox.command.CommandFailed as error:
        write_session(out, status="install failed", message=f"pip install {' '.join(pins)}: {error}", **record)
        session.error(f"{label}: the pins did not install")
    dists = ",".join([p.split("==")[0] for p in pins] + ["numpy", "torch", "keras", "jax", "flax"])
    try:
        session.run("python", "-c", "import " + ", ".join(modules), env=env, silent=True)
    except nox.command.CommandFailed as error:
        write_session(out, status="import failed", message=f"import {', '.join(modules)}: {error}", **record)
        session.error(f"{label}: the pins installed but do not import")
    # Exit 1 (tests failed) is a finding the report records, not a broken entry.
    # The equivalence tests only: the harness's own tests do not depend on framework versions.
    # Arguments after `nox --` come last: `--depth=default` overrides the full depth.
    started = time.monotonic()
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full", f"--systems={selected}",
                f"--equivalence-report={out}", *SUITE, *session.posargs, env={"CI": "true", **(env or {})},
                success_codes=[0, 1])
    seconds = time.monotonic() - started
    # Recorded by the session's own Python: the versions that ran, not nox's.
    session.run("python", "-m", "docgen.matrix", "record", str(out), "--session", label,
                "--requested", json.dumps(requested), "--status", "tests ran", "--installed", dists,
                "--seconds", f"{seconds:.0f}")


@nox.session(python=PYTHON)
@nox.parametrize("tf", ["2.19", "2.20", "2.21"])
def tensorflow(session, tf):
    """TensorFlow with the matching tf_keras: raw ops, the TF1 cells, Keras 2, Keras 3 on TensorFlow."""
    _entry(session, f"tensorflow-{tf}", {"tensorflow": f"{tf}.*", "tf_keras": f"{tf}.*"},
           [f"tensorflow=={tf}.*", f"tf_keras=={tf}.*"], "tensorflow,test", ["tensorflow", "tf_keras", "keras"],
           selection("tensorflow"), env={"KERAS_BACKEND": "tensorflow"})


@nox.session(python=PYTHON)
@nox.parametrize("keras", ["3.13", "3.15"])
def keras(session, keras):
    """Keras 3 minor versions, each on all three backends (TensorFlow, JAX, PyTorch 2.13.0)."""
    _entry(session, f"keras-{keras}", {"keras": f"{keras}.*"}, [f"keras=={keras}.*"], "keras,test",
           ["keras", "tensorflow", "jax", "torch"], selection("keras"), torch_pin=TORCH)


@nox.session(python=PYTHON)
@nox.parametrize("jax", ["0.9.2", "0.10.2"])
def jax(session, jax):
    """JAX versions, under Flax and under Keras 3's JAX backend (run in this process: KERAS_BACKEND=jax)."""
    _entry(session, f"jax-{jax}", {"jax": jax, "jaxlib": jax}, [f"jax=={jax}", f"jaxlib=={jax}", "keras"],
           "flax,equinox,test", ["jax", "flax", "equinox", "keras"], selection("jax"), env={"KERAS_BACKEND": "jax"})


@nox.session(python=PYTHON)
@nox.parametrize("ort", ["1.24.4", "1.32.0"])
def onnxruntime(session, ort):
    """ONNX Runtime versions: the ONNX nodes the suite builds and the models torch's exporters write."""
    _entry(session, f"onnxruntime-{ort}", {"onnxruntime": ort}, [f"onnxruntime=={ort}"], "onnx,test",
           ["onnxruntime", "onnx", "torch"], selection("onnxruntime"), torch_pin=TORCH)


@nox.session(python=PYTHON)
@nox.parametrize("ov", ["2025.4.1", "2026.4.1"])
def openvino(session, ov):
    """OpenVINO versions, CPU: the ONNX nodes the suite builds."""
    _entry(session, f"openvino-{ov}", {"openvino": ov}, [f"openvino=={ov}"], "openvino,test", ["openvino", "onnx"],
           selection("openvino"))


@nox.session(python=PYTHON)
@nox.parametrize("version", ["2.13.0", "2.14.1"])
def torch(session, version):
    """torch versions: the CPU wheel on this machine's disk (2.13.0), and a CUDA build run on the CPU (2.14.1,
    ~5.5 GB with its NVIDIA libraries); its modules and the ONNX its exporters write."""
    _entry(session, f"torch-{version}", {"torch": version}, [], "onnx,test", ["torch", "onnx", "onnxruntime"],
           selection("torch"), torch_pin=TORCH if version == "2.13.0" else f"torch=={version}")


@nox.session(python=False)
def matrix(session):
    """Write each entry left in matrix-reports/ to docs/matrix/<entry>.json, replacing its earlier run, then
    docs/MATRIX.md from every entry there, after the committed report's column (the versions of the project's
    own environment, at full depth)."""
    docs = ROOT / "docs"
    session.run(sys.executable, "-m", "docgen.matrix", "merge", str(REPORTS), "--entries", str(docs / "matrix"),
                "--output", str(docs / "MATRIX.md"), "--committed", str(docs / "equivalence.json"))


# --- tools that cannot live in the main environment (Adapter.environment) -------------------------------
ENVIRONMENTS = ROOT / "docs" / "environments"
# onnx2tf pins exact numpy, onnx, onnxruntime and ai-edge-litert versions and needs Python 3.12 (its 2.x
# releases): its systems (frameworks/onnx2tf_export.py) run here, their report in docs/environments/onnx2tf.
ONNX2TF = "onnx2tf==2.6.9"
TEST_TOOLS = ("pytest-xdist>=3.8", "hypothesis>=6.100", "allpairspy>=2.5", "jsonschema>=4.18")


@nox.session(python="3.12", default=False)
def onnx2tf(session):
    """The onnx2tf systems, at full depth, in onnx2tf's own environment: the report the committed one links."""
    session.install(ONNX2TF)  # its pins first; the suite itself needs nothing they do not satisfy
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS)
    session.run("python", "-c", "import onnx2tf, ai_edge_litert, onnx", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('onnx2tf')}",
                f"--equivalence-report={(ENVIRONMENTS / 'onnx2tf').relative_to(ROOT)}", *SUITE,
                env={"CI": "true", "KERAS_BACKEND": "tensorflow"})


# nobuco (PyTorch to Keras) imports Keras 2 as ``keras`` (``keras.src.engine``): TensorFlow 2.15, NumPy < 2. Its
# torchvision import needs a torchvision wheel this machine holds on disk, 0.29.1, which pins torch 2.14.1 (a
# CUDA build of 5.5 GB that runs on the CPU). Its systems (frameworks/nobuco_export.py) run here, their report in
# docs/environments/nobuco.
NOBUCO = ("nobuco==0.17.0", "tensorflow==2.15.1", "torch==2.14.1", "torchvision==0.29.1", "numpy<2")


@nox.session(python="3.11", default=False)
def nobuco(session):
    """The nobuco systems, at full depth, in nobuco's own environment: the report the committed one links."""
    session.install(*NOBUCO)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1")
    session.run("python", "-c", "import nobuco, tensorflow, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('nobuco')}", f"--equivalence-report={(ENVIRONMENTS / 'nobuco').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# onnx2torch (ONNX to PyTorch) imports torchvision. PyPI's torchvision wheels are CUDA builds whose compiled ops
# need a torch with CUDA (0.28.0 beside the CPU torch 2.13.0 fails: "operator torchvision::nms does not exist"), so
# the environment is nobuco's pair from this machine's disk, torch 2.14.1 (CUDA, run on the CPU) and torchvision
# 0.29.1. It stays out of the main environment: there torchvision could change the main run (torch.onnx and
# onnxscript pick it up when present), and the default run's cost stays as it was. onnx2torch 1.5.15 refuses the
# ONNX RNN, LSTM and GRU nodes (frameworks/onnx2torch_export.py): no systems, so no report; the session runs the
# tests that pin the refusal (tests/equivalence/test_onnx2torch.py) on the ONNX systems that build the nodes.
# RNN_EQ_ENVIRONMENT names the session, where a missing onnx2torch is an error (elsewhere those tests are
# deselected).
ONNX2TORCH = ("onnx2torch==1.5.15", "torch==2.14.1", "torchvision==0.29.1", "onnx>=1.16", "onnxruntime>=1.18")


@nox.session(python="3.11", default=False)
def onnx2torch(session):
    """onnx2torch's tests, in its own environment: its refusal of the recurrent nodes (no systems)."""
    from rnn_equivalence.frameworks.onnx2torch_export import ENVIRONMENT, NODES

    session.install(*ONNX2TORCH)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")  # the suite's own, but numpy
    session.run("python", "-c", "import onnx, onnxruntime, torchvision, onnx2torch", silent=True)
    session.run("pytest", "-p", "no:cacheprovider", f"--systems={','.join(NODES)}",
                "tests/equivalence/test_onnx2torch.py", *session.posargs,
                env={"CI": "true", "RNN_EQ_ENVIRONMENT": ENVIRONMENT})


# coremltools converts on Linux, but its predictions need macOS: its systems (frameworks/coreml_export.py) are
# checked at the level of the specification (the MIL program's recurrent ops read back and evaluated with their
# documented equations), here, their report in docs/environments/coreml. torch first: the CPU wheel on this
# machine's disk (coremltools 9.0 adds only cattrs and pyaml beside it).
COREML = "coremltools==9.0"


@nox.session(python="3.11", default=False)
def coreml(session):
    """The Core ML systems, at full depth, in coremltools' own environment: the report the committed one links."""
    session.install(TORCH)
    session.install(COREML)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")  # the suite's own, --no-deps
    session.run("python", "-c", "import coremltools, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('coreml')}", f"--equivalence-report={(ENVIRONMENTS / 'coreml').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# PaddlePaddle 3.3.1 (CPU wheel, ~195 MB) would install beside the main environment's pins (`pip install
# --dry-run paddlepaddle==3.3.*` there adds only httpx, anyio, h11, httpcore and opt-einsum, and changes no pin)
# but it is kept out of it: it costs the default run its download and import, and no other system needs it. Its
# systems (frameworks/paddle_cells.py) run here, their report in docs/environments/paddle. No torch: the checks
# compare Paddle with the NumPy reference, and the state_dict's cell_fw/cell_bw copies with Paddle itself.
PADDLE = ("paddlepaddle==3.3.1", "numpy>=1.26", "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")


@nox.session(python="3.11", default=False)
def paddle(session):
    """The PaddlePaddle systems, at full depth, in Paddle's own environment: the report the committed one links."""
    session.install(*PADDLE)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS)
    session.run("python", "-c", "import paddle", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('paddle')}", f"--equivalence-report={(ENVIRONMENTS / 'paddle').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# MNN (Alibaba's inference engine): its converter (MNNConvert, the `mnnconvert` command of the PyPI package MNN)
# from ONNX, and its Python runtime. Its systems (frameworks/mnn_export.py) run here, their report in
# docs/environments/mnn. The ONNX the converter reads is the suite's own nodes (frameworks/onnx_rnn.py) and
# torch.onnx.export's (the threads' users export PyTorch): torch is the CPU wheel on this machine's disk, onnx and
# onnxruntime as the main environment pins them (the threads compare MNN with ONNX Runtime).
MNN = ("MNN==3.6.1", "onnx==1.23.2", "onnxruntime==1.32.0", "onnxscript>=0.2", "numpy>=1.26", "click>=8.1",
       "platformdirs>=3", "ml_dtypes>=0.3")


@nox.session(python="3.11", default=False)
def mnn(session):
    """The MNN systems, at full depth, in MNN's own environment: the report the committed one links."""
    session.install(TORCH)
    session.install(*MNN)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS)
    session.run("python", "-c", "import MNN, onnx, onnxruntime, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('mnn')}", f"--equivalence-report={(ENVIRONMENTS / 'mnn').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# PyTorch's layers as TorchScript (traced, scripted) and torch.export programs, saved and loaded
# (frameworks/torch_programs.py): PyTorch alone, no pin in conflict, but kept out of the main environment's run for
# the default run's budget (about 125 s of test time at default depth); their report in
# docs/environments/torch-programs.
@nox.session(name="torch-programs", python="3.11", default=False)
def torch_programs(session):
    """The TorchScript and torch.export systems, at full depth: the report the committed one links."""
    session.install(TORCH)
    session.install("--no-deps", "-e", ".")
    # onnx and onnxscript: torch's dynamo exporter, which the source layers' int8 test asks to export a quantized
    # LSTM (pytorch#35536: it refuses), as the main environment pins them
    session.install(*TEST_TOOLS, "numpy>=1.26", "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3", "onnx==1.23.2",
                    "onnxscript>=0.2")
    session.run("python", "-c", "import torch, onnxscript", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                # with the layers they are made from: each program is compared with its source module too
                # (``compare_with``: the pair tests), which a run without them would skip
                f"--systems={systems('torchscript-', 'torch-export-')},torch-rnn,torch-lstm-rnn,torch-gru-rnn",
                f"--equivalence-report={(ENVIRONMENTS / 'torch-programs').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# MLX's CPU build (frameworks/mlx_layers.py): its systems, their report in docs/environments/mlx.
MLX = ("mlx[cpu]==0.32.4", "numpy>=1.26", "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3", "safetensors>=0.4")


@nox.session(python="3.11", default=False)
def mlx(session):
    """The MLX systems, at full depth, in MLX's own environment: the report the committed one links."""
    session.install(*MLX)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS)
    session.run("python", "-c", "import mlx.core", silent=True)
    # with MLX's weight files (tests/cli/test_mlx_files.py: inspect, convert and verify of save_weights files)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full", f"--systems={systems('mlx')}",
                f"--equivalence-report={(ENVIRONMENTS / 'mlx').relative_to(ROOT)}",
                *SUITE, "tests/cli/test_mlx_files.py", *session.posargs,
                env={"CI": "true", "RNN_EQ_ENVIRONMENT": "mlx"})


# ncnn through pnnx (issue 36): PyTorch's nn.LSTM, nn.GRU and nn.RNN traced, converted by pnnx into an ncnn
# .param/.bin, run by ncnn's Python API. pnnx's wheel requires only torch (any: it converts a saved TorchScript
# file with its own executable); torch first, the CPU wheel on this machine's disk, so that pip keeps it. Its
# systems (frameworks/ncnn_export.py) run here, their report in docs/environments/ncnn.
NCNN = ("pnnx==20261020", "ncnn==1.0.20261020")


@nox.session(python="3.11", default=False)
def ncnn(session):
    """The ncnn systems (pnnx's conversions run in ncnn), at full depth, in their own environment: the report the
    committed one links."""
    session.install(TORCH)
    session.install(*NCNN)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")  # the suite's own, --no-deps
    session.run("python", "-c", "import pnnx, ncnn, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('ncnn')}", f"--equivalence-report={(ENVIRONMENTS / 'ncnn').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# litert-torch (formerly ai-edge-torch: PyTorch to a TFLite flatbuffer, run in LiteRT's interpreter) pins its own
# stack: 0.10.0, its newest release, installs with Python 3.11 beside the CPU torch 2.13.0 on this machine's disk
# (`pip install --dry-run litert-torch==0.10.0 torch==2.13.0` resolves with it; it brings ai-edge-litert 2.3.0,
# litert-converter, jax and transformers). Its systems (frameworks/litert_torch_export.py) run here, their report
# in docs/environments/litert-torch.
LITERT_TORCH = "litert-torch==0.10.0"


@nox.session(name="litert-torch", python="3.11", default=False)
def litert_torch(session):
    """The litert-torch systems, at full depth, in litert-torch's own environment: the report the committed one
    links."""
    session.install(TORCH)  # first, so that nothing asks pip for another torch
    session.install(LITERT_TORCH)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")  # the suite's own, --no-deps
    session.run("python", "-c", "import litert_torch, ai_edge_litert, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('litert-torch')}",
                f"--equivalence-report={(ENVIRONMENTS / 'litert-torch').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})


# ExecuTorch (torch.export to an ExecuTorch program, .pte, run by its Python runtime, executorch.runtime): 1.5.1, its
# newest release, installs with Python 3.11 beside the CPU torch 2.13.0 on this machine's disk (it brings
# coremltools, torchao and pandas). Its systems (frameworks/executorch_export.py) run here, their report in
# docs/environments/executorch.
EXECUTORCH = "executorch==1.5.1"


@nox.session(python="3.11", default=False)
def executorch(session):
    """The ExecuTorch systems, at full depth, in ExecuTorch's own environment: the report the committed one
    links."""
    session.install(TORCH)
    session.install(EXECUTORCH)
    session.install("--no-deps", "-e", ".")
    session.install(*TEST_TOOLS, "click>=8.1", "platformdirs>=3", "ml_dtypes>=0.3")
    session.run("python", "-c", "import executorch.runtime, torch", silent=True)
    session.run("pytest", "-n", "auto", "-p", "no:cacheprovider", "--depth=full",
                f"--systems={systems('executorch')}",
                f"--equivalence-report={(ENVIRONMENTS / 'executorch').relative_to(ROOT)}",
                *SUITE, *session.posargs, env={"CI": "true"})
