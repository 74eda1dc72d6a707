"""The vector-Jacobian product of each autodiff library, written once and shared by every adapter on it.

A system's gradients are its framework's own: the forward the suite runs (``run_native``'s), then
the library's reverse mode with the test's cotangents (``Adapter.gradients_native``). What differs
between frameworks is how a forward and its sources are built; what a library does with them is
the same for every adapter on it, and lives here:

    runtime(name).vjp(forward, sources, cotangents, check) -> (outputs, gradients of the sources)

``forward()`` returns the outputs by name (the library's tensors); ``sources`` is what is
differentiated (a nested dict or list of the library's tensors or variables; JAX: the arguments of
``forward``); ``check(outputs, cotangents)`` refuses cotangents that do not fit the outputs
(``Adapter.check_cotangents``: one per output, in its shape). Each cotangent is taken in its
output's dtype (a framework that computed a float64 run in float32 gets float32 cotangents). A
source no output reaches gets zeros, never None.

Libraries are imported on first use, never here.
"""

from __future__ import annotations

import importlib
from collections import OrderedDict

import numpy as np


class TensorflowTape:
    name = "tf.GradientTape"

    def __init__(self):
        self.tf = importlib.import_module("tensorflow")

    def vjp(self, forward, sources, cotangents, check, watch=None):
        """``watch``: the tensors to watch (default: every source; trainable variables are watched anyway)."""
        tf = self.tf
        with tf.GradientTape() as tape:
            tape.watch(tf.nest.flatten(sources) if watch is None else watch)
            outputs = forward()
        check(outputs, cotangents)
        keys = sorted(outputs)
        seeds = [tf.constant(np.asarray(cotangents[key]), dtype=outputs[key].dtype) for key in keys]
        grads = tape.gradient([outputs[key] for key in keys], sources, output_gradients=seeds,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return outputs, grads


class OutputsAndSeeds:
    """Reverse mode from the outputs with their cotangents as seeds, as torch.autograd and paddle.grad both take it;
    a library gives its tensor, gradient, zeros and backward calls (``_seed``, ``_grad``, ``_zeros_like``,
    ``_backward``)."""

    def seeds(self, outputs, cotangents, check) -> tuple[list, list]:
        """The outputs and their cotangents as two lists of tensors, in one order, each seed in its output's dtype."""
        check(outputs, cotangents)
        keys = list(outputs)
        return ([outputs[key] for key in keys],
                [self._seed(np.ascontiguousarray(cotangents[key]), outputs[key].dtype) for key in keys])

    def vjp(self, forward, sources, cotangents, check):
        """``sources``: a list of tensors the library differentiates (leaves, or a module's parameters)."""
        outputs = forward()
        outs, seeds = self.seeds(outputs, cotangents, check)
        grads = self._grad(outs, list(sources), seeds)
        return outputs, [self._zeros_like(s) if d is None else d for s, d in zip(sources, grads)]

    def backward(self, forward, cotangents, check):
        """Accumulate dL/dw into every parameter's ``.grad`` (what the library's optimizers step on)."""
        outs, seeds = self.seeds(forward(), cotangents, check)
        self._backward(outs, seeds)


class TorchAutograd(OutputsAndSeeds):
    name = "torch.autograd"

    def __init__(self):
        self.torch = importlib.import_module("torch")

    def _seed(self, array, dtype):
        if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which torch does not take: exact through float32
            array = array.astype(np.float32)
        return self.torch.as_tensor(array, dtype=dtype)

    def _grad(self, outs, sources, seeds):
        return self.torch.autograd.grad(outs, sources, grad_outputs=seeds, allow_unused=True)

    def _zeros_like(self, source):
        return self.torch.zeros_like(source)

    def _backward(self, outs, seeds):
        self.torch.autograd.backward(outs, grad_tensors=seeds)


class PaddleGrad(OutputsAndSeeds):
    """``sources``: tensors with ``stop_gradient=False``."""

    name = "paddle.grad"

    def __init__(self):
        self.paddle = importlib.import_module("paddle")

    def _seed(self, array, dtype):
        return self.paddle.to_tensor(array, dtype=dtype)

    def _grad(self, outs, sources, seeds):
        return self.paddle.grad(outs, sources, grad_outputs=seeds, allow_unused=True)

    def _zeros_like(self, source):
        return self.paddle.zeros_like(source)

    def _backward(self, outs, seeds):
        self.paddle.autograd.backward(outs, grad_tensors=seeds)


class JaxVjp:
    """jax.vjp, eager or compiled.

    Compiled (a ``key`` given): the forward and its pullback are each ``jax.jit``-ed once per key and
    reused, the weights, inputs and state being the compiled functions' arguments, which is how JAX
    users run a model. The key must say everything the function's trace depends on besides its
    arguments' values (the system, configuration, activation, dtype, shapes, a mask's pattern):
    the first function given for a key is the one compiled. Without a key, every call traces anew
    (what an eager user runs; ``TestPlan.compiles`` systems check it on one case)."""

    name = "jax.vjp"
    CACHE_SIZE = 1024  # compiled functions kept, the least recently used dropped (a few hundred KB each)

    def __init__(self):
        self.jax = importlib.import_module("jax")
        self._compiled: OrderedDict = OrderedDict()

    def jit(self, key, function):
        """``jax.jit(function)``, the one compiled for ``key`` (``function`` itself where key is None)."""
        if key is None:
            return function
        if key not in self._compiled:
            self._compiled[key] = self.jax.jit(function)
            while len(self._compiled) > self.CACHE_SIZE:
                self._compiled.popitem(last=False)
        self._compiled.move_to_end(key)
        return self._compiled[key]

    def vjp(self, forward, sources, cotangents, check, key=None):
        """``sources``: the arguments of the pure function ``forward(*sources)``; ``key``: compiled, as above."""
        if key is None:
            outputs, pullback = self.jax.vjp(forward, *sources)
            check(outputs, cotangents)
            return outputs, pullback(self._cast(cotangents, outputs))
        outputs = self.jit(("forward", key), forward)(*sources)
        check(outputs, cotangents)
        pull = self.jit(("pullback", key), lambda sources, seeds: self.jax.vjp(forward, *sources)[1](seeds))
        return outputs, pull(tuple(sources), self._cast(cotangents, outputs))

    def _cast(self, cotangents, outputs):
        return {key: self.jax.numpy.asarray(cotangents[key], output.dtype) for key, output in outputs.items()}


LIBRARIES = {runtime.name: runtime for runtime in (TensorflowTape, TorchAutograd, PaddleGrad, JaxVjp)}
_RUNTIMES: dict[str, object] = {}


def runtime(name: str):
    """The one runtime of the autodiff library ``name`` (``Adapter.autodiff``) in this process."""
    if name not in LIBRARIES:
        raise ValueError(f"no automatic differentiation {name!r}; expected one of {sorted(LIBRARIES)}")
    if name not in _RUNTIMES:
        _RUNTIMES[name] = LIBRARIES[name]()
    return _RUNTIMES[name]
