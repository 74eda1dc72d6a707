"""Two recurrent modules, from the same or different files and frameworks: the same function?

    verify_modules(a, b, seed=0) -> Verdict

``a`` and ``b`` are ``rnn_equivalence.frameworks.files.Module`` s, each read by its own system's mapping, so both are
canonical parameters (``rnn_equivalence.reference.params``) whatever the framework. Three checks, in order:

1. **Structure**: family, sizes, layers, directions, projection. Different: not equivalent, said so
   (no run can make them the same function).
2. **Parameters**, tensor by tensor in canonical form: kernels and peepholes equal; biases compared as
   the sum b_x + b_h a framework computes (a port may keep two biases or one), within the rounding of
   one addition in the files' dtype, u (|b_x| + |b_h|) for each side.
3. **Runs**, the function itself: the float64 reference of each module on the same seeded inputs and
   initial state (T steps, a batch), compared with the derived bound
   (``rnn_equivalence.reference.tolerance``) of a run of each in float32 and in float64:
   ``|ref(a) - ref(b)| <= bound_a + bound_b`` element by element, what the suite asks of two systems.
   The verdict is float32's: two files whose float32 runs cannot be told apart from rounding are
   equivalent; float64's ratio is reported beside it.

4. **The frameworks themselves** (``run_frameworks``): each module's system runs its own weights, through
   the suite's runner (``frameworks.load``), on the same inputs in float32 and float64 (those it
   computes), against the float64 reference of what it holds, with the bound of the suite's reference
   test. A framework that is not installed is said so, and its run left out of the verdict; so is a run beyond
   the bound where the suite knows the framework's bug (``harness.known_issues``: MLX's float64 sigmoid, in
   float32 accuracy), said with its err/bound and the bug's report.

A module pair that is not equivalent goes to ``rnn_equivalence.diagnose``, which looks for the mistake that
explains the difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rnn_equivalence.reference.comparison import Comparison, compare_outputs, compare_references
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, pair_bound, reference_and_bound
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.params import random_inputs, random_state

STEPS, BATCH = 7, 2  # a few steps carry a mistake in W_h into every later state; a batch of two
DTYPES = ("float32", "float64")


@dataclass
class Verdict:
    a: str  # "location (system)"
    b: str
    equivalent: bool
    reason: str  # one line
    parameters: list[str] = field(default_factory=list)  # the canonical tensors that differ, with their size
    runs: dict[str, Comparison] = field(default_factory=dict)  # by dtype
    diagnosis: list = field(default_factory=list)  # rnn_equivalence.diagnose.Explanation, where not equivalent
    # Each side's framework run: {"A"/"B": {dtype: Comparison} or {"not run": reason}}
    frameworks: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "equivalent": self.equivalent, "reason": self.reason,
                "parameters_differing": self.parameters,
                "runs": {dtype: c.as_record() for dtype, c in self.runs.items()},
                "diagnosis": [e.as_dict() for e in self.diagnosis],
                "frameworks": {side: {key: value.as_record() if isinstance(value, Comparison) else value
                                      for key, value in runs.items()} for side, runs in self.frameworks.items()}}


def name_of(module) -> str:
    return f"{module.location or '(top level)'} ({module.system})"


def structure(module) -> dict:
    """What no run can reconcile (the GRU variant is not here: it is a function, which the runs compare
    and the diagnosis names)."""
    first = module.params.layers[0][0]
    return {"family": module.family, "input_size": module.input_size, "hidden_size": module.hidden_size,
            "layers": module.params.num_layers, "directions": module.params.num_directions,
            "projection": None if first.W_proj is None else first.W_proj.shape[0]}


def inputs_for(module, seed: int = 0, steps: int = STEPS, batch: int = BATCH):
    """Seeded inputs (T, batch, I) and an initial state (L*D, batch, H or P; c too for an LSTM), exactly
    float32 values, the same for both modules of a pair."""
    stack = module.params
    first = stack.layers[0][0]
    LD, size = stack.num_layers * stack.num_directions, first.W_h.shape[1]
    state = {"h": random_state((LD, batch, size), [seed, 3], np.float64)}
    if module.family == "lstm":
        state["c"] = random_state((LD, batch, module.hidden_size), [seed, 4], np.float64)
    return random_inputs(steps, batch, module.input_size, seed, np.float64), state


def parameter_differences(a, b) -> list[str]:
    """The canonical tensors of ``b`` that differ from ``a``'s beyond storing (biases: their sum, within
    one rounding per side), each with its largest difference."""
    found = []
    for (k, d, p), (_, _, q) in zip(a.params.cells(), b.params.cells()):
        where = f"layer {k} {'forward' if d == 0 else 'backward'}"
        for name in ("W_x", "W_h", "peepholes", "W_proj"):
            x, y = getattr(p, name), getattr(q, name)
            if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
                size = "present in one only" if x is None or y is None else f"max |diff| {np.max(np.abs(x - y)):.3g}"
                found.append(f"{where} {name}: {size}")
        sums = [_bias_sum(c) for c in (p, q)]
        allowed = sum(UNIT_ROUNDOFF[_dtype(c)] * (np.abs(_bias(c.b_x)) + np.abs(_bias(c.b_h))) for c in (p, q))
        excess = np.abs(sums[0] - sums[1]) - allowed
        if np.any(excess > 0):
            found.append(f"{where} b_x + b_h: max |diff| {np.max(np.abs(sums[0] - sums[1])):.3g}")
        if p.family == "gru" and not np.array_equal(_bias_h(p)[-p.W_h.shape[1]:], _bias_h(q)[-q.W_h.shape[1]:]):
            found.append(f"{where} b_hn (inside r * (.)): differs")  # not a sum: where r multiplies it
    return found


def _bias(value):
    return 0.0 if value is None else np.asarray(value, np.float64)


def _bias_h(cell):
    """b_h, zeros where the cell has no bias (a bias-free GRU)."""
    return np.zeros(cell.W_h.shape[0]) + _bias(cell.b_h)


def _bias_sum(cell):
    return np.zeros(cell.W_h.shape[0]) + _bias(cell.b_x) + _bias(cell.b_h)


def _dtype(cell) -> str:
    return "float32" if np.asarray(cell.W_x).dtype == np.float32 else "float64"


def user_inputs(module, xs, lengths=None, mask=None):
    """The user's inputs (T, batch, I), checked against ``module``, and their padding: ``lengths`` of each
    element's real steps (post-padded), or a ``mask`` (``user_mask``), or None. Refused by name where they
    do not fit."""
    from rnn_equivalence.frameworks.files import FileRefused
    from rnn_equivalence.reference.padding import Padding

    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[2] != module.input_size or xs.dtype.kind != "f" or not np.all(np.isfinite(xs)):
        raise FileRefused(f"--inputs: expected finite floats of shape (T, batch, input_size={module.input_size}), "
                          f"got {xs.dtype} of shape {xs.shape}")
    if lengths is not None and mask is not None:
        raise FileRefused("--lengths and --mask: expected one of them (both say which steps are real), got both")
    if mask is not None:
        return xs.astype(np.float64), user_mask(mask, xs.shape[0], xs.shape[1])
    if lengths is None:
        return xs.astype(np.float64), None
    padding = Padding(tuple(lengths))
    try:
        padding.check(xs.shape[0], xs.shape[1], "--lengths")
    except ValueError as error:
        raise FileRefused(str(error)) from None
    return xs.astype(np.float64), padding


def load_mask(path) -> np.ndarray:
    """The array of a mask file: a .npy, or a .npz holding one array (or one named "mask"), read with
    ``allow_pickle=False`` (an object array is refused, never unpickled). Refused by name where it does not read."""
    from pathlib import Path

    from rnn_equivalence.frameworks.files import FileRefused

    expected = "a .npy (or .npz) of booleans or 0/1 of shape (T, batch)"
    if not Path(path).is_file():
        raise FileRefused(f"--mask {path}: no such file: expected {expected}")
    try:
        with open(path, "rb") as f:
            loaded = np.load(f, allow_pickle=False)
            if isinstance(loaded, np.lib.npyio.NpzFile):
                with loaded:
                    names = loaded.files
                    if len(names) != 1 and "mask" not in names:
                        raise FileRefused(f"--mask {path}: expected a .npz holding one array, or one named 'mask', "
                                          f"got {len(names)}: {names}")
                    loaded = loaded["mask" if "mask" in names else names[0]]
    except FileRefused:
        raise
    except ValueError as error:  # numpy's words for an object array, and for a file without its header
        got = ("an object array, which is never unpickled" if "Object arrays" in str(error) else
               "neither a .npy nor a .npz (no NumPy header; a pickle is never unpickled)" if "pickle" in str(error)
               else f"a file that does not read as one (ValueError: {str(error).strip()[:200]})")
        raise FileRefused(f"--mask {path}: expected {expected}, got {got}") from None
    except Exception as error:  # noqa: BLE001 - numpy raises OSError, EOFError, BadZipFile, ...
        reason = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise FileRefused(f"--mask {path}: expected {expected}, got a file that does not read as one "
                          f"({type(error).__name__}: {reason})") from None
    if not isinstance(loaded, np.ndarray):  # np.load of a file it reads as neither .npy nor .npz
        raise FileRefused(f"--mask {path}: expected {expected}, got {type(loaded).__name__}")
    return loaded


def user_mask(mask, steps: int, batch: int):
    """A (T, batch) mask of the user's inputs (True or 1 on a real step, time-major as the inputs): its
    ``rnn_equivalence.reference.padding`` form. Each element's real steps one run at the start (or at the
    end, all alike): the ``Padding`` of their lengths, as ``--lengths`` says it; masked steps anywhere else,
    holes included: a ``Mask``, which the reference runs over each element's real steps only (a masked
    step leaves the state as it was). Refused by name: another shape (a (batch, T) mask, as Keras takes
    it, is named), dtype or values, or an element with no real step."""
    from rnn_equivalence.frameworks.files import FileRefused
    from rnn_equivalence.reference.padding import Mask, Padding

    mask = np.asarray(mask)
    expected = f"booleans or 0/1 of shape (T, batch) = {(steps, batch)} (time-major, as --inputs)"
    if mask.dtype.kind not in "biuf":
        raise FileRefused(f"--mask: expected {expected}, got dtype {mask.dtype}")
    if mask.shape != (steps, batch):
        hint = ": a (batch, T) mask, as Keras takes it? Save its transpose (mask.T)" \
            if mask.shape == (batch, steps) else ""
        raise FileRefused(f"--mask: expected {expected}, got shape {mask.shape}{hint}")
    if mask.dtype.kind != "b":
        wrong = np.unique(mask[(mask != 0) & (mask != 1)])  # NaN too
        if wrong.size:
            raise FileRefused(f"--mask: expected {expected}, got values {', '.join(map(str, wrong[:5].tolist()))}"
                              f"{', ...' if wrong.size > 5 else ''} ({mask.dtype})")
        mask = mask == 1
    empty = [b for b in range(batch) if not mask[:, b].any()]
    if empty:
        raise FileRefused(f"--mask: expected at least one real step per batch element, got none in element(s) "
                          f"{empty}")
    try:
        return Padding.from_mask(mask, "--mask")
    except ValueError:  # holes, or elements padded on different sides
        return Mask.of(mask)


def framework_run(module, xs, state, padding=None) -> dict:
    """``module``'s system run on its own weights in each dtype it computes, against the float64 reference
    of what it holds: {dtype: Comparison}, or {"not run": why} where the framework cannot be loaded."""
    from rnn_equivalence.frameworks import load

    try:
        adapter = load(module.system)
    except ImportError as error:
        return {"not run": f"{module.system}: {error}"}
    shape = (module.config.num_layers, module.config.bidirectional, module.config.bias)
    checked = sorted({(c.num_layers, c.bidirectional, c.bias) for c in adapter.configs})
    # A layer's runner builds any stack; a cell system's runs the structures its test plan declares.
    if not adapter.layer and shape[:2] != (1, False) and shape not in checked:
        return {"not run": f"{module.system}'s runner takes (layers, bidirectional, bias) in {checked}, "
                           f"not {shape}"}
    if padding is not None and not adapter.padded_configs:
        return {"not run": f"{module.system} takes no lengths (a padded batch)"}
    config = module.config
    if padding is not None:  # the system's own way to take lengths, in this structure
        options = adapter.padded_configs[0].options
        config = LayerConfig(config.num_layers, config.bidirectional, config.bias, options=options)
    runs = {}
    for dtype in (d for d in DTYPES if d in adapter.dtypes):
        params = module.params.astype(dtype)
        convention = {"padding": padding, "padded_output": adapter.padded_output(config)} if padding else {}
        exact, bound = reference_and_bound(params, xs, state, dtype, **convention)
        bound = pair_bound(bound, reference_and_bound(params, xs, state, "float64", **convention)[1])
        try:
            actual = adapter.run(params, xs.astype(dtype), {k: v.astype(dtype) for k, v in state.items()}, config,
                                 **({"padding": padding} if padding else {}))
        except ValueError as error:  # the system refuses this run (a structure or option it does not take)
            return {"not run": f"{module.system}: {error}"}
        runs[dtype] = compare_outputs(actual, adapter.arrange(exact, config), adapter.arrange(bound, config),
                                      f"{adapter.describe()} on {name_of(module)}, {dtype}")
        row = _known_issue(module, dtype)
        if row is not None and not runs[dtype].equivalent:  # the framework's bug, the suite's strict xfail: said so
            runs[dtype] = (f"err/bound {runs[dtype].ratio:.3g}, a known issue of {module.system} (not counted): "
                           f"{row.reason}")
    return runs


def _known_issue(module, dtype: str):
    """The known upstream bug (``rnn_equivalence.harness.known_issues``, scope "reference") a run of ``module``'s
    system in ``dtype`` meets with the activations a weight file implies (the framework's defaults), or None:
    MLX's float64 sigmoid is float32-accurate, beyond the float64 bound, in every MLX LSTM and GRU."""
    from rnn_equivalence.harness.known_issues import known_issue, rows_of

    spec = "tanh" if module.family == "rnn" else "default"
    return known_issue(rows_of(module.system, ("reference",)), module.family, spec, dtype)


def verify_modules(a, b, seed: int = 0, diagnose: bool = True, run_frameworks: bool = False,
                   steps: int = STEPS, inputs=None, lengths=None, mask=None, suspected=None) -> Verdict:
    """``inputs``: the user's (T, batch, I) instead of seeded ones; ``lengths``: their padding (post), or
    ``mask``: their (T, batch) mask, holes included (``user_mask``). ``suspected``: the diagnosis's mistakes
    made on ``a`` (``rnn_equivalence.diagnose.suspects``), where ``a`` is compared with many modules."""
    a_name, b_name = name_of(a), name_of(b)
    sa, sb = structure(a), structure(b)
    if sa != sb:
        differ = ", ".join(f"{key} {sa[key]} vs {sb[key]}" for key in sa if sa[key] != sb[key])
        return Verdict(a_name, b_name, False, f"different structures: {differ}")
    padding = None
    if inputs is None:
        xs, state = inputs_for(a, seed, steps)
    else:  # the user's inputs, from a zero state, as a model starts
        xs, padding = user_inputs(a, inputs, lengths, mask)
        state = {key: np.zeros_like(value) for key, value in inputs_for(a, seed, 1, xs.shape[1])[1].items()}
    runs = {dtype: compare_references(a.params, b.params, xs, state, dtype, f"{b_name} vs {a_name}, {dtype}", padding)
            for dtype in DTYPES}
    parameters = parameter_differences(a, b)
    equivalent = runs["float32"].equivalent
    r32, r64 = runs["float32"].ratio, runs["float64"].ratio
    if not equivalent:
        reason = f"float32 runs differ beyond the bound (err/bound {r32:.3g})"
    elif r64 <= 1:
        reason = f"float32 runs within the bound (err/bound {r32:.3g}), float64 runs too ({r64:.3g})"
    else:  # e.g. two biases summed into one in float32: a rounding float32 cannot see and float64 can
        reason = (f"float32 runs within the bound (err/bound {r32:.3g}); float64 runs would be {r64:.3g} bounds "
                  f"apart: the weights differ by float32 roundings (a summed bias)")
    verdict = Verdict(a_name, b_name, equivalent, reason, parameters, runs)
    if run_frameworks:
        verdict.frameworks = {"A": framework_run(a, xs, state, padding), "B": framework_run(b, xs, state, padding)}
        exceeded = [f"{side} in {dtype} (err/bound {c.ratio:.3g})" for side, found in verdict.frameworks.items()
                    for dtype, c in found.items() if isinstance(c, Comparison) and not c.equivalent]
        if exceeded:
            verdict.equivalent = False
            verdict.reason += "; the framework's own run exceeds its bound: " + ", ".join(exceeded)
    if not equivalent and diagnose:
        from rnn_equivalence.diagnose import explain

        verdict.diagnosis = explain(a, b, xs, state, padding, suspected)
    return verdict
