"""What each system is checked on, declared as data: the test plan.

A system's class sets these beside its mapping and its runner; the tests read them (rnn_equivalence.harness.cases
makes each system's cases from them, conftest.py parametrises over them). Nothing here runs a
framework. The known upstream bugs a test meets are not part of a system's plan: they are rows of
the one table, rnn_equivalence.harness.known_issues.
"""

from __future__ import annotations

from typing import Callable

from rnn_equivalence.frameworks.mapping import Native
from rnn_equivalence.reference.config import CELL, LayerConfig
from rnn_equivalence.reference.formats import FORMATS, HALF_FORMATS

# The dtypes each capability runs in, of those a system declares (``TestPlan.dtypes``; ``dtypes_for``). A
# capability is a test's design (rnn_equivalence.harness.parametrize.DESIGNS), "mutations" for the wrong
# mappings, "" for a test without cases (layouts, round trips, the bitwise integer case, the activations'
# accuracy). A half format (float16, bfloat16) runs where reference/tolerance.py derives its bound: the forward
# runs (whole sequences, padded batches, chunked runs) and the wrong mappings they must catch. The backward
# pass's half bound (reference/backward.py on a mixed arithmetic) is checked on PyTorch alone, by name
# (tests/equivalence/test_half_torch.py: the other frameworks' half gradients are not yet measured against it) and
# the optimizer step has none (``optimizer_step_bound`` is derived for float32 and float64), so in the designs
# gradients and steps, like every capability not named here, run in float32 and float64 only. The wrong mappings
# run in float32 and each half format (float64 adds nothing: a mistake caught against float32's bound is caught
# against float64's).
CAPABILITY_DTYPES = {**dict.fromkeys(("whole", "eager", "padded", "chunked"), FORMATS),
                     "mutations": ("float32", *HALF_FORMATS)}
DEFAULT_DTYPES = ("float32", "float64")  # every other capability's


def arithmetic_of(plan, dtype: str) -> str:
    """The arithmetic the bound of a system's (``plan``: an adapter or its class) runs in ``dtype`` models
    (``TestPlan.arithmetic``): a mixed policy for a half format computed in float32 within each operation, else
    the dtype itself. Its data are the dtype's either way (harness/cases.py, ``data_format``)."""
    return plan.arithmetic.get(dtype, dtype)


def dtypes_for(plan, capability: str, depth: str = "full") -> tuple[str, ...]:
    """Those of a system's (``plan``: an adapter or its class) dtypes a capability runs in at ``depth``, in its
    order: short of full depth, not those the system runs at full depth only (``TestPlan.full_depth_dtypes``)."""
    allowed = CAPABILITY_DTYPES.get(capability, DEFAULT_DTYPES)
    later = plan.full_depth_dtypes if depth != "full" else ()
    left_out = plan.dtypes_left_out.get(capability, ())
    return tuple(d for d in plan.dtypes if d in allowed and d not in later and d not in left_out)


class TestPlan:
    __test__ = False  # not a pytest test class
    # The activations the system is compared on (rnn_equivalence.reference.params: a vanilla cell's g, or a gated
    # cell's "f,g,h" / "f,g"); a gated system's default: (GATED,), set on registration.
    activations: tuple[str, ...] = ("tanh", "relu", "sigmoid", "identity")
    # The options sets the system is compared on, "+"-joined names from rnn_equivalence.reference.params.OPTIONS
    # ("" none); ``mutation_options``: the set the mutation case uses (where the mutations of
    # option weights apply). An option outside every set is refused by name (check_params).
    options: tuple[str, ...] = ("",)
    mutation_options: str = ""
    # The dtypes the system runs in; each capability runs in those of them ``CAPABILITY_DTYPES`` allows it.
    dtypes: tuple[str, ...] = ("float32", "float64")
    # Per half format the system runs in, the arithmetic its runs are judged by where it is not the format's own
    # (reference/tolerance.py: every operation, product and partial sum in half): "mixed_float16" for a system
    # measured to compute float32 within each operation and store its results in float16 (a linear accumulated
    # in float32 and rounded once), a bound a computation rounding every partial sum in half exceeds
    # (tests/equivalence/test_half_torch.py). The report shows the row as "float16 (float32 within each op)".
    arithmetic: dict[str, str] = {}
    # Of ``dtypes``, those the system runs in at full depth only: short of it no capability runs them
    # (``dtypes_for``), where running every system's half rows at default would cost more than they tell
    # (rnn_equivalence.harness.depth: the Keras layers on jax and torch run their half formats at full depth).
    full_depth_dtypes: tuple[str, ...] = ()
    # Per capability, dtypes of ``dtypes`` it does not run in at any depth, where the framework has a bug there that
    # no known-issue row can follow; each with a named test proving the bug, in the system's module's words
    # (Keras 3 on torch: a stateful layer's state not carried under a mixed policy, tests/equivalence/test_half_keras.py).
    dtypes_left_out: dict[str, tuple[str, ...]] = {}
    configs: tuple[LayerConfig, ...] = (CELL,)
    mutation_config: LayerConfig = CELL  # the richest configuration: where the mutations run
    layout_config: LayerConfig = CELL  # the configuration ``own_weight_shapes`` builds
    # Deliberately wrong mappings, each expressed on the native weights, that
    # the suite must detect; see tests/equivalence/test_mutations.py.
    mutations: dict[str, Callable[[Native], Native]] = {}
    # Per half format, the wrong mappings its bound (that of ``arithmetic_of``) cannot tell from rounding on the
    # square mutation case (a half bound is some 2**11 to 2**16 times float32's): asserted there as not caught (an
    # entry that gets caught is stale), each with its measured err/bound, then run on the one-step case
    # (harness.cases.one_step_mutation_case), where each is caught and recorded (tests/equivalence/test_mutations.py).
    mutations_within_bound: dict[str, tuple[str, ...]] = {}
    # The longest sequence the adapter is tested on; None: the cases' own (up to 50 steps).
    max_steps: int | None = None
    compare_with: str | None = None  # an exported model: the system it was exported from
    # A converted system: what runs is a converter's output (TFLite's converter, tf2onnx, torch.onnx.export),
    # named here; "" for a framework's own run. A converter's result depends on the structure it converts,
    # not on the weights' values, so short of full depth such a system converts once per structure of its
    # design and runs the first wrong mapping of each kind that needs a conversion (rnn_equivalence.harness.depth,
    # rnn_equivalence.harness.cases); every case and every one at full depth.
    converter: str = ""
    # Cases with an initial state given and omitted (rnn_equivalence.harness.cases); (False,): a system that
    # refuses one.
    initial_states: tuple[bool, ...] = (True, False)
    # Padded batches: the configurations the system is compared on with mixed lengths (with the
    # system's own options, e.g. ("enforce_sorted", False)). A system with none refuses a padded batch.
    padded_configs: tuple[LayerConfig, ...] = ()
    # Chunked runs: configurations in which a sequence is run in several calls, each starting from
    # the state the previous call returned (``returned_state``, or the system's own carry).
    chunked_configs: tuple[LayerConfig, ...] = ()
    # Runs compiled (jax.jit, once per structure, the weights, inputs and state its arguments: how JAX
    # users run, and what makes repeated cases cheap); one case per system also runs eagerly
    # (tests/equivalence/test_reference.py), so that the path without jit stays checked.
    compiles: bool = False
