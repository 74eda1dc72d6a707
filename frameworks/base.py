"""The one interface every framework adapter implements: a system's mapping, run by its framework.

An adapter is one *system*: a framework's cell (unrolled over the sequence
here) or its sequence layer, for one member of the family (a vanilla RNN, an
LSTM, a GRU of one variant). Its weight mapping, canonical parameters to the
framework's own named weights and back, is ``rnn_equivalence.frameworks.mapping.Mapping``
(NumPy only); the adapter adds a run of the framework's own code on those weights:

    run(params, xs, state=None, config=CELL) -> outputs

``params`` is a cell or a stack, ``xs`` is (T, batch, I), ``state`` is
{"h": (L*D, batch, H)} (and "c" for an LSTM) or None; the outputs come back
in the system's own shapes and names, and ``arrange`` puts the reference's
canonical results into those same shapes, so each output is compared as the
framework returns it. What the system is tested on (activations, dtypes,
configurations, options, mutations) is declared as class attributes, and the
tests read them; its known upstream bugs are rows of ``rnn_equivalence.harness.known_issues``.

Frameworks are imported in ``start`` (``frameworks.load`` calls it), never at module
level nor on instantiation, so that importing ``frameworks`` and using a system's mapping
is free, and a missing framework breaks only its own adapters. The methods that touch the
framework are the ``Runner`` protocol below, which is also what a child process serves
(``rnn_equivalence.frameworks.child``). Every class that sets ``name`` registers itself (``ADAPTERS``):
there is no second list of names.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections import OrderedDict
from dataclasses import replace
from typing import Protocol

import numpy as np

# Re-exported: the adapters' modules import them from here.
from rnn_equivalence.frameworks.mapping import (  # noqa: F401
    Mapping, Native, NativeSpec, check_native, gates_text, is_pure, reorder_gates, without_held_zero_biases,
)
from rnn_equivalence.frameworks.plan import TestPlan
from rnn_equivalence.reference.params import state_keys
from rnn_equivalence.reference.config import CELL, NO_BIAS, LayerConfig  # noqa: F401  (re-exported)
from rnn_equivalence.reference.padding import HOLES, Padding
from rnn_equivalence.reference.params import GATED, GATES, activation_names
from rnn_equivalence.reference.stack import StackParams

# The registry: each class that sets ``name``, by its name (rnn_equivalence.frameworks.systems).
ADAPTERS: dict[str, type] = {}
# The hyperparameters of each optimizer the suite steps with (``Adapter.optimizer_step``), by its names.
OPTIMIZER_ARGUMENTS = {"sgd": ("learning_rate",), "adam": ("learning_rate", "beta_1", "beta_2", "epsilon")}


class Runner(Protocol):
    """What running a system needs of its framework: the methods that import or call it. A system
    whose framework must run in another process (a Keras backend other than this process's) has
    exactly these forwarded there (``rnn_equivalence.frameworks.child.InChildProcess`` is made from this list);
    everything else, the mapping and the checks, stays in the calling process."""

    def start(self) -> None: ...  # import the framework (ImportError, naming the system, if it cannot)

    def describe(self) -> str: ...  # the framework's class, with its settings

    def versions(self) -> dict[str, str]: ...  # the installed distributions that identify what ran

    def own_weight_shapes(self, input_size: int, hidden_size: int) -> dict | None: ...

    def run_native(self, native, xs, state, config, g, **padding) -> dict: ...

    def run_native_chunks(self, native, chunks, state, config, g) -> list: ...  # the framework's own carry

    def gradients_native(self, native, xs, state, config, g, cotangents, **padding) -> dict: ...

    def optimizer_step_native(self, native, xs, state, config, g, cotangents, optimizer, **padding) -> dict: ...

    def set_compiled(self, compiled: bool) -> None: ...  # ``TestPlan.compiles`` systems: jax.jit or eager

    def release(self) -> bool: ...  # let go of what ``built_once`` kept: True if anything was


RUNNER_METHODS = tuple(name for name in Runner.__dict__ if not name.startswith("_"))


class Adapter(TestPlan, Mapping):
    """A system: its mapping (``Mapping``), what it is checked on (``TestPlan``), and its runner, here."""

    # The framework's mapping, a class of its own that the system's class derives from: the first pure one
    # (NumPy only, ``rnn_equivalence.frameworks.mapping.is_pure``) in its MRO, found on registration; a system
    # without one is refused there. ``convert.mapping(name)`` is it, with the system's declared attributes
    # (``mapping_of``): no runner, no plan.
    mapping_class: type[Mapping] | None = None
    distributions: tuple[str, ...] = ()  # pip distributions whose versions identify what was run
    # A converted system (``TestPlan.converter``): the distributions besides ``distributions`` that the
    # converted model depends on (the onnx package that writes it); part of the conversion cache's key.
    converter_distributions: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # top-level modules the adapter imports
    # Environment the framework must be imported under (Keras's backend); where this
    # process differs, frameworks.load runs the framework in a child process.
    process_env: dict[str, str] = {}
    # The environment the system's tool lives in, where it cannot be installed beside the others: the name
    # of its nox session (noxfile.py). "" for the main environment. A run that does not name such a system
    # leaves it out (rnn_equivalence.harness.selection), and the report says where it runs.
    environment: str = ""
    # A setting the suite runs the system with and its verdict holds under, which a user must set too where
    # the system's default differs (docs/ANSWERS.md and ``compare`` then answer "Only if"); "" for none.
    runs_with: str = ""
    # Padded batches (rnn_equivalence.reference.padding): the sides of padding the system takes
    # (``TestPlan.padded_configs`` says in which configurations it is compared), and its name for the lengths.
    padding_sides: tuple[str, ...] = ("post",)
    lengths_name: str = "lengths"
    # Gradients (tests/equivalence/test_gradients.py): the framework's own automatic differentiation, by
    # name ("torch.autograd", "tf.GradientTape", "jax.vjp"); "" for a system without one (the NumPy
    # formulas, ONNX runtimes, exported graphs), which the gradient tests leave out by name.
    autodiff: str = ""
    # The optimizers the system steps with its framework's own implementation ("sgd", "adam"), and the
    # framework's name for each (e.g. "torch.optim.Adam"), for the messages and the report.
    optimizers: dict[str, str] = {}
    # Where the framework's Adam adds epsilon (rnn_equivalence.reference.optimizers.EPSILON_PLACEMENTS): after the bias
    # correction (PyTorch, optax) or before it (Keras's "epsilon hat").
    adam_epsilon: str = "after_correction"
    # The dtype the framework's optimizer holds its hyperparameters in, where it is not the weights'
    # (Keras: floatx, float32 by default, so a float64 step uses lr rounded to float32); "": the weights'.
    optimizer_constants_dtype: str = ""
    # Known upstream bugs are not declared here: they are rows of the one table, rnn_equivalence.harness.known_issues.

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            if cls.name in ADAPTERS:
                raise TypeError(f"adapter name {cls.name!r} is taken by {ADAPTERS[cls.name].__qualname__}")
            if cls.family not in GATES:
                raise TypeError(f"{cls.__qualname__}: family must be one of {sorted(GATES)}, got {cls.family!r}")
            if cls.family != "rnn" and cls.activations == Adapter.activations:
                cls.activations = (GATED,)  # a gated cell inheriting the vanilla defaults: its own defaults
            cls.supported_options = frozenset(name for names in cls.options for name in names.split("+") if name)
            if cls.family == "rnn" and not cls.layer and cls.configs == (CELL,):
                cls.configs = (CELL, NO_BIAS)  # every vanilla cell maps a bias-free cell too
            cls.mapping_class = next((base for base in cls.__mro__ if base is not Mapping and is_pure(base)), None)
            if cls.mapping_class is None:
                raise TypeError(f"{cls.__qualname__}: a system derives from its framework's mapping, a class that "
                                f"derives from Mapping alone (see docs/LAYOUT.md, Adding a framework)")
            ADAPTERS[cls.name] = cls

    def start(self) -> None:
        """Import the framework (each adapter's own ``start`` calls ``import_framework``); until then
        the adapter is its mapping alone, and instantiating it imports nothing."""

    def describe(self) -> str:
        return self.cell

    def versions(self) -> dict[str, str]:
        return {dist: distribution_version(dist) for dist in self.distributions}

    def own_weight_shapes(self, input_size: int, hidden_size: int) -> dict[str, tuple[int, ...]] | None:
        """Names and shapes of the weights the framework itself creates for ``layout_config``,
        read from a freshly built cell or layer, so a test can hold ``native_spec`` against
        the framework. None where there is no framework object (the mapping is ours)."""
        return None

    compiled = True  # a ``compiles`` system runs under jax.jit unless ``set_compiled(False)``

    def set_compiled(self, compiled: bool) -> None:
        if not self.compiles:
            raise NotImplementedError(f"{self.cell}: runs eagerly only; there is no compiled run to switch off")
        self.compiled = bool(compiled)

    def compile_key(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """What a compiled run's trace depends on besides its arguments' values (``rnn_equivalence.frameworks.autodiff.
        JaxVjp``): ``structure_key``; None where the run is eager."""
        if not (self.compiles and self.compiled):
            return None
        return self.structure_key(native, xs, state, config, g, padding)

    def structure_key(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> tuple:
        """What the framework objects of a run depend on besides the weights' and inputs' values: the
        system, configuration, activations, dtype, the shapes of inputs, state and weights. The padding's
        pattern is part of it (a mask is a constant of a trace), and so are the activations a gated cell
        is given for ``g`` (the functions or names of ``activation_arguments``, which a test may exchange)."""
        mask = None if padding is None else np.asarray(padding.mask(xs.shape[0]) if hasattr(padding, "mask")
                                                        else padding, bool)
        activations = tuple((self.activation_arguments(g) or {}).items()) if self.family != "rnn" else ()
        return (self.name, config, g, activations, np.asarray(xs).dtype.name, np.shape(xs),
                tuple(sorted((key, np.shape(value)) for key, value in (state or {}).items())),
                tuple(sorted((name, np.shape(value)) for name, value in native.items())),
                None if mask is None else (mask.shape, mask.tobytes()))

    BUILT_CACHE_SIZE = 1024  # built objects kept per adapter, the least recently used dropped

    def built_once(self, key, build):
        """``build()`` (the framework's objects and the functions running them), once per key
        (``compile_key``, or ``structure_key`` where what is reused is not compiled), so that what was
        built or compiled for that key (``rnn_equivalence.frameworks.autodiff.JaxVjp``, a jitted step, a converter's
        traced model) is reused; every time where the key is None (an eager run). The least recently
        used are dropped past ``BUILT_CACHE_SIZE``."""
        if key is None:
            return build()
        built = self.__dict__.setdefault("_built", OrderedDict())
        if key not in built:
            built[key] = build()
            while len(built) > self.BUILT_CACHE_SIZE:
                built.popitem(last=False)
        built.move_to_end(key)
        return built[key]

    def release(self) -> bool:
        """Let go of what ``built_once`` kept (layers, compiled functions, converted models' runtimes), in the
        process that built it (a Runner method: forwarded to a child process where the framework runs
        there), and collect it; True if anything was kept. The suite calls it after a system's last test,
        so that memory holds one system's objects at a time (conftest.py's teardown)."""
        if not self.__dict__.pop("_built", None):
            return False
        import gc

        gc.collect()
        return True

    # --- running ------------------------------------------------------------------
    def arrange(self, result: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """The canonical results of ``rnn_equivalence.reference.stack.drive`` in this system's own shapes.
        A cell adapter returns every state over time: {"h": (T, batch, H)}, and "c"."""
        arranged = {"h": result["output"]}
        if "c_output" in result:
            arranged["c"] = result["c_output"]
        return arranged

    @classmethod
    def reads_reversed(cls, config: LayerConfig) -> bool:
        """True where the system reads x_T..x_1 and reports in that order (Keras ``go_backwards``)."""
        return False

    def activation_arguments(self, spec: str) -> dict | None:
        """A system that builds its cell from activation arguments: their values for an activation spec,
        by the framework's own names, in the order f, g (Keras's recurrent_activation and activation,
        Flax's gate_fn and activation_fn); None where activations are fixed or travel otherwise. The
        tests exchange them (test_mutations.py)."""
        return None

    def run_native(self, native: Native, xs: np.ndarray, state, config: LayerConfig, g: str) -> dict:
        """Run the framework on its own weights; outputs as ``arrange`` shapes them. A system with
        ``padded_configs`` takes ``padding=`` (a ``rnn_equivalence.reference.padding.Padding`` or None) too."""
        raise NotImplementedError

    def run(self, params, xs, state=None, config: LayerConfig | None = None,
            padding: Padding | None = None) -> dict[str, np.ndarray]:
        """Map ``params`` (a cell or a stack) to native weights and run the framework."""
        stack = StackParams.of(params)
        config = config or (CELL if stack.has_bias else replace(CELL, bias=False))
        self.check_params(stack, config)
        xs = np.asarray(xs)
        if padding is None:
            return self.run_native(self.to_native(stack, config), xs, state, config, stack.activation)
        self.check_padding(padding, xs)
        return self.run_native(self.to_native(stack, config), xs, state, config, stack.activation, padding=padding)

    # --- gradients and one optimizer step ------------------------------------------
    def gradients_native(self, native: Native, xs: np.ndarray, state, config: LayerConfig, g: str,
                         cotangents: dict, padding: Padding | None = None) -> dict:
        """The framework's own gradients of the loss sum_k <outputs[k], cotangents[k]>, where ``outputs``
        is what ``run_native`` returns for the same arguments (same keys, shapes and dtype as
        ``cotangents``): {"weights": {native name: array shaped like native[name]}, "inputs": shaped
        like ``xs`` (T, batch, I), "state": {key: shaped like state[key]} ({} when ``state`` is None)}.
        Computed by ``autodiff``, in the dtype of ``xs``."""
        raise NotImplementedError

    def optimizer_step_native(self, native: Native, xs: np.ndarray, state, config: LayerConfig, g: str,
                              cotangents: dict, optimizer: dict, padding: Padding | None = None) -> Native:
        """One step of the framework's own optimizer from the weights ``native`` on the loss of
        ``gradients_native``: the new native weights. ``optimizer``: {"name": "sgd" or "adam",
        "learning_rate": lr} and, for Adam, any of "beta_1", "beta_2", "epsilon" (the framework's own
        default where one is left out)."""
        raise NotImplementedError

    @property
    def autodiff_runtime(self):
        """The one runtime of this system's autodiff library (``rnn_equivalence.frameworks.autodiff``), shared by every
        adapter on it; a system without one refuses, by name."""
        if not self.autodiff:
            raise NotImplementedError(f"{self.cell}: no automatic differentiation of what this system runs")
        from rnn_equivalence.frameworks.autodiff import runtime

        return runtime(self.autodiff)

    def check_cotangents(self, outputs: dict, cotangents) -> None:
        """One cotangent per output of the run (``outputs``: the run's outputs, anything with a shape),
        each in its output's shape: or an error naming them (a framework's own error would not, and a
        reshape would take a wrong one of the right size)."""
        if not isinstance(cotangents, dict) or set(cotangents) != set(outputs):
            got = sorted(cotangents) if isinstance(cotangents, dict) else type(cotangents).__name__
            raise ValueError(f"{self.cell}: cotangents: expected one per output {sorted(outputs)}, got {got}")
        for key, output in outputs.items():
            if np.shape(cotangents[key]) != tuple(output.shape):
                raise ValueError(f"{self.cell}: cotangents[{key!r}]: expected the output's shape "
                                 f"{tuple(output.shape)}, got {np.shape(cotangents[key])}")

    def optimizer_arguments(self, optimizer, names: dict[str, str] | None = None) -> tuple[str, dict]:
        """The optimizer's name and the hyperparameters given, by the framework's own ``names`` (the
        suite's name -> the framework's; the same where not listed). A hyperparameter the optimizer
        does not take is refused, not dropped: it would make another optimizer than the one asked for."""
        name = optimizer.get("name") if isinstance(optimizer, dict) else None
        if name not in self.optimizers:
            raise ValueError(f"{self.cell}: optimizer: expected one of {sorted(self.optimizers)}, got {name!r}")
        unknown = sorted(set(optimizer) - {"name", *OPTIMIZER_ARGUMENTS[name]})
        if unknown:
            raise ValueError(f"{self.cell}: {self.optimizers[name]}: unknown argument(s) {unknown}; expected some "
                             f"of {list(OPTIMIZER_ARGUMENTS[name])}")
        names = names or {}
        return name, {names.get(key, key): float(value) for key, value in optimizer.items() if key != "name"}

    def gradients(self, params, xs, state, config: LayerConfig, cotangents: dict,
                  padding: Padding | None = None) -> dict:
        """Map ``params`` to native weights, differentiate with the framework, and map the weights'
        gradients back to the canonical layout (``gradients_from_native``): {"params": StackParams of
        gradients, "inputs": (T, batch, I), "state": {key: (L*D, batch, H)}}."""
        stack = StackParams.of(params)
        self.check_params(stack, config)
        xs = np.asarray(xs)
        extra = {}
        if padding is not None:
            self.check_padding(padding, xs)
            extra["padding"] = padding
        native = self.to_native(stack, config)
        result = self.gradients_native(native, xs, state, config, stack.activation, cotangents, **extra)
        return {"params": self.gradients_from_native(result["weights"], config), "inputs": result["inputs"],
                "state": result["state"]}

    def optimizer_step(self, params, xs, state, config: LayerConfig, cotangents: dict, optimizer: dict,
                       padding: Padding | None = None) -> StackParams:
        """One step of the framework's optimizer from ``params``: the new weights, mapped back by
        ``from_native`` (a stored sum b_x + b_h comes back as b_x, with b_h = 0)."""
        stack = StackParams.of(params)
        self.check_params(stack, config)
        self.optimizer_arguments(optimizer)  # refused before a run
        extra = {"padding": padding} if padding is not None else {}
        new = self.optimizer_step_native(self.to_native(stack, config), np.asarray(xs), state, config,
                                         stack.activation, cotangents, optimizer, **extra)
        return self.from_native(new, config)

    # --- padded batches and chunked runs --------------------------------------------
    @classmethod
    def padded_output(cls, config: LayerConfig) -> str:
        """What the system reports on a padded step: "zeros" or "repeat" (``rnn_equivalence.reference.padding``)."""
        return "zeros"

    def check_padding(self, padding: Padding, xs: np.ndarray) -> None:
        """A padded batch this system takes, or an error naming the system's own argument."""
        if not self.padded_configs:
            raise ValueError(f"{self.cell}: padded batches are not supported by this system (it takes no "
                             f"{self.lengths_name}); run each sequence to its own length instead")
        if not isinstance(padding, Padding):
            raise TypeError(f"{self.cell}: {self.lengths_name}: expected a rnn_equivalence.reference.padding.Padding, "
                            f"got {type(padding).__name__}")
        if padding.side == HOLES and HOLES not in self.padding_sides:
            raise ValueError(f"{self.cell}: {self.lengths_name}: expected each element's real steps as one run "
                             f"(padding on the side(s) {self.padding_sides}); got a mask with holes (masked steps "
                             f"between real ones), which lengths cannot say")
        if padding.side not in self.padding_sides:
            raise ValueError(f"{self.cell}: {self.lengths_name}: expected padding on the side(s) "
                             f"{self.padding_sides}, got {padding.side!r}-padding")
        if xs.ndim == 3:  # other inputs are refused by check_call, naming them
            padding.check(xs.shape[0], xs.shape[1], f"{self.cell}: {self.lengths_name}")

    def returned_state(self, outputs: dict, config: LayerConfig) -> dict[str, np.ndarray]:
        """The final state among a run's outputs, as the initial state of the next call
        ({"h": (L*D, batch, H), ...}): how a user carries state across calls."""
        return {key: outputs[f"{key}_n"] for key in state_keys(self.family)}

    def run_chunks(self, params, chunks, state, config: LayerConfig) -> list[dict[str, np.ndarray]]:
        """Run consecutive chunks of one sequence, each call from the state the previous returned;
        every call's outputs. A system with its own carry (Keras ``stateful=True``) overrides this."""
        outputs = []
        for xs in chunks:
            outputs.append(self.run(params, xs, state, config))
            state = self.returned_state(outputs[-1], config)
        return outputs

    # --- the checks, written once ------------------------------------------------
    def check_call(self, native: Native, xs, state, config: LayerConfig, g: str) -> tuple[np.dtype, int]:
        """Validate a run's arguments; return their common dtype and the hidden size.

        Sizes are read from the weights (H from ``recurrent_kernel``) and the inputs (I),
        and the argument that disagrees with them is named, in the framework's own names.
        """
        if g not in self.activations:
            raise ValueError(f"{self.cell}: activation {g!r} is not supported; expected one of {self.activations}")
        if xs.ndim != 3:
            raise ValueError(f"{self.cell}: inputs: expected shape (T, batch, input_size), got {xs.shape}")
        dtype = xs.dtype
        if dtype.name not in self.dtypes:
            raise TypeError(f"{self.cell}: inputs: expected dtype in {self.dtypes}, got {dtype}")
        name = self.recurrent_kernel(config)
        if not isinstance(native, dict) or name not in native:
            expected = sorted(self.native_spec(config, xs.shape[2], 1))
            got = sorted(native) if isinstance(native, dict) else type(native).__name__
            raise ValueError(f"{self.cell}: expected weights {expected}, got {got} (missing {name!r})")
        H, where = self.read_hidden_size(native, config)
        options, P = self.read_options(native, config)
        source = f"input_size={xs.shape[2]} from the inputs, hidden_size={H} from {where}"
        extra = {"options": options, "output_size": P} if options else {}  # adapters without options take none
        check_native(self.cell, native, self.native_spec(config, xs.shape[2], H, **extra), dtype, source)
        if state is None:
            return dtype, H
        if not isinstance(state, dict) or not set(state) <= set(state_keys(self.family)):
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"{self.cell}: initial state: expected a dict with keys {list(state_keys(self.family))}"
                             f" (or None), got {got}")
        LD = "num_layers*num_directions" if self.layer else "1"
        for key, value in state.items():
            value = np.asarray(value)
            size, symbol = (P, self.projection_name) if P and key == "h" else (H, "hidden_size")
            expected = (config.num_layers * config.num_directions, xs.shape[1], size)
            if value.shape != expected:
                raise ValueError(f"{self.cell}: {self.state_names[key]}: expected shape ({LD}, batch, {symbol}) = "
                                 f"{expected} (batch from the inputs, {symbol}={size} from "
                                 f"{where if symbol == 'hidden_size' else 'the projection weights'}), "
                                 f"got {value.shape}")
            if value.dtype != dtype:
                raise TypeError(f"{self.cell}: {self.state_names[key]}: expected dtype {dtype} (the inputs'), "
                                f"got {value.dtype}")
        return dtype, H

    def cell_state(self, state, batch: int, hidden_size: int, dtype, output_size: int | None = None
                   ) -> dict[str, np.ndarray]:
        """A cell adapter's initial state as (batch, H) arrays (h: (batch, P) with a projection),
        zeros where not given."""
        size = {"h": output_size or hidden_size, "c": hidden_size}
        return {key: np.zeros((batch, size[key]), dtype) if state is None or key not in state
                else np.asarray(state[key])[0] for key in state_keys(self.family)}


def states_with_last_c(result: dict, family: str) -> dict[str, np.ndarray]:
    """A cell run by an operator that returns every h_t but only the final c (the ONNX LSTM's Y_c):
    {"h": (T, batch, H)}, and for an LSTM {"c_last": (batch, H)}."""
    arranged = {"h": result["output"]}
    if family == "lstm":
        arranged["c_last"] = result["c_n"][0]
    return arranged


def import_framework(module: str, adapter_name: str):
    """Import a framework module, or raise an ImportError that names the adapter."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"adapter {adapter_name!r} needs {module!r}, which failed to import: {error}") from error


def distribution_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def gate_and_candidate(family: str, spec: str, cell: str, argument: str) -> tuple[str, str]:
    """A gated spec's f and g, for a framework with one function for the candidate and the output (an
    LSTM's g and h: Keras's ``activation``, Flax's ``activation_fn``): a spec with h other than g is
    refused, naming that ``argument``."""
    f, g, *h = activation_names(family, spec)
    if h and h != [g]:
        raise ValueError(f"{cell}: activation {spec!r}: {argument} is both the candidate's (g) and the output's (h), "
                         f"so h must equal g")
    return f, g


# Mutation helpers: the ways a weight mapping goes wrong in practice.
def transposed(name: str):
    return lambda native: {**native, name: native[name].T.copy()}


def swapped(a: str, b: str):
    return lambda native: {**native, a: native[b], b: native[a]}


def scaled(name: str, factor: float):
    """factor 0 drops a tensor (a forgotten bias), factor 2 doubles it (a bias added twice), in its dtype (NumPy
    makes ml_dtypes' bfloat16 times a float float32)."""
    return lambda native: {**native, name: (native[name] * factor).astype(native[name].dtype)}


def swapped_gates(name: str, a: int, b: int, gates: int, axis: int = -1):
    """Exchange gate blocks a and b of a stacked tensor (the classic converter bug)."""

    def mutate(native):
        blocks = np.split(native[name], gates, axis=axis)
        blocks[a], blocks[b] = blocks[b], blocks[a]
        return {**native, name: np.concatenate(blocks, axis=axis)}

    return mutate


def swapped_names(a: str, b: str, where: str = "suffix"):
    """Exchange every weight tagged ``a`` with its twin tagged ``b`` (directions or layers swapped)."""

    def mutate(native):
        out = dict(native)
        for name in native:
            if where == "suffix" and name.endswith(a):
                twin = name[: -len(a)] + b
            elif where == "prefix" and name.startswith(a):
                twin = b + name[len(a):]
            else:
                continue
            out[name], out[twin] = native[twin], native[name]
        return out

    return mutate
