"""A system's mapping is an object of its own: ``mapping(name)`` has the mapping and nothing else.

For a framework whose mapping is a class of its own (``Adapter.mapping_class``), ``mapping(name)`` is that
class with what the system declares (``Mapping.DECLARED``): no runner method, no plan attribute, no
framework. The system's class derives from the same mapping class, so what the equivalence tests prove of
the system (its runs against the reference, its mutations going red) they prove of this object: each
mapping method the system calls is the very function the object has, and the two write and read the
same weights.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from rnn_equivalence.frameworks import ADAPTERS, mapping
from rnn_equivalence.frameworks.base import RUNNER_METHODS
from rnn_equivalence.frameworks.mapping import Mapping, is_pure
from rnn_equivalence.frameworks.plan import TestPlan
from rnn_equivalence.reference.stack import StackParams

SPLIT = sorted(name for name, cls in ADAPTERS.items() if cls.mapping_class is not None)
# The mapping's interface: the methods every system's mapping answers (``Mapping``'s own).
INTERFACE = sorted(name for name, value in vars(Mapping).items()
                   if inspect.isfunction(value) and not name.startswith("__"))
PLAN = sorted(name for name in vars(TestPlan) if not name.startswith("_"))


def test_every_system_has_a_mapping_of_its_own():
    assert SPLIT == sorted(ADAPTERS)


def test_a_system_without_a_pure_mapping_is_refused():
    from rnn_equivalence.frameworks.base import Adapter

    with pytest.raises(TypeError, match="derives from Mapping alone"):
        type("MixedRNNCell", (Adapter,), {"name": "mixed-rnn-cell-for-this-test", "family": "rnn",
                                          "cell_spec": lambda self, *args: {}})
    assert "mixed-rnn-cell-for-this-test" not in ADAPTERS


@pytest.mark.parametrize("name", SPLIT)
def test_the_mapping_is_a_mapping_only(name):
    got = mapping(name)
    assert is_pure(type(got)), [c.__qualname__ for c in type(got).__mro__]
    assert not [method for method in RUNNER_METHODS if hasattr(got, method)]
    assert not [attribute for attribute in PLAN if hasattr(got, attribute)]
    for attribute in Mapping.DECLARED:
        assert getattr(got, attribute) == getattr(ADAPTERS[name], attribute), attribute


@pytest.mark.parametrize("name", SPLIT)
def test_the_system_runs_the_mapping_it_gives(name):
    """Every method of the mapping's interface the system resolves is the mapping object's own function:
    nothing between the mapping class and the system overrides one (a runner or plan class that did would
    make the tested system and the converting object two mappings)."""
    system, got = ADAPTERS[name], type(mapping(name))
    assert [method for method in INTERFACE if getattr(system, method) is not getattr(got, method)] == []


@pytest.mark.parametrize("name", SPLIT)
def test_the_mapping_writes_and_reads_what_the_system_does(name):
    cls = ADAPTERS[name]
    config = cls.mutation_config  # the richest: most layers and directions, the mutation case's options
    options = tuple(cls.mutation_options.split("+")) if cls.mutation_options else ()
    stack = StackParams.random(cls.family, 3, 5, config.num_layers, config.bidirectional, seed=11, bias=config.bias,
                               variant=cls.variant, options=options)
    if cls.zero_b_hn and config.bias:  # a GRU with no slot for b_hn (flax.nnx.GRUCell) holds parameters without it
        stack = stack.map(lambda cell: cell.replace(b_h=np.where(np.arange(cell.b_h.size) >= 2 * 5, 0.0, cell.b_h)))
    native, system_native = mapping(name).to_native(stack, config), cls().to_native(stack, config)
    assert native.keys() == system_native.keys()
    assert [key for key, value in native.items() if not np.array_equal(value, system_native[key])] == []
    # Read back, each its own way: the same parameters (a one-bias layout's sum comes back as b_x in both).
    back, system_back = mapping(name).from_native(native, config), cls().from_native(system_native, config)
    assert back.options == system_back.options == stack.options
    for (_, _, want), (_, _, have) in zip(system_back.cells(), back.cells(), strict=True):
        for field in ("W_x", "W_h", "b_x", "b_h", "W_proj"):
            assert np.array_equal(getattr(want, field), getattr(have, field)), field
