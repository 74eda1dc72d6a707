"""What a system builds or compiles once per structure runs each case with that case's own weights.

Keras layers are built once per structure of the stack (``KerasLayer._layers_key``: the batch, the steps,
the initial state and the mask are arguments of a call, not of the layers), each run's weights assigned
to their variables; the JAX systems (``TestPlan.compiles``) compile once per structure, the weights the
compiled function's arguments (``Adapter.compile_key``), and persist what XLA compiled across runs
(``rnn_equivalence.frameworks.jax_cache``). So a case runs in layers, or a compiled function, that another case made.
Had a run kept the weights of the case before (an assignment dropped, a weight captured as a constant of a
trace), the cases after the first here would match the first's reference, not their own.
"""

import pytest

from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs

DTYPE = "float32"


def reuses(cls) -> bool:
    return cls.compiles or (cls.layer and cls.__module__ == "rnn_equivalence.frameworks.keras_adapters")


@pytest.mark.applies_to(lambda cls: reuses(cls))  # a lambda: pytest takes a lone named function as the decorated test
def test_a_reused_structure_runs_each_cases_own_weights(adapter):
    """Four runs in turn: a case, the same structure with other weights and inputs (the same compiled
    function and layers), another batch and length (the same Keras layers, another compile), the first
    again. Each matches its own reference."""
    config = adapter.configs[0]
    first = case_of(adapter, 5, 4, 2, 3, 997, config)
    again = first.with_(seed=998)
    reshaped = first.with_(batch=3, steps=4, seed=999)
    assert first.stack().first.W_hx[0, 0] != again.stack().first.W_hx[0, 0]  # other weights, or nothing is shown
    for case in (first, again, reshaped, first):
        actual = adapter.run(case.stack(DTYPE), case.inputs(DTYPE), case.state(DTYPE), case.config)
        comparison = compare_outputs(actual, adapter.arrange(case.reference(), case.config),
                                     adapter.arrange(case.bound_vs_reference(DTYPE), case.config),
                                     f"{adapter.describe()} after other cases of its structure, "
                                     f"{case.describe(DTYPE)}")
        assert_within_bound(comparison)


@pytest.mark.applies_to(lambda cls: reuses(cls)
                        and cls.name in ("keras-jax-gru-rnn", "keras-tf-gru-rnn", "flax-nnx-gru"))
def test_release_lets_go_of_what_was_built_where_it_was_built(adapter):
    """``release`` (the suite calls it after a system's last test) drops what ``built_once`` kept, in the
    process that built it: a Keras-on-JAX system's child process too (a Runner method, forwarded), where the
    layers and compiled functions live. Releasing twice finds nothing the second time; a run after it
    builds again and is right."""
    case = case_of(adapter, 5, 4, 2, 3, 997, adapter.configs[0])
    adapter.run(case.stack(DTYPE), case.inputs(DTYPE), case.state(DTYPE), case.config)
    assert adapter.release() is True and adapter.release() is False
    actual = adapter.run(case.stack(DTYPE), case.inputs(DTYPE), case.state(DTYPE), case.config)
    assert_within_bound(compare_outputs(actual, adapter.arrange(case.reference(), case.config),
                                        adapter.arrange(case.bound_vs_reference(DTYPE), case.config), "after release"))
