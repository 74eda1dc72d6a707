"""Test cases: one shape, structure and seed, and the data, reference and bound that go with them.

One case type for every cell of the family and every system, cell or layer: a
single cell unrolled over a sequence is the one-layer, one-direction stack.

A case's data (weights, inputs, initial state) are exact float32 values, the data of its float32 and
float64 runs alike. A run in a half format (float16, bfloat16) starts from that data rounded once to the
format (``data_format``), and its reference and bounds are the float64 ones of those very numbers: as in
float32, the framework and the reference start from identical values, and only arithmetic is compared.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from rnn_equivalence.frameworks.plan import dtypes_for
from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.harness.depth import design
from rnn_equivalence.reference.formats import HALF_FORMATS, numpy_dtype, round_to, storage_format
from rnn_equivalence.harness.reference_cache import kept
from rnn_equivalence.reference.tolerance import chunked_reference_and_bound, pair_bound, reference_and_bound
from rnn_equivalence.reference.params import CellParams, state_keys
from rnn_equivalence.reference.padding import HOLES, Mask, Padding
from rnn_equivalence.reference.params import projection_size, random_inputs, random_state
from rnn_equivalence.reference.stack import StackParams, run_stack


def data_format(dtype) -> str:
    """The format a case's data is exact in for a run in ``dtype``: "float32" (its draws as they are, for
    float32 and float64 runs), or the half format a run in a half format or a mixed policy stores in."""
    storage = storage_format(dtype) if isinstance(dtype, str) else ""
    return storage if storage in HALF_FORMATS else "float32"


def _in_half(array, name: str) -> np.ndarray:
    """Float32 data rounded once to the half format ``name``, in that format's NumPy dtype (exactly)."""
    return round_to(array, name).astype(numpy_dtype(name))


