"""PaddlePaddle (3.3.1, in its own environment: ``nox -s paddle``): the two threads the mapping rests on, settled
on Paddle itself, and what its layers refuse.

The equivalence itself is the reference tests' (every design case of what the systems declare):
frameworks/paddle_cells.py. Measured here:

- PaddlePaddle/Paddle#45412 (a bidirectional LSTM "aligned" with PyTorch's gives other outputs; its state_dict
  holds the weights twice): each ``<k>.cell_fw.*`` / ``<k>.cell_bw.*`` (``<k>.cell.*``) entry is the very tensor
  of its layer name (one object, one storage), so loading the layer's names alone sets the copies and gives the
  reference's outputs. What does give other outputs: a dict holding new layer names *and* stale copies (a
  state_dict of Paddle's own, its layer names overwritten): ``set_state_dict`` loads the copies last, silently.
- PaddlePaddle/Paddle#23116 (the gate order): of every order of the gate blocks, PyTorch's alone (LSTM i f g o,
  GRU r z n, reset after) is within the bound; every other is orders of magnitude outside it.
- A layer without biases (``bias_ih_attr=False, bias_hh_attr=False``) crashes paddlepaddle 3.3.1
  (PaddlePaddle/Paddle#70231, open): refused by the systems, naming why.
"""

import itertools
import signal
import subprocess
import sys

import numpy as np
import pytest

from rnn_equivalence.frameworks.files import find_recurrent
from rnn_equivalence.harness.cases import case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.config import LayerConfig

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong run is not a rounding effect
BIDIRECTIONAL = LayerConfig(2, True, options=(("time_major", False),))  # the threads' layout: 2 layers, both ways


def is_paddle(cls):
    return cls.__module__ == "rnn_equivalence.frameworks.paddle_cells"


def is_paddle_layer(cls):
    return is_paddle(cls) and cls.layer


def paddle_case(adapter, seed, config):
    """A float32 case of ``adapter`` in ``config`` with an initial state: the case and its native weights."""
    case = case_of(adapter, 3, 4, 2, 6, seed, config)
    assert case.state() is not None, case
    return case, adapter.to_native(case.stack("float32"), config)


def user_layer(adapter):
    """The layer as a user builds it: Paddle's defaults, two layers, both directions, batch-major."""
    return adapter._class()(3, 4, num_layers=2, direction="bidirect")


def call(adapter, layer, case):
    """``layer`` on the case's inputs and initial state, as the suite's runner calls it; numpy outputs."""
    paddle = adapter.paddle
    xs, state = case.inputs("float32"), case.state("float32")
    initial = tuple(paddle.to_tensor(state[k]) for k in ("h", "c")) if adapter.family == "lstm" \
        else paddle.to_tensor(state["h"])
    with paddle.no_grad():
        output, final = layer(paddle.to_tensor(xs.transpose(1, 0, 2).copy()), initial)
    finals = {"h_n": final[0], "c_n": final[1]} if adapter.family == "lstm" else {"h_n": final}
    return {"output": output.numpy(), **{k: v.numpy() for k, v in finals.items()}}


def against_reference(adapter, case, outputs, what):
    expected = adapter.arrange(case.reference("float32"), case.config)
    bound = adapter.arrange(case.bound_vs_reference("float32"), case.config)
    return compare_outputs(outputs, expected, bound, f"{adapter.cell}, {what}, {case.describe('float32')}")


def layer_name(copy: str) -> str:
    """Paddle's cell copy "<k>.cell[_fw|_bw].<name>" -> its layer's own "<name>_l<k>[_reverse]"."""
    k, cell, name = copy.split(".")
    return f"{name}_l{k}{'_reverse' if cell == 'cell_bw' else ''}"


