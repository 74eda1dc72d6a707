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
    dtypes: tuple[str, ...] = ("float32", "float64")
    configs: tuple[LayerConfig, ...] = (CELL,)
    mutation_config: LayerConfig = CELL  # the richest configuration: where the mutations run
    layout_config: LayerConfig = CELL  # the configuration ``own_weight_shapes`` builds
    # Deliberately wrong mappings, each expressed on the native weights, that
    # the suite must detect; see tests/equivalence/test_mutations.py.
    mutations: dict[str, Callable[[Native], Native]] = {}
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