@dataclass(frozen=True)
class Case:
    """A family member (``family``, ``activation`` or GRU ``variant``), a structure (``config``),
    a shape and a seed."""

    family: str
    input_size: int
    hidden_size: int
    batch: int
    steps: int
    seed: int = 0
    config: LayerConfig = CELL
    activation: str = ""  # rnn: g; gated: "default" or "f,g,h" / "f,g" (rnn_equivalence.reference.params)
    variant: str = ""  # gru: "reset_after" or "reset_before"
    options: str = ""  # the options set, "+"-joined names from rnn_equivalence.reference.params.OPTIONS
    zero_b_hn: bool = False  # for a GRU that cannot hold b_hn (Flax nnx GRUCell)
    reversed_inputs: bool = False  # the system reads x_T..x_1 and reports in that order (go_backwards)
    forget_bias: float = 0.0  # folded by the mapping (TF1 LSTM); enters the bound
    padding: Padding | None = None  # a padded batch: each element's real steps
    padded_output: str = "zeros"  # what the system reports on a padded step (rnn_equivalence.reference.padding)
    chunks: tuple[int, ...] = ()  # a chunked run: the steps of each call
    # The dtypes the case runs in, where the design made dtype a factor (quick and default depth); ()
    # every dtype of the system (full depth). Not part of the case's data, reference or bound.
    dtypes: tuple[str, ...] = ()

    def runs_in(self, dtypes) -> tuple[str, ...]:
        """Those of a system's ``dtypes`` this case runs in."""
        return tuple(d for d in dtypes if not self.dtypes or d in self.dtypes)

    def __str__(self) -> str:
        shape = f"I{self.input_size}-H{self.hidden_size}-B{self.batch}-T{self.steps}-seed{self.seed}"
        if self.options:
            shape = f"{self.options}-{shape}"
        if self.padding is not None:
            shape += f"-{self.padding}"
        if self.chunks:
            shape += f"-chunks{'+'.join(map(str, self.chunks))}"
        return shape if self.config == CELL else f"{self.config}-{shape}"

    def describe(self, dtype: str) -> str:
        kind = self.stack().kind.replace("rnn-", "rnn g=")
        structure = "" if self.config == CELL else f"{self.config}, "
        return (f"{kind} {structure}I={self.input_size} H={self.hidden_size} batch={self.batch} T={self.steps} "
                f"{dtype} seed={self.seed}" + ("" if self.config.bias else " no bias")
                + (" b_hn=0" if self.zero_b_hn else "") + (" read reversed" if self.reversed_inputs else "")
                + (f" {self.padding.side}-padded lengths={list(self.padding.lengths)} padded steps report "
                   f"{self.padded_output}" if self.padding else "")
                + (f" in chunks of {list(self.chunks)} steps" if self.chunks else ""))

    def with_(self, **changes) -> "Case":
        return replace(self, **changes)

    def stack(self, dtype="float64") -> StackParams:
        """The parameters in ``dtype``: exact float32 values; in a half format, rounded once to it."""
        if data_format(dtype) != "float32":
            return self.stack().rounded_to(dtype).astype(numpy_dtype(dtype))
        c = self.config
        stack = StackParams.random(self.family, self.input_size, self.hidden_size, c.num_layers, c.bidirectional,
                                   self.seed, dtype, c.bias, self.activation, self.variant, self.option_names)
        if self.zero_b_hn:
            def without_b_hn(p):
                b_h = p.b_h.copy()
                b_h[2 * p.hidden_size:] = 0
                return p.replace(b_h=b_h)

            stack = stack.map(without_b_hn)
        return stack

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(self.options.split("+")) if self.options else ()

    def params(self, dtype="float64"):
        """The one cell of a cell case."""
        return self.stack(dtype).first

    def inputs(self, dtype="float64") -> np.ndarray:
        if data_format(dtype) != "float32":
            return _in_half(self.inputs(), dtype)
        return random_inputs(self.steps, self.batch, self.input_size, self.seed, dtype)

    def state(self, dtype="float64") -> dict | None:
        """{"h": (L*D, batch, H)}, and "c" for an LSTM; None where the config gives no initial state."""
        if not self.config.initial_state:
            return None
        if data_format(dtype) != "float32":
            return {key: _in_half(value, dtype) for key, value in self.state().items()}
        LD = self.config.num_layers * self.config.num_directions
        projected = "projection" in self.option_names
        size = {"h": projection_size(self.hidden_size) if projected else self.hidden_size, "c": self.hidden_size}
        return {key: random_state((LD, self.batch, size[key]), [self.seed, 3 + k], dtype)
                for k, key in enumerate(state_keys(self.family))}

    def _read(self, xs):
        return xs[::-1] if self.reversed_inputs else xs

    def _read_padding(self):
        """Read reversed, a post-padded batch is a pre-padded one (and back); a mask with holes is reversed."""
        if self.padding is None or not self.reversed_inputs:
            return self.padding
        if self.padding.side == HOLES:
            return Mask.of(self.padding.mask(self.steps)[::-1])
        return Padding(self.padding.lengths, "pre" if self.padding.side == "post" else "post")

    def exact_data(self, dtype="float64") -> tuple:
        """(parameters, inputs, initial state) as float64 arrays holding the values a run in ``dtype``
        starts from (``data_format``): what its reference and bounds are computed from."""
        name, state = data_format(dtype), self.state()
        if name == "float32":
            return self.stack(), self.inputs(), state
        return (self.stack().rounded_to(name), round_to(self.inputs(), name),
                None if state is None else {key: round_to(value, name) for key, value in state.items()})

    def reference(self, dtype="float64") -> dict:
        """The float64 reference's canonical results (``rnn_equivalence.reference.stack.drive``'s keys), from the
        data a run in ``dtype`` starts from: float32 and float64 runs share it, a half format has its own."""
        return _reference(_data(self), data_format(dtype))

    def bound(self, dtype: str, data: str | None = None) -> dict:
        """Bound on |computed in ``dtype`` - exact| for every canonical result, from the data a run in ``data``
        (``dtype`` unless given: a half run judged by another arithmetic's bound) starts from."""
        return _bound(_data(self), dtype, data_format(data or dtype))

    def bound_vs_reference(self, dtype: str, data: str | None = None) -> dict:
        """Allowed |computed in dtype - float64 reference|: both carry rounding error (the reference's on the
        same data)."""
        return pair_bound(self.bound(dtype, data), _bound(_data(self), "float64", data_format(data or dtype)))

    def changed_by(self, options, dtype: str) -> bool:
        """Whether the options ``options`` (names) change this case's results beyond the bound in
        ``dtype``: a threshold may never be reached, e.g. one step from a zero state."""
        if not options:
            return False
        without = self.with_(options="+".join(n for n in self.option_names if n not in options))
        reference, other, bound = self.reference(dtype), without.reference(dtype), self.bound_vs_reference(dtype)
        return any(np.any(np.abs(reference[k] - other[k]) > bound[k]) for k in reference)

    def chunk_inputs(self, dtype="float64") -> list[np.ndarray]:
        xs, bounds = self.inputs(dtype), np.cumsum(self.chunks)[:-1]
        return np.split(xs, bounds)

    def chunk_references(self, dtype: str) -> list[tuple[dict, dict]]:
        """Per chunk, the reference's results and the allowed |computed in dtype - reference|,
        each chunk from the state the one before ended in
        (``rnn_equivalence.reference.tolerance.chunked_reference_and_bound``)."""
        return _chunk_references(_data(self), dtype, data_format(dtype))