@pytest.mark.applies_to(lambda cls: is_paddle_layer(cls))  # a lambda: pytest takes a lone function as the marked one
def test_the_cells_copies_are_the_layers_own_tensors(adapter):
    """#45412's "8 more copies" (per layer of a bidirectional LSTM: 4 per direction): the state_dict lists every
    parameter twice, by the layer's name and by its cell's, and both names hold one tensor, one storage."""
    layer = user_layer(adapter)
    state_dict, parameters = layer.state_dict(), dict(layer.named_parameters())
    assert sorted(parameters) == sorted(adapter.native_spec(BIDIRECTIONAL, 3, 4))  # the suite's names, 16
    copies = sorted(name for name in state_dict if ".cell" in name)
    assert len(parameters) == 4 * 2 * 2 and len(copies) == len(parameters) and len(state_dict) == 2 * len(parameters)
    assert sorted(layer_name(copy) for copy in copies) == sorted(parameters)
    # the suite's .pdparams reader (frameworks/files.py) names each copy's layer weight the same way
    assert find_recurrent({k: v.numpy() for k, v in state_dict.items()}).copies == {c: layer_name(c) for c in copies}
    for copy in copies:
        own = state_dict[layer_name(copy)]
        assert state_dict[copy] is own and state_dict[copy].data_ptr() == own.data_ptr(), copy


@pytest.mark.applies_to(lambda cls: is_paddle_layer(cls))  # a lambda: pytest takes a lone function as the marked one
def test_loading_the_layers_names_alone_sets_the_copies_and_the_outputs(adapter, record):
    """#45412's question: must the copies be set too? No: ``set_state_dict`` of the layer's 16 names alone (Paddle
    warns that the 16 copies are missing) sets the copies, and the outputs are the reference's within the bound,
    bitwise the suite runner's (``set_value`` on the same names). Before loading, the layer's own initial
    weights are far outside it: the comparison can fail."""
    case, native = paddle_case(adapter, 451, BIDIRECTIONAL)
    layer = user_layer(adapter)
    before = against_reference(adapter, case, call(adapter, layer, case), "Paddle's initial weights")
    assert before.ratio > ORDERS_OF_MAGNITUDE, before.message()
    with pytest.warns(UserWarning, match="cell"):
        missing, unexpected = layer.set_state_dict(native)
    assert (len(missing), unexpected) == (16, []), (missing, unexpected)  # the copies, reported missing
    state_dict = layer.state_dict()
    for copy in (name for name in state_dict if ".cell" in name):
        np.testing.assert_array_equal(state_dict[copy].numpy(), native[layer_name(copy)], strict=True)
    outputs = call(adapter, layer, case)
    comparison = against_reference(adapter, case, outputs, "set_state_dict of the layer's names")
    record("reference", adapter, dtype="float32", **comparison.as_record())
    assert_within_bound(comparison)
    runner = adapter.run_native(native, case.inputs("float32"), case.state("float32"), case.config, case.activation)
    for key in outputs:
        np.testing.assert_array_equal(outputs[key], runner[key], strict=True)


@pytest.mark.applies_to(lambda cls: is_paddle_layer(cls))  # a lambda: pytest takes a lone function as the marked one
@pytest.mark.parametrize("copies_first", [False, True], ids=["state_dict-order", "copies-first"])
def test_stale_cell_copies_beside_new_layer_names_are_what_paddle_loads(adapter, copies_first):
    """What does give #45412's symptom: a state_dict of Paddle's own (both names) whose layer names were replaced
    by PyTorch's weights, its copies left as they were. ``set_state_dict`` takes both, one tensor after the
    other, in its own state_dict's order (layer names, then copies: the dict's order does not matter), so the
    stale copy wins, silently: the layer keeps its old weights, the outputs are far from the reference of the
    new ones and bitwise the old layer's."""
    case, native = paddle_case(adapter, 452, BIDIRECTIONAL)
    layer = user_layer(adapter)
    old = call(adapter, layer, case)
    stale = {name: tensor.numpy().copy() for name, tensor in layer.state_dict().items()}
    copies = {name: value for name, value in stale.items() if ".cell" in name}
    assert len(copies) == len(native) == 16
    given = {**copies, **native} if copies_first else {**stale, **native}  # the layer's names new, the copies stale
    assert (next(iter(given)) in copies) == copies_first
    layer.set_state_dict(given)
    np.testing.assert_array_equal(layer.state_dict()["weight_ih_l0"].numpy(), stale["weight_ih_l0"], strict=True)
    outputs = call(adapter, layer, case)
    for key in old:
        np.testing.assert_array_equal(outputs[key], old[key], strict=True)
    wrong = against_reference(adapter, case, outputs, "new layer names with stale cell copies")
    assert wrong.ratio > ORDERS_OF_MAGNITUDE, wrong.message()


