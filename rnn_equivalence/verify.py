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

**A half-format file against its original** (``half_verdict``; issue 37): where one side's tensors are stored in
float16 or bfloat16 (the file's own dtype, which its mapping keeps) and the other's in float32 or float64, the pair
is judged as the half model of its original, the data (seeded or the user's) rounded once to the format as a half
model takes them. Parameters 2 and runs 3 become:

2. each of the half side's tensors is the original's rounded to nearest, at most half the format's spacing off
   (a port that keeps one bias: b_x + b_h rounded as one sum); else each tensor that is not, by how many spacings;
3. the runs, against the original's float64 reference, with the bound of the weights so rounded (the weight grid
   of ``rnn_equivalence.reference.quantized``, S <= u |W|): the float64 reference on the half weights, the whole
   run (the rounding alone); and each step of a half run, computed in float32 within each op (a mixed policy's
   arithmetic) and in the format throughout (``rnn_equivalence.reference.precision.run_rounded``), from the run's
   own state, against the original's step from it (a whole half run's worst case compounds past use; a step's
   does not). Equivalent in the format when the parameters are rounded to nearest and every run is within.

A module pair that is not equivalent goes to ``rnn_equivalence.diagnose``, which looks for the mistake that
explains the difference (a half pair's: made on the original, judged by the bound of its rounding).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rnn_equivalence.reference.comparison import Comparison, compare_outputs, compare_references
from rnn_equivalence.reference.tolerance import UNIT_ROUNDOFF, pair_bound, reference_and_bound
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.formats import HALF_FORMATS, round_to
from rnn_equivalence.reference.params import random_inputs, random_state
from rnn_equivalence.reference.quantized import (
    WEIGHT_TENSORS, format_spacing, off_grid, rounded_reference_and_bound, rounding_half_steps,
)
from rnn_equivalence.reference.stack import DIRECTIONS, StackParams

STEPS, BATCH = 7, 2  # a few steps carry a mistake in W_h into every later state; a batch of two
DTYPES = ("float32", "float64")
FLOAT_ORIGINALS = ("float32", "float64")  # what a half file is compared with as its original


def other_side(side: str) -> str:
    """"A" for "B" and "B" for "A": in a pair judged as one side's lower-precision copy, the original's side."""
    return "A" if side == "B" else "B"


def by_side(a, b, side: str) -> tuple:
    """(the original, the copy) of the pair ``a``, ``b`` where ``side`` ("A" or "B") names the copy (stored in a half
    format, or quantized)."""
    return (a, b) if side == "B" else (b, a)


@dataclass
class HalfCheck:
    """One side stored in a half format (``format``), the other (its original) in float32 or float64: whether the
    half side is the original's weights rounded to nearest in the format, and its runs against the original's
    function with the bound of that rounding (``half_verdict``)."""

    format: str  # "float16" or "bfloat16"
    rounded: str  # "A" or "B": the side stored in the format; the other is the original
    original_dtype: str  # "float32" or "float64"
    differing: list[str]  # the half side's tensors that are not the original's rounded to nearest, by how much
    summed: list[str]  # biases rounded as one sum b_x + b_h (a port that keeps one bias), where so
    runs: dict[str, Comparison]  # by arithmetic (``half_arithmetics``): weights rounded alone, the two ways to run it
    largest: float  # the largest difference of the half side's whole runs (each way) from the original's function

    @property
    def original(self) -> str:
        return other_side(self.rounded)

    @property
    def equivalent(self) -> bool:
        return not self.differing and all(c.equivalent for c in self.runs.values())

    def sentence(self) -> str:
        """The verdict's reason: the parameters, then the runs."""
        R, O, fmt = self.rounded, self.original, self.format
        if self.differing:
            weights = f"{R} is not {O}'s weights rounded to {fmt} ({len(self.differing)} tensor(s) differ)"
        else:
            summed = "; b_x + b_h as one sum" if self.summed else ""
            weights = f"{R} is {O}'s weights rounded to {fmt} (every tensor{summed})"
        names = half_arithmetics(fmt)
        ratios = ", ".join(f"{c.ratio:.3g} ({names[key]})" for key, c in self.runs.items())
        within = "" if all(c.equivalent for c in self.runs.values()) else ", BEYOND the bound"
        return (f"{weights}; its runs differ from {O}'s {self.original_dtype} function by at most {self.largest:.3g}"
                f"{within}, err/bound {ratios}")

    def as_dict(self) -> dict:
        names = half_arithmetics(self.format)
        return {"format": self.format, "rounded": self.rounded, "original": self.original,
                "original_dtype": self.original_dtype, "equivalent": self.equivalent,
                "rounded_to_nearest": not self.differing, "parameters_differing": self.differing,
                "biases_summed": self.summed, "max_error": self.largest,
                "runs": {key: {**c.as_record(), "arithmetic": names[key],
                               "judged": "whole run" if key == "float64" else "step by step"}
                         for key, c in self.runs.items()}}


def half_arithmetics(fmt: str) -> dict[str, str]:
    """The arithmetics a half file's runs are judged in, by the names ``reference.tolerance`` gives them: its weights
    rounded alone (the float64 reference on them, the whole run), and the two ways a half model runs (each step)."""
    return {"float64": "weights rounded", f"mixed_{fmt}": "computed in float32 within each op, each step",
            fmt: f"in {fmt} throughout, each step"}


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
    half: HalfCheck | None = None  # one side stored in a half format, the other in float32 or float64
    quantized: QuantizedCheck | None = None  # one side an int8 model, the other its float original: no equivalence
    # claim, ``equivalent`` then says whether it is within the bound its quantization implies

    def explanations(self) -> list[str]:
        """The diagnosis in words, "B is A with ...": a half pair's mistakes are made on its original."""
        made_on, made = (self.half.original, self.half.rounded) if self.half else ("A", "B")
        return [explanation.sentence(made_on, made) for explanation in self.diagnosis]

    @property
    def headline(self) -> str:
        """EQUIVALENT or NOT EQUIVALENT, "IN FLOAT16" where the pair was judged as a half file of its original."""
        if self.quantized:
            return f"{'WITHIN' if self.equivalent else 'BEYOND'} ITS {self.quantized.dtype.upper()} BOUND"
        word = "EQUIVALENT" if self.equivalent else "NOT EQUIVALENT"
        return f"{word} IN {self.half.format.upper()}" if self.half else word

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "equivalent": None if self.quantized else self.equivalent,
                "reason": self.reason, "parameters_differing": self.parameters,
                "runs": {dtype: c.as_record() for dtype, c in self.runs.items()},
                "half": None if self.half is None else self.half.as_dict(),
                "quantized": None if self.quantized is None else self.quantized.as_dict(self.equivalent),
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


# --- a half-format file against its float original (issue 37, lower precision) ---------------------------------

def stored_dtype(module) -> str:
    """The dtype ``module``'s tensors are stored in, as its file holds them (its mapping keeps the file's dtype)."""
    return np.asarray(module.params.layers[0][0].W_x).dtype.name


def half_pair(a, b) -> tuple[str, str] | None:
    """(format, "A" or "B"): the half format one side is stored in, and that side, where the other is float32 or
    float64; else None (one format on both sides, or two half formats: compared as they are)."""
    da, db = stored_dtype(a), stored_dtype(b)
    if db in HALF_FORMATS and da in FLOAT_ORIGINALS:
        return db, "B"
    if da in HALF_FORMATS and db in FLOAT_ORIGINALS:
        return da, "A"
    return None


def rounding_check(original: StackParams, rounded: StackParams, fmt: str):
    """Whether each tensor of ``rounded`` is ``original``'s rounded to nearest in ``fmt``: (the tensors that are not,
    named with their largest difference in the format's spacings; the cells whose biases were rounded as one sum;
    the grid of the bound: ``original``'s structure holding each tensor's allowance |W~ - W| <= S)."""
    differing, summed, layers = [], [], [[] for _ in original.layers]
    for (k, d, p), (_, _, q) in zip(original.cells(), rounded.cells()):
        where = f"layer {k} {DIRECTIONS[d]}"
        grid, off, as_sum = _cell_rounding(p, q, fmt)
        differing += [f"{where} {text}" for text in off]
        summed += [f"{where} b_x + b_h"] if as_sum else []
        layers[k].append(grid)
    return differing, summed, StackParams(layers)


def _cell_rounding(p, q, fmt: str):
    """One cell's (grid, what differs, whether its biases were rounded as one sum). The grid is each tensor's
    rounding allowance (``rounding_half_steps``), whether or not ``q`` keeps to it: the bound of the runs assumes
    it, and a tensor that does not is named here."""
    source = np.asarray(p.W_x).dtype.name
    grid, off = {}, {}
    for name in WEIGHT_TENSORS:
        x, y = getattr(p, name), getattr(q, name)
        if x is not None:
            grid[name] = rounding_half_steps(x, fmt, source)
        if (x is None) != (y is None):
            off[name] = "present in one only"
        elif x is not None and np.any(np.abs(np.asarray(y, np.float64) - np.asarray(x, np.float64)) > grid[name]):
            off[name] = _spacings_off(x, y, fmt)
    summed = _summed_biases(p, q, fmt) if p.has_bias and q.has_bias and {"b_x", "b_h"} & set(off) else None
    if summed is not None:  # a port that keeps one bias (Keras's LSTM): b_x + b_h, summed, then rounded
        grid.update(summed)
        for name in ("b_x", "b_h"):
            off.pop(name, None)
    return p.astype(np.float64).replace(**grid), [f"{name}: {text}" for name, text in off.items()], summed is not None


def _spacings_off(x, y, fmt: str) -> str:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    units = float(np.max(np.abs(y - x) / format_spacing(x, fmt)))
    return (f"{units:.3g} {fmt} spacings off (rounded to nearest: at most 0.5; max |diff| "
            f"{float(np.max(np.abs(y - x))):.3g})")


def _summed_biases(p, q, fmt: str) -> dict | None:
    """The grid of b_x and b_h where ``q``'s biases are ``p``'s sum rounded (one bias, or the sum moved into one
    slot): each of q's within half a spacing of what it was rounded from, and the sum first rounded in the original's
    format, perhaps through float32 (2 u_32 of the terms); all on b_x's grid, and enough to cover q's terms'
    magnitudes, which the sum's rounding is of. None where the sums differ by more. A GRU's b_hn (reset after:
    inside r * (.)) is never summed: rounded on its own."""
    bx, bh, cx, ch = (np.asarray(v, np.float64) for v in (p.b_x, p.b_h, q.b_x, q.b_h))
    allowed = ((format_spacing(cx, fmt) + format_spacing(ch, fmt)) / 2
               + 2 * UNIT_ROUNDOFF["float32"] * (np.abs(bx) + np.abs(bh)))
    apart = np.abs(cx + ch - bx - bh) > allowed
    grid_x, grid_h = np.maximum(allowed, np.abs(cx) + np.abs(ch) - np.abs(bx) - np.abs(bh)), np.zeros_like(bh)
    if p.family == "gru" and p.variant == "reset_after":
        n, source = slice(2 * p.hidden_size, None), np.asarray(p.W_x).dtype.name
        grid_x[n], grid_h[n] = rounding_half_steps(bx[n], fmt, source), rounding_half_steps(bh[n], fmt, source)
        apart[n] = (np.abs(cx - bx)[n] > grid_x[n]) | (np.abs(ch - bh)[n] > grid_h[n])
    return None if np.any(apart) else {"b_x": grid_x, "b_h": grid_h}


def half_runs(original, rounded, grid, fmt: str, xs, state, padding=None) -> tuple[dict[str, Comparison], float]:
    """The half side's runs against the original's function, each with the bound of the weights rounded within
    ``grid`` (``reference.quantized.rounded_reference_and_bound``), and the largest difference of its whole runs:

    - its float64 reference, the whole run, against the original's: the weights' rounding alone, in float64
      arithmetic (what the parameters imply for the function);
    - its runs as a framework computes a half model (``reference.precision.run_rounded``: float32 within each op,
      results stored in half; every operation in half), each step from the run's own previous state against the
      original's step from that state (``stepwise``): a whole run's worst case compounds (a bfloat16 bound over
      7 steps of two bidirectional layers exceeds the outputs' range, some 300 times the error), a step's does not.

    ``xs`` and ``state`` are in the format, as a half model takes them."""
    from rnn_equivalence.reference.precision import run_rounded

    exact, bound_64 = reference_and_bound(original.params, xs, state, "float64", padding=padding)
    computed = reference_and_bound(rounded.params, xs, state, "float64", padding=padding)[0]
    bound = rounded_reference_and_bound(original.params, grid, xs, state, "float64", padding)[1]
    runs = {"float64": compare_outputs(computed, exact, pair_bound(bound, bound_64),
                                       f"{name_of(rounded)} vs {name_of(original)}, weights rounded")}
    largest = _largest_difference(computed, exact)
    for arithmetic in list(half_arithmetics(fmt))[1:]:
        runs[arithmetic] = stepwise(original.params, rounded.params, grid, xs, state, arithmetic, padding)
        run = run_rounded(rounded.params, xs, state, arithmetic, padding=padding)
        largest = max(largest, _largest_difference(run, exact))
    return runs, largest


def _largest_difference(results: dict, exact: dict) -> float:
    with np.errstate(invalid="ignore"):  # inf - inf where a half run overflows: nan, said as inf
        worst = max(float(np.max(np.abs(results[key] - exact[key]), initial=0.0)) for key in exact)
    return np.inf if np.isnan(worst) else worst


def stepwise(original: StackParams, rounded: StackParams, grid, xs, state, arithmetic: str, padding=None):
    """A run of ``rounded`` computed in ``arithmetic`` (``run_rounded``), each step from its own previous state (and
    the layer below's computed outputs) against ``original``'s step from the same state, within the bound of one
    step of weights within ``grid`` of ``original``'s: the worst step's comparison. The data of each step are the
    run's own, stored in the format, so each step's bound starts from exact numbers and none compounds."""
    from rnn_equivalence.reference.params import state_keys
    from rnn_equivalence.reference.precision import run_rounded
    from rnn_equivalence.reference.stack import drive

    cells = {id(q): (p, g) for (_, _, p), (_, _, q), (_, _, g) in zip(original.cells(), rounded.cells(), grid.cells())}
    steps = []

    def sequence(q, xs, initial) -> dict:  # ``drive``'s: one direction of one layer, in reading order
        p, g = cells[id(q)]
        current = {key: np.zeros((xs.shape[1], q.state_size(key))) if initial is None or key not in initial
                   else initial[key] for key in state_keys(q.family)}
        trace = {key: [] for key in current}
        for t in range(xs.shape[0]):
            x, now = xs[t:t + 1], {key: value[None] for key, value in current.items()}  # a one-layer stack's
            step = run_rounded(q, x, now, arithmetic)
            exact, bound_64 = reference_and_bound(p, x, now, "float64")
            bound = rounded_reference_and_bound(p, g, x, now, arithmetic)[1]
            steps.append(compare_outputs(step, exact, pair_bound(bound, bound_64), f"a step in {arithmetic}"))
            current = {key: step[f"{key}_n"][0] for key in current}
            for key, value in current.items():
                trace[key].append(value)
        return {key: np.stack(values) for key, values in trace.items()}

    drive(rounded, xs, state, sequence, padding)
    return max(steps, key=lambda c: np.inf if np.isnan(c.ratio) else c.ratio)


def half_judges(rounded, fmt: str, xs, state, padding=None):
    """The diagnosis's judges of a half pair (``rnn_equivalence.diagnose.explain``): a stack made from the
    original's parameters (a mistake made on them) by the bound of its weights rounded as the half side's are (in
    float64 arithmetic, the tightest), the half side by its float64 reference."""
    def of_original(stack):
        grid = rounding_check(stack, rounded.params, fmt)[2]
        exact, bound_64 = reference_and_bound(stack, xs, state, "float64", padding=padding)
        return exact, pair_bound(rounded_reference_and_bound(stack, grid, xs, state, "float64", padding)[1], bound_64)

    return of_original, lambda params: reference_and_bound(params, xs, state, "float64", padding=padding)


def in_format(xs, state, fmt: str):
    """The inputs and state rounded once to ``fmt``, as a half model takes them (the seeded ones are float32
    values in [-1, 1]); the user's beyond the format's range refused by name."""
    from rnn_equivalence.frameworks.files import FileRefused

    try:
        return round_to(xs, fmt), {key: round_to(value, fmt) for key, value in state.items()}
    except ValueError as error:
        raise FileRefused(f"--inputs: {error}: a {fmt} model cannot take them") from None


def half_verdict(a, b, half: tuple[str, str], xs, state, padding, runs) -> Verdict:
    """The verdict of a half pair (``half_pair``): the parameters, then the runs (``HalfCheck``)."""
    fmt, side = half
    original, rounded = by_side(a, b, side)
    xs, state = in_format(xs, state, fmt)
    differing, summed, grid = rounding_check(original.params, rounded.params, fmt)
    check = HalfCheck(fmt, side, stored_dtype(original), differing, summed,
                      *half_runs(original, rounded, grid, fmt, xs, state, padding))
    return Verdict(name_of(a), name_of(b), check.equivalent, check.sentence(), differing, runs, half=check)


# --- an int8 quantized file against its float original (issue 37, int8) ------------------------------------------

@dataclass
class QuantizedCheck:
    """One side an int8 model (``frameworks.files.Quantization``: ONNX Runtime's DynamicQuantizeLSTM), the other its
    float original. A quantized model computes another function: no equivalence claim. What is checked is that it
    is the original quantized as its grid implies:

    - each weight the node multiplies by, W~ = (q - zp) * s, within half a grid step s / 2 of the original's
      (``reference.quantized.off_grid``); the biases, kept float, the original's (to a float32 rounding where the
      original is float64);
    - the float64 reference on W~ against the original's function, within the bound of weights on that grid
      (``rounded_reference_and_bound`` in float64: the rounding of the weights alone, what the file implies);
    - with ``--run``, the node in ONNX Runtime against the original's function, within the bound of the grid and
      its activations' quantization (``quantized_reference_and_bound``, ``scheme=ORT_ACTIVATIONS``).

    Within: "the quantizer did what its grid implies". Beyond: a quantizer or kernel bug, with its size."""

    op: str
    dtype: str  # "int8" or "uint8": the stored integers
    quantized: str  # "A" or "B": the side stored quantized; the other is the original
    original_dtype: str
    per_row: bool
    grid: StackParams  # the original's structure, each tensor's allowance: s / 2 for the kernels, the biases' rounding
    off: dict[str, float]  # each kernel's worst |W~ - W| / (s / 2), "layer 0 forward W_x"
    differing: list[str]  # what is not the original's quantized: off its grid, biases changed, a tensor in one only
    runs: dict[str, Comparison]  # "weights on the grid": the float64 reference on W~

    @property
    def original(self) -> str:
        return other_side(self.quantized)

    @property
    def within(self) -> bool:
        return not self.differing and all(c.equivalent for c in self.runs.values())

    def sentence(self) -> str:
        Q, O = self.quantized, self.original
        scales = "scales per row" if self.per_row else "a scale per direction"
        if self.differing:
            weights = f"{Q} is not {O}'s weights on its {self.dtype} grid ({len(self.differing)} tensor(s) off)"
        else:
            weights = (f"{Q} is {O}'s weights quantized to {self.dtype} ({self.op}, {scales}; each weight within "
                       f"{max(self.off.values()):.3g} of half its grid step; the float biases {O}'s)")
        run = self.runs["weights"]
        within = "" if run.equivalent else ", BEYOND the bound"
        return (f"{weights}; the float64 reference on its weights differs from {O}'s function by at most "
                f"{run.max_error:.3g}{within}, err/bound {run.ratio:.3g} (weights on their grid); a quantized model "
                f"computes another function: no equivalence claim")

    def as_dict(self, within: bool) -> dict:
        return {"op": self.op, "weights": self.dtype, "quantized": self.quantized, "original": self.original,
                "original_dtype": self.original_dtype, "scales": "per row" if self.per_row else "per direction",
                "within_bound": within, "on_grid": not self.differing, "parameters_differing": self.differing,
                "worst_step_fraction": self.off,
                "runs": {key: {**c.as_record(), "bound": "weights on their grid (float64 arithmetic)"}
                         for key, c in self.runs.items()}}


def quantized_pair(a, b) -> str | None:
    """"A" or "B": the side stored quantized where the other is a float module (no integers); else None."""
    if (a.quantized is None) == (b.quantized is None):
        return None
    return "B" if b.quantized is not None else "A"


def exact_grid(stack: StackParams) -> StackParams:
    """A grid of ``stack``'s structure allowing nothing: every tensor exact."""
    return stack.map(lambda p: p.astype(np.float64).replace(**{
        name: np.zeros(np.shape(getattr(p, name))) for name in WEIGHT_TENSORS if getattr(p, name) is not None}))


def quantized_grid(original: StackParams, node) -> tuple[StackParams, list[str], dict[str, float]]:
    """(the grid of the bound in ``original``'s structure: the node's s / 2 for W_x and W_h, the float32 rounding of
    a float64 original's biases, 0 elsewhere; what is not ``original``'s quantized, by name; each kernel's worst
    |W~ - W| / (s / 2))."""
    stored = node.quantized.grid
    off = off_grid(original, node.params, stored)
    differing = [f"{where}: {ratio:.3g} half grid steps off (quantized to nearest: at most 1)"
                 for where, ratio in off.items() if not ratio <= 1]
    layers = [[] for _ in original.layers]
    for (k, d, p), (_, _, q), (_, _, g) in zip(original.cells(), node.params.cells(), stored.cells()):
        where = f"layer {k} {DIRECTIONS[d]}"
        source = np.asarray(p.W_x).dtype.name
        allowance = {"W_x": g.W_x, "W_h": g.W_h}
        for name in WEIGHT_TENSORS[2:]:
            x, y = getattr(p, name), getattr(q, name)
            if (x is None) != (y is None):
                differing.append(f"{where} {name}: present in one only")
                if x is not None:  # the original's tensor, which the node lacks: no allowance for it
                    allowance[name] = np.zeros(np.shape(x))
            elif x is not None:
                x64 = np.asarray(x, np.float64)
                allowance[name] = UNIT_ROUNDOFF["float32"] * np.abs(x64) if source == "float64" else np.zeros_like(x64)
                apart = np.abs(np.asarray(y, np.float64) - x64)
                if np.any(apart > allowance[name]):
                    differing.append(f"{where} {name}: max |diff| {float(np.max(apart)):.3g} (kept float: expected "
                                     f"the original's)")
        layers[k].append(p.astype(np.float64).replace(**allowance))
    return StackParams(layers), differing, off


def quantized_verdict(a, b, side: str, xs, state, padding, runs) -> Verdict:
    """The verdict of an int8 pair (``quantized_pair``): the weights on their grid, then the float64 reference on them
    within that grid's bound (``QuantizedCheck``); the node itself is run by ``quantized_node_run`` (``--run``)."""
    from rnn_equivalence.frameworks.files import FileRefused

    if padding is not None:
        raise FileRefused("--lengths or --mask with an int8 model: its bound takes whole sequences (a quantized node "
                          "quantizes its padded steps too)")
    original, node = by_side(a, b, side)
    grid, differing, off = quantized_grid(original.params, node)
    exact, bound_64 = reference_and_bound(original.params, xs, state, "float64")
    computed = reference_and_bound(node.params, xs, state, "float64")[0]
    bound = rounded_reference_and_bound(original.params, grid, xs, state, "float64")[1]
    weights = compare_outputs(computed, exact, pair_bound(bound, bound_64),
                              f"{name_of(node)} vs {name_of(original)}, weights on their grid")
    q = node.quantized
    check = QuantizedCheck(q.op, q.dtype, side, stored_dtype(original), q.per_row, grid, off, differing,
                           {"weights": weights})
    return Verdict(name_of(a), name_of(b), check.within, check.sentence(), differing, runs, quantized=check)


def quantized_node_run(node, reference: StackParams, grid: StackParams, xs, state):
    """The quantized module ``node`` run by its framework (ONNX Runtime's DynamicQuantizeLSTM, its stored integers,
    scales and zero points as the file holds them: ``frameworks.onnx_quantized.QuantizedNode``) on ``xs`` and
    ``state`` in float32, against the float64 reference of ``reference`` (its original, or its own weights with an
    exact grid), within the bound of ``grid`` and the node's activations' quantization: a Comparison, or why not
    (not installed; on a CPU whose int8 kernel saturates pairs of products, an exceeded bound said with its cause,
    not counted, as the suite's strict expected failure is)."""
    from rnn_equivalence.frameworks import load
    from rnn_equivalence.frameworks.onnx_nodes import node_outputs
    from rnn_equivalence.frameworks.onnx_quantized import ORT_SATURATION_LINK, QuantizedNode, u8s8_saturates
    from rnn_equivalence.reference.quantized import ORT_ACTIVATIONS, quantized_reference_and_bound

    try:
        adapter = load(node.system)
        held = node.quantized.held
        runner = QuantizedNode(adapter, mutate=lambda _: held)  # the file's integers in the node the quantizer makes
        # The node's own outputs (Y, Y_h, Y_c) and initial states, (directions, batch, H), either direction count.
        config = LayerConfig(1, node.config.bidirectional, node.config.bias, options=(
            ("direction", "bidirectional" if node.config.bidirectional else "forward"),))
        native = adapter.to_native(node.params.astype("float32"), config)
        outputs = node_outputs(runner, native, xs.astype(np.float32),
                               {key: value.astype(np.float32) for key, value in state.items()}, config,
                               node.params.activation)
    except ImportError as error:
        return f"not run: {error}"
    except Exception as error:  # noqa: BLE001 - ONNX Runtime fails on the file's node: said, not a crash
        first = (str(error).strip().splitlines() or [""])[0][:300]
        return f"not run: ONNX Runtime failed: {type(error).__name__}: {first}"
    exact, bound = quantized_reference_and_bound(reference, grid, xs, state, scheme=ORT_ACTIVATIONS)
    bound = pair_bound(bound, reference_and_bound(reference, xs, state, "float64")[1])
    comparison = compare_outputs({key: np.asarray(value, np.float64) for key, value in outputs.items()},
                                 adapter.arrange(exact, config), adapter.arrange(bound, config),
                                 f"ONNX Runtime's {node.quantized.op} on {name_of(node)}, float32 data")
    # 2 * 255 * 64 < 2^15: weights on 7 bits (reduce_range) never saturate a pair, whatever the CPU; uint8 weights
    # take the U8U8 kernel, which the saturation does not concern
    saturating = node.quantized.dtype == "int8" and node.quantized.largest > 64 and u8s8_saturates()
    if not comparison.equivalent and saturating:
        return (f"err/bound {comparison.ratio:.3g}, expected on this CPU (not counted): with no VNNI or AMX, ONNX "
                f"Runtime's uint8 x int8 kernel sums pairs of products in int16 with saturation ({ORT_SATURATION_LINK}"
                f"); quantize with reduce_range=True for a result within the bound here")
    return comparison


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

    if module.quantized is not None:  # the int8 node on the weights it holds: its activations' quantization alone
        return {module.quantized.dtype: quantized_node_run(module, module.params, exact_grid(module.params), xs, state)}
    try:
        adapter = load(module.system)
    except ImportError as error:
        return {"not run": f"{module.system}: {error}"}
    shape = (module.config.num_layers, module.config.bidirectional, module.config.bias)
    structure = lambda c: (c.num_layers, c.bidirectional, c.bias)  # noqa: E731
    # A layer's runner builds any stack; a cell system's runs the structures its test plan declares, its padded
    # runs' too (an ONNX node's two directions: its configuration naming the direction), with their options.
    declared = {structure(c): c for c in (*adapter.padded_configs, *adapter.configs)}
    checked = sorted(declared)
    if not adapter.layer and shape[:2] != (1, False) and shape not in declared:
        return {"not run": f"{module.system}'s runner takes (layers, bidirectional, bias) in {checked}, "
                           f"not {shape}"}
    padded = [c for c in adapter.padded_configs if structure(c)[:2] == shape[:2]] or adapter.padded_configs[:1]
    if padding is not None and not padded:
        return {"not run": f"{module.system} takes no lengths (a padded batch)"}
    config = module.config
    if padding is not None:  # the system's own way to take lengths, in this structure
        config = LayerConfig(config.num_layers, config.bidirectional, config.bias, options=padded[0].options)
    elif not adapter.layer and shape[:2] != (1, False):  # a declared structure, run with its own options
        config = LayerConfig(config.num_layers, config.bidirectional, config.bias, options=declared[shape].options)
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
        except Exception as error:  # noqa: BLE001 - the framework itself fails on these weights: said, not a crash
            first = (str(error).strip().splitlines() or [""])[0][:300]
            return {"not run": f"{module.system} failed: {type(error).__name__}: {first}"}
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
    quantized, half = quantized_pair(a, b), half_pair(a, b)
    if quantized is not None:
        verdict = quantized_verdict(a, b, quantized, xs, state, padding, runs)
    else:
        verdict = float_verdict(a, b, runs) if half is None else half_verdict(a, b, half, xs, state, padding, runs)
    equivalent = verdict.equivalent  # the weights' function; the frameworks' runs below may add to it
    if run_frameworks:
        if quantized is None:
            verdict.frameworks = {"A": framework_run(a, xs, state, padding), "B": framework_run(b, xs, state, padding)}
        else:  # the int8 node judged against its original's function, with the bound of the grid and its activations
            original, node = by_side(a, b, quantized)
            verdict.frameworks = {quantized: {node.quantized.dtype: quantized_node_run(
                node, original.params, verdict.quantized.grid, xs, state)},
                verdict.quantized.original: framework_run(original, xs, state, padding)}
            verdict.frameworks = dict(sorted(verdict.frameworks.items()))  # A, then B
        exceeded = [f"{side} in {dtype} (err/bound {c.ratio:.3g})" for side, found in verdict.frameworks.items()
                    for dtype, c in found.items() if isinstance(c, Comparison) and not c.equivalent]
        if exceeded:
            verdict.equivalent = False
            verdict.reason += "; the framework's own run exceeds its bound: " + ", ".join(exceeded)
    if not equivalent and diagnose and quantized is None:  # an int8 pair: its tensors off their grid are named
        verdict.diagnosis = diagnosis(a, b, verdict.half, xs, state, padding, suspected)
    return verdict


def float_verdict(a, b, runs) -> Verdict:
    """The verdict of two modules in one format (or each in float32 or float64): float32's runs decide."""
    equivalent = runs["float32"].equivalent
    r32, r64 = runs["float32"].ratio, runs["float64"].ratio
    if not equivalent:
        reason = f"float32 runs differ beyond the bound (err/bound {r32:.3g})"
    elif r64 <= 1:
        reason = f"float32 runs within the bound (err/bound {r32:.3g}), float64 runs too ({r64:.3g})"
    else:  # e.g. two biases summed into one in float32: a rounding float32 cannot see and float64 can
        reason = (f"float32 runs within the bound (err/bound {r32:.3g}); float64 runs would be {r64:.3g} bounds "
                  f"apart: the weights differ by float32 roundings (a summed bias)")
    return Verdict(name_of(a), name_of(b), equivalent, reason, parameter_differences(a, b), runs)


def diagnosis(a, b, half: HalfCheck | None, xs, state, padding=None, suspected=None) -> list:
    """The porting mistakes that explain the difference (``rnn_equivalence.diagnose``). A half pair: the mistakes
    made on the original, then rounded as the half side is, judged by the bound of that rounding."""
    from rnn_equivalence.diagnose import explain

    if half is None:
        return explain(a, b, xs, state, padding, suspected)
    original, rounded = by_side(a, b, half.rounded)
    xs, state = in_format(xs, state, half.format)
    return explain(original, rounded, xs, state, padding, judges=half_judges(rounded, half.format, xs, state, padding))