# The factors every system is compared over, beside its own activations and configurations:
# two non-square shapes (I > H and I < H), batch 1 and more, one step and a long sequence,
# an initial state given and omitted. Shared by every system, so compiled code is reused.
SHAPES = ((7, 5), (3, 6))  # (I, H)
BATCHES = (1, 3)
STEPS = (1, 50)
INITIAL_STATE = (True, False)


def factors(adapter, depth: str = "full") -> dict[str, tuple]:
    """The levels of every factor for a system (an adapter or its class). The dtype is a factor of the
    design at quick and default depth (every pair of a dtype and any other level still occurs at
    default); at full depth every case runs in every dtype the system supports."""
    configs = tuple(dict.fromkeys(replace(c, initial_state=True) for c in adapter.configs))
    levels = {"activation": tuple(adapter.activations), "options": tuple(adapter.options), "config": configs,
              "shape": SHAPES, "batch": BATCHES,
              "steps": tuple(dict.fromkeys(steps_for(adapter, t) for t in STEPS)),
              "initial_state": tuple(s for s in INITIAL_STATE if s in adapter.initial_states)}
    return levels if depth == "full" else {**levels, "dtype": dtypes_for(adapter, "whole", depth)}


# At default depth every (system, dtype) row of the report keeps at least this many whole-sequence cases.
MIN_CASES_PER_DTYPE = 3


