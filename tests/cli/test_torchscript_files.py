"""TorchScript archives (``torch.jit.save`` of a scripted or traced module), which ``torch.load(weights_only=True)``
refuses and ``torch.jit.load`` would run: read without either, without torch at all, their tensors by module
path exactly the module's ``state_dict()``, their recurrent modules found; the archive's code never read or run.
Hostile and malformed archives (a payload in data.pkl, a storage missing or shorter than it declares, a size
over the limit, a truncated zip) refused by name, never a traceback. Every archive here is written by torch
itself, in tmp_path; a few are then damaged or forged with the same globals torch writes."""

import collections
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Tuple

import numpy as np
import pytest

from rnn_equivalence.frameworks import files
from rnn_equivalence.frameworks.files import FileRefused, find_recurrent, load_weights
from tests.cli.test_inspect import run
from tests.cli.test_paddle_files import Payload, assert_refused_and_nothing_ran

# torch.jit.script, trace and save are deprecated in favour of torch.export, and trace warns of Python branches:
# the archives are the ones users have, written by the functions that are still there.
pytestmark = [pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Converting a tensor to a Python boolean")]  # a TracerWarning

I, H, T, BATCH = 3, 4, 5, 2
ROOT = Path(__file__).resolve().parents[2]

# case: (the recurrent module, its system, family, layers, bidirectional, the input it is traced on)
CASES = {
    "lstm-2-layers-bidirectional": (lambda nn: nn.LSTM(I, H, num_layers=2, bidirectional=True), "torch-lstm-rnn",
                                    "lstm", 2, True, (T, BATCH, I)),
    "gru": (lambda nn: nn.GRU(I, H), "torch-gru-rnn", "gru", 1, False, (T, BATCH, I)),
    "rnn": (lambda nn: nn.RNN(I, H), "torch-rnn", "rnn", 1, False, (T, BATCH, I)),
    "lstm-cell": (lambda nn: nn.LSTMCell(I, H), "torch-lstm", "lstm", 1, False, (BATCH, I)),
}


def holder(torch, rnn, outputs: int):
    """A model as users have one: the recurrent module under "rnn", a dense head on its first output."""

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn
            self.head = torch.nn.Linear(outputs, 2)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    return Holder().eval()


def archive(tmp_path, case: str, how: str, seed: int = 0):
    """(path, state_dict as NumPy) of the case's holder saved by torch.jit.save after torch.jit.script or trace."""
    import torch

    torch.manual_seed(seed)
    make, _, _, _, bidirectional, shape = CASES[case]
    model = holder(torch, make(torch.nn), H * (2 if bidirectional else 1))
    scripted = torch.jit.script(model) if how == "script" else torch.jit.trace(model, torch.randn(*shape))
    path = tmp_path / f"{case}-{how}.pt"
    torch.jit.save(scripted, str(path))
    return path, {k: v.detach().numpy() for k, v in model.state_dict().items()}


@pytest.fixture
def no_torch_loaders(monkeypatch):
    """torch.jit.load (which runs the archive's code) and torch.load made to fail: neither may be called."""
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("torch.jit.load or torch.load called on a TorchScript archive")

    monkeypatch.setattr(torch.jit, "load", refuse)
    monkeypatch.setattr(torch, "load", refuse)


@pytest.mark.parametrize("how", ["script", "trace"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_tensor_is_the_modules_state_dict_and_the_module_is_found(tmp_path, case, how, load_system,
                                                                         no_torch_loaders):
    load_system("torch")
    _, system, family, layers, bidirectional, _ = CASES[case]
    path, state = archive(tmp_path, case, how)
    with zipfile.ZipFile(path) as z:  # what makes it TorchScript, not a torch.save state_dict
        assert any("/code/" in n for n in z.namelist()) and any(n.endswith("/constants.pkl") for n in z.namelist())
    weights = load_weights(path)
    assert sorted(weights) == sorted(state)
    for name, value in state.items():
        np.testing.assert_array_equal(weights[name], value, err_msg=name, strict=True)
    inspection = find_recurrent(weights)
    assert [(m.location, m.system, m.family) for m in inspection.modules] == [("rnn", system, family)]
    (module,) = inspection.modules
    assert (module.input_size, module.hidden_size, module.config.num_layers, module.config.bidirectional) == \
        (I, H, layers, bidirectional)
    assert sorted(inspection.skipped) == ["head.bias", "head.weight"]


def test_dtypes_offsets_and_strides_are_the_storages_own(tmp_path, load_system, no_torch_loaders):
    """Buffers that are views (a transpose: strides (1, 4); a slice: offset 5) of one storage, and float64,
    float16, int64 and bool tensors: each read as torch holds it, bit for bit."""
    load_system("torch")
    import torch

    class Views(torch.nn.Module):
        def __init__(self):
            super().__init__()
            base = torch.randn(3, 4)
            self.register_buffer("transposed", base.t())
            self.register_buffer("sliced", base[1:, 1:])
            self.register_buffer("doubles", torch.randn(2, 3, dtype=torch.float64))
            self.register_buffer("halves", torch.randn(5, dtype=torch.float16))
            self.register_buffer("counts", torch.tensor([1, -2, 3]))
            self.register_buffer("flags", torch.tensor([True, False]))
            self.gru = torch.nn.GRU(I, H).double()

        def forward(self, x):
            return x

    model = Views()
    path = tmp_path / "views.pt"
    torch.jit.save(torch.jit.script(model), str(path))
    weights = load_weights(path)
    state = model.state_dict()
    assert state["transposed"].stride() == (1, 4) and state["sliced"].storage_offset() == 5
    assert sorted(weights) == sorted(state)
    for name, value in state.items():
        np.testing.assert_array_equal(weights[name], value.numpy(), err_msg=name, strict=True)
    (module,) = find_recurrent(weights).modules
    assert (module.location, module.system, module.params.layers[0][0].W_x.dtype) == \
        ("gru", "torch-gru-rnn", np.float64)


def test_torch_is_not_imported_to_read_an_archive(tmp_path, load_system):
    """In a Python where ``import torch`` fails, the archive reads, the same tensors."""
    load_system("torch")
    path, state = archive(tmp_path, "lstm-2-layers-bidirectional", "script")
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np\n"
            "from rnn_equivalence.frameworks.files import load_weights\n"
            f"weights = load_weights({str(path)!r})\n"
            "assert 'torch' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
            f"np.savez({str(tmp_path / 'read.npz')!r}, **weights)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "read.npz") as read:
        assert sorted(read.files) == sorted(state)
        for name, value in state.items():
            np.testing.assert_array_equal(read[name], value, strict=True)


def test_the_archives_code_is_never_read(tmp_path, load_system, no_torch_loaders):
    """Its code/ replaced by Python that would create a file: torch.jit.load fails on it (it compiles the
    code), load_weights reads the same tensors, and the file is not created."""
    load_system("torch")
    import torch

    path, state = archive(tmp_path, "gru", "script")
    marker = tmp_path / "code-ran"
    damaged = rewritten(path, tmp_path / "damaged.pt", lambda name, data: (
        f"import os\nos.system('touch {marker}')\n".encode() if "/code/" in name and name.endswith(".py") else data))
    weights = load_weights(damaged)
    for name, value in state.items():
        np.testing.assert_array_equal(weights[name], value, strict=True)
    assert not marker.exists()
    with pytest.raises(RuntimeError):  # torch's own loader (the fixture stands in for torch.jit.load) compiles it
        torch.jit._serialization.load(str(damaged))
    assert not marker.exists()


def test_a_module_that_runs_code_on_load_is_refused_not_run(tmp_path, load_system, capfd):
    """A scripted submodule with its own __getstate__/__setstate__: torch.jit.load runs its __setstate__ (it
    prints); load_weights refuses its state, naming it, and nothing prints."""
    load_system("torch")
    import torch

    class Stateful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.extra = torch.randn(3)

        @torch.jit.export
        def __getstate__(self):
            return (self.extra, self.training)

        @torch.jit.export
        def __setstate__(self, state: Tuple[torch.Tensor, bool]):
            print("__setstate__ ran")
            self.extra = state[0]
            self.training = state[1]

        def forward(self, x):
            return x + self.extra

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(I, H)
            self.aux = Stateful()

        def forward(self, x):
            return self.aux(self.rnn(x)[0])

    path = tmp_path / "stateful.pt"
    torch.jit.save(torch.jit.script(Outer()), str(path))
    capfd.readouterr()
    torch.jit.load(str(path))
    assert "__setstate__ ran" in capfd.readouterr().out  # the archive's code runs on torch.jit.load
    with pytest.raises(FileRefused, match=r"aux \(__torch__\..*Stateful\) keeps its tensors in a state of its own"):
        load_weights(path)
    assert "__setstate__ ran" not in capfd.readouterr().out


def rewritten(source: Path, target: Path, change) -> Path:
    """``source``'s zip written again, each entry's bytes through ``change(name, data)`` (None: left out)."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            data = change(info.filename, old.read(info))
            if data is not None:
                new.writestr(info.filename, data)
    return target


def hostile_archive(path: Path, data_pkl: bytes, storages: dict | None = None) -> Path:
    """A zip laid out as torch.jit.save lays one out, its data.pkl ``data_pkl``."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/code/__torch__.py", "class M(Module):\n  pass\n")
        z.writestr("archive/constants.pkl", pickle.dumps((), protocol=2))
        z.writestr("archive/version", "3\n")
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)
    return path


def test_a_payload_in_data_pkl_is_refused_by_name_and_nothing_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    payloads = {"posix.system" if os.name == "posix" else "nt.system": Payload(os.system, f"touch '{marker}'"),
                "builtins.eval": Payload(eval, f"open({str(marker)!r}, 'w')"),
                "torch._utils._rebuild_qtensor": None}
    for refused, payload in payloads.items():
        data = pickle.dumps(payload, protocol=3) if payload is not None else \
            b"\x80\x02ctorch._utils\n_rebuild_qtensor\n)R."  # a global torch has, not admitted here
        path = hostile_archive(tmp_path / "hostile.pt", data)
        assert_refused_and_nothing_ran(path, refused, marker)


class Storage:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class ForgedTensor:
    """Pickles as torch pickles a tensor: torch._utils._rebuild_tensor_v2 of a persistent storage."""

    def __init__(self, storage, size, stride, offset=0):
        self.storage, self.size, self.stride, self.offset = storage, size, stride, offset

    def __reduce__(self):
        import torch

        return (torch._utils._rebuild_tensor_v2,
                (self.storage, self.offset, self.size, self.stride, False, collections.OrderedDict()))


def forged(tensors: dict) -> bytes:
    import io

    import torch

    class ArchivePickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
            return None

    buffer = io.BytesIO()
    ArchivePickler(buffer, protocol=2).dump(tensors)
    return buffer.getvalue()


def test_storages_missing_short_or_over_the_limit_are_refused(tmp_path, load_system, monkeypatch):
    load_system("torch")
    path, _ = archive(tmp_path, "gru", "script")
    with zipfile.ZipFile(path) as z:
        prefix = z.namelist()[0].split("/")[0]
        size = z.getinfo(f"{prefix}/data/1").file_size
    cases = {
        rewritten(path, tmp_path / "missing.pt", lambda n, d: None if n == f"{prefix}/data/1" else d):
            f"storage {prefix}/data/1 is missing",
        rewritten(path, tmp_path / "short.pt", lambda n, d: d[:size // 2] if n == f"{prefix}/data/1" else d):
            f"{prefix}/data/1 holds {size // 2} bytes: expected at least {size}",
        rewritten(path, tmp_path / "cut-pickle.pt", lambda n, d: d[:len(d) // 2] if n.endswith("data.pkl") else d):
            "not a readable TorchScript data.pkl",
        hostile_archive(tmp_path / "huge.pt", forged({"w": ForgedTensor(Storage("0", 2**40), (2**20, 2**20),
                                                                         (2**20, 1))}), {"0": b"\x00" * 64}):
            r"storage 0: declares shape (1099511627776,)",
        hostile_archive(tmp_path / "beyond.pt", forged({"w": ForgedTensor(Storage("0", 6), (2, 3), (3, 1), 2)}),
                        {"0": b"\x00" * 24}):
            "reaches element 7 of storage 0, which declares 6",
    }
    failures = []
    for broken, message in cases.items():
        result = run("inspect", broken)
        if result.exit_code != 2 or message not in result.output or "Traceback" in result.output:
            failures.append(f"{broken.name}: exit {result.exit_code}, expected 2 and {message!r}: {result.output}")
    monkeypatch.setattr(files, "MAX_ELEMENTS", 11)  # the real archive's storages (12 elements and more) over it
    with pytest.raises(FileRefused, match=r"storage 0: declares shape \(\d+,\), .* expected at most 11"):
        load_weights(path)
    assert not failures, "\n".join(failures)


def test_truncated_archives_are_refused(tmp_path, load_system):
    load_system("torch")
    path, _ = archive(tmp_path, "lstm-cell", "trace")
    data = path.read_bytes()
    failures = []
    for cut in (1, 30, len(data) // 3, len(data) // 2, len(data) - 1):
        broken = tmp_path / f"cut-{cut}.pt"
        broken.write_bytes(data[:cut])
        result = run("inspect", broken)
        if result.exit_code != 2 or broken.name not in result.output or "Traceback" in result.output:
            failures.append(f"cut at {cut}: exit {result.exit_code}: {result.output}")
    assert not failures, "\n".join(failures)


def test_a_state_dict_still_goes_to_torch_load_and_an_archive_verifies_against_it(tmp_path, load_system,
                                                                                  monkeypatch):
    load_system("torch-lstm-rnn")
    import torch

    path, state = archive(tmp_path, "lstm-2-layers-bidirectional", "trace")
    saved = tmp_path / "state_dict.pt"
    torch.save({k: torch.from_numpy(v) for k, v in state.items()}, saved)
    calls = []
    real_load = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(k) or real_load(*a, **k))
    assert sorted(load_weights(saved)) == sorted(state)
    assert calls == [{"map_location": "cpu", "weights_only": True}]
    result = run("inspect", path)
    assert result.exit_code == 0 and "rnn: torch-lstm-rnn (lstm)" in result.output, result.output
    result = run("verify", "--no-run", path, saved)
    assert result.exit_code == 0 and "EQUIVALENT" in result.output, result.output
    assert len(calls) == 2  # verify read the state_dict with torch.load, the archive without it