def gates_permuted(native, order, gates):
    """Every weight's gate blocks (rows) in ``order``."""
    return {name: np.concatenate([np.split(value, gates, axis=0)[g] for g in order], axis=0)
            for name, value in native.items()}


@pytest.mark.applies_to(lambda cls: is_paddle(cls) and cls.family != "rnn")
def test_pytorchs_gate_order_alone_is_paddles(adapter, record):
    """#23116: Paddle's gate order, measured, not read: the same weights with their gate blocks in each of the
    G! orders; PyTorch's order (the mapping's) is within the bound, every other one orders of magnitude out."""
    config = BIDIRECTIONAL if adapter.layer else adapter.configs[0]
    case, native = paddle_case(adapter, 231, config)
    gates = 4 if adapter.family == "lstm" else 3
    ratios = {}
    for order in itertools.permutations(range(gates)):
        outputs = adapter.run_native(gates_permuted(native, order, gates), case.inputs("float32"),
                                     case.state("float32"), case.config, case.activation)
        ratios[order] = against_reference(adapter, case, outputs, f"gate blocks in the order {order}")
    identity = tuple(range(gates))
    assert len(ratios) == (24 if gates == 4 else 6)
    record("reference", adapter, dtype="float32", **ratios[identity].as_record())
    assert_within_bound(ratios[identity])
    wrong = {order: c.ratio for order, c in ratios.items() if order != identity}
    assert min(wrong.values()) > ORDERS_OF_MAGNITUDE, wrong


@pytest.mark.applies_to(lambda cls: is_paddle_layer(cls))  # a lambda: pytest takes a lone function as the marked one
def test_a_bias_free_layer_is_refused_naming_why(adapter):
    case = case_of(adapter, 3, 4, 2, 3, 0, LayerConfig(1, False, bias=False, options=(("time_major", True),)))
    native = adapter.to_native(case.stack("float32"), case.config)
    refusal = "bias_ih_attr=False, bias_hh_attr=False: paddlepaddle 3.3.1.s CPU rnn kernel crashes"
    with pytest.raises(ValueError, match=refusal):
        adapter.run_native(native, case.inputs("float32"), None, case.config, case.activation)


CRASH = """
import numpy as np, paddle
layer = paddle.nn.{cls}(3, 4, bias_ih_attr=False, bias_hh_attr=False)
layer(paddle.to_tensor(np.ones((2, 5, 3), "float32")))
print("ran")
"""


@pytest.mark.applies_to(lambda cls: is_paddle_layer(cls))  # a lambda: pytest takes a lone function as the marked one
def test_paddle_crashes_on_a_bias_free_layer(adapter):
    """Why the refusal above (PaddlePaddle/Paddle#70231): the layer, as a user builds it, kills its process
    (SIGSEGV in the CPU rnn kernel; the cells' fixed zero biases send it down the fused path without them). Run
    in a child process; a Paddle that runs it turns this red, and the refusal can go."""
    child = subprocess.run([sys.executable, "-W", "ignore", "-c", CRASH.format(cls=adapter.cell.split(".")[-1])],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGSEGV, (child.returncode, child.stdout[-500:], child.stderr[-500:])