def cases_for(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """The cases a system is compared on at ``depth`` (``rnn_equivalence.harness.depth``); ``seed`` offsets every
    case's seed, so another seed draws other weights and data for the same design. A converted
    system (``TestPlan.converter``), short of full depth: one case per structure of the design
    (``once_per_structure``), its weights seeded by its structure (``by_structure``)."""
    levels = factors(adapter, depth)
    # A converted system at default depth converts once per structure of the quick design (every level
    # of every factor once), not of the covering design: each structure is a conversion of 2-4 s, and
    # the pairs of structure levels are met at full depth (rnn_equivalence.harness.depth).
    rows = design(levels, "quick" if converts_once_per_structure(adapter, depth) else depth)
    if depth == "default":  # a dtype the covering design gave fewer rows takes the first rows of the others
        for dtype in dtypes_for(adapter, "whole", depth):
            mine = [row for row in rows if row["dtype"] == dtype]
            others = [row for row in rows if row["dtype"] != dtype]
            rows += [{**row, "dtype": dtype} for row in others[:max(0, MIN_CASES_PER_DTYPE - len(mine))]]
    if converts_once_per_structure(adapter, depth):
        rows = once_per_structure(rows, levels)
    cases = []
    for i, row in enumerate(rows):
        config = replace(row["config"], initial_state=row["initial_state"])
        (I, H) = row["shape"]
        cases.append(case_of(adapter, I, H, row["batch"], row["steps"], seed * 10_000 + i, config,
                             activation=row["activation"], options=row["options"],
                             dtypes=(row["dtype"],) if "dtype" in row else ()))
    return by_structure(cases, adapter, depth, seed)


# --- converted systems short of full depth (rnn_equivalence.harness.depth) ----------------------------------------
# A converter's result depends on the structure it converts, not on the sizes of the fixed dimensions
# nor on the weights' values: these factors make a case's structure; the others (shape, batch, steps)
# are sizes.
STRUCTURE_FACTORS = ("activation", "options", "config", "initial_state", "dtype")


def converts_once_per_structure(adapter, depth: str) -> bool:
    """A converted system short of full depth: one conversion per structure (rnn_equivalence.harness.depth)."""
    return bool(adapter.converter) and depth != "full"


def once_per_structure(rows: list[dict], levels: dict) -> list[dict]:
    """The first row of each structure (``STRUCTURE_FACTORS``) in ``rows``, in order, and the sizes dealt
    out again: row j takes row j (cycling) of the size factors' quick design (every level once) followed by
    the rest of their covering design, so that every level of every size factor is met (rows of a
    structure repeated where there are fewer structures than levels), and every pair of size levels
    where there are enough structures."""
    firsts: dict[str, dict] = {}
    for row in rows:
        firsts.setdefault(repr([row[name] for name in STRUCTURE_FACTORS if name in row]), row)
    structures = list(firsts.values())
    sizes = {name: levels[name] for name in levels if name not in STRUCTURE_FACTORS}
    quick = design(sizes, "quick")
    dealt = quick + [row for row in design(sizes, "default") if row not in quick]
    count = max(len(structures), len(quick))
    return [{**structures[j % len(structures)], **dealt[j % len(dealt)]} for j in range(count)]


def structure_seed(case: Case, seed: int) -> int:
    """A seed drawn from the structure of a case's weights and model (its family member, sizes of the
    weights, configuration, activation, options), offset by the run's ``seed``: cases of one structure get
    the same weights, so that their converted models (a model per chunk length, a padded batch's on each
    side of padding) are one conversion."""
    structure = (case.family, case.variant, case.input_size, case.hidden_size, case.config, case.activation,
                 case.options, case.zero_b_hn)
    return seed * 10_000 + zlib.crc32(repr(structure).encode()) % 10_000


def by_structure(cases: list[Case], adapter, depth: str, seed: int) -> list[Case]:
    """A converted system's cases short of full depth, each seeded by its structure (``structure_seed``);
    other systems' as they are."""
    if not converts_once_per_structure(adapter, depth):
        return cases
    return [case.with_(seed=structure_seed(case, seed)) for case in cases]


def converted_once_each(adapter, depth: str, runs: list) -> list:
    """Of the wrong mappings of the weights, which each need a conversion of their own, the first, for a
    converted system short of full depth: it shows that the converted model carries what it is given; the
    others re-test the source system's mapping, which the source's own tests run. Every one otherwise."""
    return runs[:1] if converts_once_per_structure(adapter, depth) else runs


def mutations_for(adapter, depth: str) -> list[str]:
    """The wrong mappings (``TestPlan.mutations``) a system is run with: quick, the first; a converted
    system short of full depth, the first (``converted_once_each``); otherwise every one."""
    names = list(adapter.mutations)
    return names[:1] if depth == "quick" else converted_once_each(adapter, depth, names)


def eager_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """A compiled system's (``TestPlan.compiles``: jax.jit) one case run eagerly, at every depth, so that the
    path without jit stays checked: its first whole-sequence case of more than one step, in float32 (where
    compiling changes most: the fusion of float32 operations)."""
    if not adapter.compiles:
        return []
    first = next(case for case in cases_for(adapter, "quick", seed) if case.steps > 1)
    return [first.with_(dtypes=("float32",) if "float32" in adapter.dtypes else ())]


def in_turn(cases: list[Case], adapter, depth: str, capability: str) -> list[Case]:
    """Short of full depth, a capability's cases take the system's dtypes for it (``dtypes_for``) in turn
    (every level once); fewer cases than dtypes run in every dtype."""
    dtypes = dtypes_for(adapter, capability, depth)
    if depth == "full" or len(cases) < len(dtypes):
        return cases
    return [case.with_(dtypes=(dtypes[i % len(dtypes)],)) for i, case in enumerate(cases)]


def pair_cases(anchor, other, depth: str = "default", seed: int = 0) -> list[Case]:
    """Two cells against each other: the other system's long-sequence cases (which its reference test
    ran too, so an exported model is reused), one per activation and options set both support; every
    one at full depth."""
    cases = [c.with_(zero_b_hn=c.zero_b_hn or anchor.zero_b_hn, dtypes=())  # b_hn = 0 where either cannot hold it
             for c in sorted(cases_for(other, depth, seed), key=lambda c: "float32" not in c.runs_in(("float32",)))
             if c.steps > 1 and c.activation in anchor.activations and c.options in anchor.options]
    if depth == "full":
        return cases
    return list({(c.activation, c.options): c for c in reversed(cases)}.values())[::-1]


# Mutations: five steps. A wrong mapping shows from the first step on, with an error/bound
# ratio in the thousands (the mutation tests ask for more than 100); long sequences are for
# rounding, which the reference tests measure. A square shape too, for mutations that only
# fit a square kernel (a transposed W_hx needs I == H): values, not shapes, must give the
# mistake away.
MUTATION_STEPS = 5


def case_of(adapter, input_size, hidden_size, batch, steps, seed, config=CELL, activation=None, padding=None,
            chunks=(), options="", dtypes=()) -> Case:
    """A case of what a system (an adapter or its class) computes: its family member, the constants
    its mapping folds, the order it reads in, what it reports on padded steps; the activation its
    first one unless given."""
    return Case(adapter.family, input_size, hidden_size, batch, steps, seed, config=config,
                activation=adapter.activations[0] if activation is None else activation, variant=adapter.variant,
                options=options,
                zero_b_hn=adapter.zero_b_hn, forget_bias=adapter.forget_bias,
                reversed_inputs=adapter.reads_reversed(config), padding=padding,
                padded_output=adapter.padded_output(config) if padding else "zeros", chunks=tuple(chunks),
                dtypes=tuple(dtypes))


# Padded batches: a length-1 element and a full-length one among four, unsorted (sorted, longest
# first, where the system asks for it: PyTorch's enforce_sorted=True), over nine steps.
PADDED_STEPS = 9
LENGTHS = (5, 9, 1, 7)
# A mask with holes (side ``HOLES``, for the systems that take any mask: Keras), over the same nine steps
# and four elements: a hole then padding; every step real; one real step in the middle; two holes and
# real steps to the end (masked steps between real ones, at the start of neither).
HOLED_MASK = np.array([[t in real for real in ({0, 1, 2, 4, 5}, set(range(9)), {4}, {0, 2, 3, 5, 6, 7, 8})]
                       for t in range(PADDED_STEPS)])


def padding_of(lengths, side: str) -> Padding:
    """The padded batch of a side a system takes: ``lengths`` padded on that side, or, for ``HOLES``, the
    mask with holes (``HOLED_MASK``, over the same steps and elements)."""
    return Mask.of(HOLED_MASK) if side == HOLES else Padding(lengths, side)


def padded_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """A system's padded configurations and sides of padding, in a non-square shape: quick, the first
    configuration post-padded; default, every configuration and every side at least once (paired off,
    not crossed); full, every configuration on every side in both shapes."""
    configs, sides = adapter.padded_configs, adapter.padding_sides
    if depth == "full":
        rows = list(itertools.product(configs, sides, SHAPES))
    else:
        n = 1 if depth == "quick" else max(len(configs), len(sides))
        rows = [(configs[i % len(configs)], sides[i % len(sides)], SHAPES[1]) for i in range(n)]
    cases = []
    for i, (config, side, (I, H)) in enumerate(rows):
        lengths = tuple(sorted(LENGTHS, reverse=True)) if config.option("enforce_sorted") else LENGTHS
        cases.append(case_of(adapter, I, H, len(lengths), PADDED_STEPS, seed * 10_000 + 500 + i, config,
                             padding=padding_of(lengths, side)))
    return in_turn(by_structure(cases, adapter, depth, seed), adapter, depth, "padded")


def padded_right_in_float32(adapter) -> bool:
    """A system with padded runs that no known upstream bug breaks in float32, where the padded
    mutations and proved differences run."""
    from rnn_equivalence.harness.known_issues import rows_of

    return bool(adapter.padded_configs) and all(row.dtype not in ("*", "float32")
                                                for row in rows_of(adapter.name, ("reference", "padded"))
                                                if not row.option)


# Chunked runs of six steps: uneven chunks, one step per call, and two even halves.
CHUNKINGS = ((2, 1, 3), (1, 1, 1, 1, 1, 1), (3, 3))


def chunked_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """A system's chunked configurations: quick, the first in uneven chunks; default, every
    configuration and the first two chunkings (uneven, one step per call) at least once, paired
    off; full, every configuration in every chunking."""
    configs = adapter.chunked_configs
    if depth == "full":
        rows = list(itertools.product(configs, CHUNKINGS))
    else:
        n = 1 if depth == "quick" else max(len(configs), 2)
        rows = [(configs[i % len(configs)], CHUNKINGS[i % 2]) for i in range(n)] if configs else []
    cases = [case_of(adapter, 3, 5, 2, sum(chunks), seed * 10_000 + 700 + i, config, chunks=chunks)
             for i, (config, chunks) in enumerate(rows)]
    return in_turn(by_structure(cases, adapter, depth, seed), adapter, depth, "chunked")


# Options changed or dropped the way converters get them wrong: six steps, where each of the suite's
# thresholds binds (tests/reference/test_options.py), in a non-square shape.
OPTION_STEPS = 6


def options_to_get_wrong(adapter) -> list[tuple[str, str]]:
    """(activation, options) rows a system can get wrong: each non-default activation, and each options set
    with an option that can be dropped (a projection alone cannot: W_h has its size; its mistakes are the
    adapters' mutations). Empty for a system with one activation and no options: no options test applies."""
    return [(g, "") for g in adapter.activations[1:]] + [(adapter.activations[0], o) for o in adapter.options
                                                         if set(o.split("+")) - {"", "projection"}]


def option_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """One case per non-default activation and per options set a system has (each other factor at its
    first level), where each is gotten wrong (tests/equivalence/test_mutations.py): quick, the first of
    them; default, all; full, all in both shapes (a converted system runs them at full depth only:
    tests/equivalence/test_mutations.py)."""
    rows = options_to_get_wrong(adapter)
    rows = rows[:1] if depth == "quick" else rows
    shapes = SHAPES if depth == "full" else SHAPES[1:]
    return in_turn([case_of(adapter, I, H, 2, OPTION_STEPS, seed * 10_000 + 800 + i, adapter.mutation_config,
                            activation=g, options=o)
                    for i, ((g, o), (I, H)) in enumerate(itertools.product(rows, shapes))],
                   adapter, depth, "options")


# Gradients: a sequence of eight steps (errors carried back through time as through the forward pass),
# three elements, an initial state (its gradient is compared too).
GRADIENT_STEPS, GRADIENT_BATCH = 8, 3


def gradient_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """The systems with autodiff (``Adapter.autodiff``), on cells without options: quick, the first
    configuration and activation; default, every configuration and every activation at least once
    (paired off, shapes alternating), and the first padded configuration post-padded; full, every
    configuration with every activation in both shapes, and every padded configuration on every side."""
    if not adapter.autodiff:
        return []
    configs, activations = adapter.configs, adapter.activations
    if depth == "full":
        rows = list(itertools.product(configs, activations, SHAPES))
        padded = list(itertools.product(adapter.padded_configs, adapter.padding_sides))
    else:
        n = 1 if depth == "quick" else max(len(configs), len(activations))
        rows = [(configs[i % len(configs)], activations[i % len(activations)], SHAPES[(i + 1) % 2]) for i in range(n)]
        padded = ([(adapter.padded_configs[0], adapter.padding_sides[0])]
                  if adapter.padded_configs and depth != "quick" else [])
    cases = [case_of(adapter, I, H, GRADIENT_BATCH, GRADIENT_STEPS, seed * 10_000 + 900 + i,
                     replace(config, initial_state=True), activation=g)
             for i, (config, g, (I, H)) in enumerate(rows)]
    lengths = lambda config: tuple(sorted(LENGTHS, reverse=True)) if config.option("enforce_sorted") else LENGTHS
    # A padded configuration keeps its own initial state: Keras's Masking layer drops the mask when an
    # initial state is given (frameworks/keras_plan.py), so that configuration declares none.
    cases += [case_of(adapter, *SHAPES[1], len(LENGTHS), PADDED_STEPS, seed * 10_000 + 950 + i,
                      config, padding=padding_of(lengths(config), side))
              for i, (config, side) in enumerate(padded)]
    return in_turn(cases, adapter, depth, "gradients")


def optimizer_cases(adapter, depth: str = "default", seed: int = 0) -> list[Case]:
    """One optimizer step: the first gradient case of a system with optimizers (the step adds one
    update to gradients the gradient design checks over every configuration)."""
    return gradient_cases(adapter, "quick", seed) if adapter.optimizers else []


def mutation_cases(adapter, depth: str = "default") -> list[Case]:
    """The square case, where only values can give a wrong mapping away, and for a cell (default and
    full depth) a non-square one, where a wrong mapping may also be refused by its shapes."""
    base = case_of(adapter, 4, 4, batch=2, steps=MUTATION_STEPS, seed=6, config=adapter.mutation_config,
                   options=adapter.mutation_options)
    if adapter.layer or depth == "quick":
        return [base]
    return [base, base.with_(input_size=3, hidden_size=5, seed=7)]


# In a half format the five steps' bound (some 2**11 to 2**16 times float32's) can hide a wrong mapping whose effect
# is small (``TestPlan.mutations_within_bound``: PyTorch's gates 0 and 1 exchanged in layer 1's weight_hh, a last
# layer's backward bias dropped). One step from a given initial state is where such a mistake stands out most: a
# wrong recurrent weight acts on the initial state alone, on no rounding carried from earlier steps, and 64 sequences
# give it 64 chances. Square, as the mutation case, with its seed (6: ``--seed`` does not move the mutation cases),
# but 3 units: there, in torch 2.13.0, each such mistake measures 3.2 (torch-gru-rnn bfloat16) to 83 times its half
# bound and the right runs 0.14 to 0.34; at 4 units the least is 2.2. (Reference runs at other seeds, 0 to 2 and 7
# to 8, put the least at 1.25: beyond the bound still, not beyond ``HALF_CAUGHT_BEYOND``.)
ONE_STEP_BATCH = 64


def one_step_mutation_case(adapter) -> Case:
    """The mutation case, square with 3 units, over one step from its initial state, for 64 sequences: where a wrong
    mapping below a half format's bound on the five-step case is caught (tests/equivalence/test_mutations.py)."""
    return mutation_cases(adapter, "quick")[0].with_(input_size=3, hidden_size=3, steps=1, batch=ONE_STEP_BATCH)


# A case's reference and bounds depend neither on the system nor, but for the format of the data it starts
# from (``data_format``), on the dtype it runs in: computed once per process, they serve the float32 and
# float64 tests of a case, every system whose design has
# that case (the LSTM cells of all frameworks share theirs), and its pair tests. Read-only.
def _data(case: Case) -> Case:
    """The case as its data: which dtypes it runs in changes neither its reference nor its bounds."""
    return replace(case, dtypes=()) if case.dtypes else case


# Kept across runs besides (``rnn_equivalence.harness.reference_cache``), by the content of what each computation
# reads: the arrays after the case's reading of them (reversed inputs, padding), not the case's description.
@lru_cache(maxsize=None)
def _reference(case: Case, data: str) -> dict:
    stack, xs, state = case.exact_data(data)
    arguments = (stack, case._read(xs), state, case._read_padding(), case.padded_output)
    return _read_only(kept("run_stack", arguments, lambda: run_stack(*arguments), __name__))


@lru_cache(maxsize=None)
def _bound(case: Case, dtype: str, data: str) -> dict:
    """The bound in ``dtype`` from the case's data in the format ``data`` (``data_format``)."""
    stack, xs, state = case.exact_data(data)
    arguments = (stack, case._read(xs), state, dtype, case.forget_bias, case._read_padding(), case.padded_output)
    return _read_only(kept("reference_and_bound:bound", arguments, lambda: reference_and_bound(*arguments)[1],
                           __name__))


@lru_cache(maxsize=None)
def _chunk_references(case: Case, dtype: str, data: str) -> list[tuple[dict, dict]]:
    args = case.exact_data(data)

    def compute():
        computed = chunked_reference_and_bound(*args, dtype, case.forget_bias, sizes=case.chunks)
        exact = chunked_reference_and_bound(*args, "float64", case.forget_bias, sizes=case.chunks)
        return [(values, pair_bound(bound, exact_bound)) for (values, bound), (_, exact_bound) in zip(computed, exact)]

    chunks = kept("chunked_reference_and_bound", (args, dtype, case.forget_bias, case.chunks), compute, __name__)
    return [(_read_only(values), _read_only(bound)) for values, bound in chunks]


def _read_only(arrays: dict) -> dict:
    for array in arrays.values():
        array.setflags(write=False)
    return arrays


def steps_for(adapter, steps: int) -> int:
    """``steps``, capped by the adapter's ``max_steps`` (an exporter that unrolls the recurrence)."""
    return min(steps, adapter.max_steps or steps)


__all__ = ["CELL", "Case", "LayerConfig", "MUTATION_STEPS", "case_of", "cases_for", "chunked_cases", "factors",
           "gradient_cases", "optimizer_cases",
           "mutation_cases", "option_cases", "padded_cases", "pair_cases", "stagnating_cell", "steps_for"]


# The tests of a framework's half arithmetic (tests/equivalence/test_half_torch.py, test_half_keras.py,
# test_half_jax.py): whether its products accumulate beyond the format.
def stagnating_cell(dtype: str) -> tuple[CellParams, np.ndarray]:
    """A relu cell whose pre-activation is one large term and many small ones, each under half an ulp of the
    large one in ``dtype`` (float16: 1024 and 1000 terms of 0.25; bfloat16: 1024 and 200 terms of 2): added one
    after the other in the format, every small term is lost; accumulated in float32, none is. One unit, one step,
    inputs of ones: the exact result (1274, 1424) is a value of the format."""
    small, n = {"float16": (0.25, 1000), "bfloat16": (2.0, 200)}[dtype]
    W_x = np.full((1, n + 1), small)
    W_x[0, 0] = 1024.0
    params = CellParams.rnn(W_hx=W_x, W_hh=np.zeros((1, 1)), b_x=np.zeros(1), b_h=np.zeros(1), activation="relu")
    return params.rounded_to(dtype), np.ones((1, 1, n + 1))
