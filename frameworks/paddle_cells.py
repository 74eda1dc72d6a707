"""PaddlePaddle's layers (``paddle.nn.SimpleRNN``, ``paddle.nn.LSTM``, ``paddle.nn.GRU``) and cells
(``SimpleRNNCell``, ``LSTMCell``, ``GRUCell``), run in Paddle's own environment (the nox session ``paddle``).

Both layouts (paddlepaddle 3.3.1, paddle/nn/layer/rnn.py, read in the installed package):

    canonical: W_x (G*H, I), W_h (G*H, H), b_x (G*H), b_h (G*H), gates i f g o (LSTM), r z n (GRU)
    paddle:    weight_ih (G*H, I), weight_hh (G*H, H), bias_ih (G*H), bias_hh (G*H)

so PyTorch's names, shapes and orientation (``matmul(x, weight_ih, transpose_y=True)``). The gate order is
PyTorch's (PaddlePaddle/Paddle#23116): ``LSTMCell.forward`` splits the gates into 4 and reads i = [0], f = [1],
the candidate c~ = [2], o = [3]; ``GRUCell.forward`` splits each side into r, z, c and computes
``c = tanh(x_c + r * h_c)`` ("apply reset gate after mm": reset after, b_hn inside r * (...), PyTorch's
variant) and ``h = (h_prev - c) * z + c`` = z * h_prev + (1 - z) * c. The layers name each layer's weights
``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``_reverse`` for the backward
direction (``direction="bidirect"``), layer k > 0 reading D*H inputs: PyTorch's layer names, so the mapping is
PyTorch's (``TorchMapping``), unchanged, NumPy only.

The layer keeps each of those parameters a second time in its state_dict, as its cells' own
(``0.cell.weight_ih`` for one direction, ``0.cell_fw.weight_ih`` / ``0.cell_bw.weight_ih`` for two;
PaddlePaddle/Paddle#45412): ``RNNBase.__init__`` ``setattr``s the cells' parameter objects under the layer's
names, so a copy *is* its layer's parameter (one tensor, one storage: tests/equivalence/test_paddle.py), and
``named_parameters`` lists each once, by the layer's name. The suite loads the layer's names only.

What the runner refuses (measured in tests/equivalence/test_paddle.py): a layer without biases
(``bias_ih_attr=False, bias_hh_attr=False``; PaddlePaddle/Paddle#70231, open). Its cells keep zero biases
(``stop_gradient``) all the same, so the layer counts 4 parameters per cell and takes the fused ``rnn`` kernel,
while its list of names leaves the biases out: one layer, one direction, kills the process in paddlepaddle
3.3.1's CPU kernel (SIGSEGV); two layers or two directions raise an IndexError on construction
(``flatten_parameters``). The layers are therefore run with biases only (a bias-free configuration is refused,
naming why); the cells take ``bias_ih_attr=False`` and run, on their fixed zero biases.

Gradients are ``paddle.grad`` of the very forward that runs (``rnn_equivalence.frameworks.autodiff.PaddleGrad``),
one optimizer step ``paddle.optimizer.SGD`` or ``paddle.optimizer.Adam`` (its defaults: beta1 0.9, beta2 0.999,
epsilon 1e-8, as PyTorch's) on the layer's parameters by their layer names.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rnn_equivalence.frameworks.base import Adapter, LayerConfig, Native, import_framework, scaled
from rnn_equivalence.frameworks.pytorch import (
    TorchGRU, TorchGRUCell, TorchLayerMapping, TorchLSTM, TorchLSTMCell, TorchMapping, TorchRNN, TorchRNNCell,
)

ENVIRONMENT = "paddle"  # the nox session whose environment holds paddlepaddle

# Why a bias-free layer is refused (the module's docstring; tests/equivalence/test_paddle.py reproduces it).
NO_BIAS_LAYER = ("paddlepaddle 3.3.1's CPU rnn kernel crashes the process (SIGSEGV) on such a layer, or its "
                 "construction fails (PaddlePaddle/Paddle#70231); run it with zero biases instead")


class PaddleMapping(TorchMapping):
    """Paddle's cells: PyTorch's names and layout (the module's docstring)."""


class PaddleLayerMapping(TorchLayerMapping):
    """Paddle's layers: PyTorch's layer names (``_l{k}``, ``_reverse``), the cells' copies not among them."""


# --- the runners: Paddle's own layers, autograd and optimizers -------------------------------------------


class PaddleRunner:
    """Running a Paddle system (the ``Runner`` methods); ``forward`` serves the run, the gradients and the
    optimizer step alike."""

    def start(self):
        self.paddle = import_framework("paddle", self.name)
        self.paddle.set_device("cpu")

    def _class(self):
        return getattr(self.paddle.nn, self.cell.split(".")[-1])

    def _options(self, g: str) -> dict:
        return {"activation": g} if self.family == "rnn" else {}  # SimpleRNN's tanh or relu

    def _built(self, dtype, make):
        """``make()`` with Paddle's default dtype set to ``dtype`` (Paddle creates parameters in it), restored."""
        paddle = self.paddle
        before = paddle.get_default_dtype()
        paddle.set_default_dtype(dtype.name)
        try:
            return make()
        finally:
            paddle.set_default_dtype(before)

    def _load(self, module, native: Native) -> list:
        """The native weights into ``module``'s parameters by their names; those parameters, in native's order."""
        weights = [getattr(module, name) for name in native]
        for weight, name in zip(weights, native):
            weight.set_value(np.ascontiguousarray(native[name]))
        return weights

    def forward(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        """(outputs by name, as tensors; the module's parameters, in native's order; the leaves {"inputs": (T,
        batch, I) as ``xs``, "state": {key: as ``state[key]``}}), every leaf requiring grad."""
        raise NotImplementedError

    def _tensor(self, array):
        tensor = self.paddle.to_tensor(np.ascontiguousarray(array))
        tensor.stop_gradient = False
        return tensor

    def run_native(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None) -> dict:
        extra = {"padding": padding} if padding is not None else {}
        with self.paddle.no_grad():
            outputs, _, _ = self.forward(native, xs, state, config, g, **extra)
        return {key: value.numpy() for key, value in outputs.items()}

    def gradients_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                         padding=None) -> dict:
        extra = {"padding": padding} if padding is not None else {}
        outputs, weights, leaves = self.forward(native, xs, state, config, g, **extra)
        sources = [*weights, leaves["inputs"], *leaves["state"].values()]
        _, grads = self.autodiff_runtime.vjp(lambda: outputs, sources, cotangents, self.check_cotangents)
        n = len(weights)
        return {"weights": {name: grad.numpy() for name, grad in zip(native, grads[:n])},
                "inputs": grads[n].numpy(),
                "state": {key: grad.numpy() for key, grad in zip(leaves["state"], grads[n + 1:])}}

    def _optimizer(self, optimizer: dict, weights: list):
        """Paddle's optimizer for ``optimizer`` on ``weights``, by Paddle's names (learning_rate; beta_1, beta_2:
        beta1, beta2; epsilon), Paddle's own defaults for those left out: plain SGD and Adam (no weight decay,
        no gradient clip, no lazy or multi-precision mode)."""
        paddle = self.paddle
        name, arguments = self.optimizer_arguments(optimizer, {"beta_1": "beta1", "beta_2": "beta2"})
        if name == "sgd":
            return paddle.optimizer.SGD(parameters=weights, weight_decay=None, **arguments)
        return paddle.optimizer.Adam(parameters=weights, weight_decay=None, lazy_mode=False, multi_precision=False,
                                     amsgrad=False, **arguments)

    def optimizer_step_native(self, native: Native, xs, state, config: LayerConfig, g: str, cotangents: dict,
                              optimizer: dict, padding=None) -> Native:
        self.optimizer_arguments(optimizer)  # refused before a run
        extra = {"padding": padding} if padding is not None else {}
        outputs, weights, _ = self.forward(native, xs, state, config, g, **extra)
        step = self._optimizer(optimizer, weights)  # fresh: no moments yet, step count 0
        step.clear_grad()
        self.autodiff_runtime.backward(lambda: outputs, cotangents, self.check_cotangents)
        step.step()
        return {name: weight.numpy().copy() for name, weight in zip(native, weights)}


class PaddleCellRunner(PaddleRunner):
    """``SimpleRNNCell``, ``LSTMCell``, ``GRUCell`` stepped over the sequence in Python, as a user steps them."""

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        cell = self._class()(input_size, hidden_size)
        return {name: tuple(p.shape) for name, p in cell.named_parameters()}

    def forward(self, native: Native, xs, state, config, g: str, padding=None):
        if padding is not None:
            self.check_padding(padding, xs)  # a cell takes no lengths: refused, naming them
        dtype, H = self.check_call(native, xs, state, config, g)
        no_bias = {} if config.bias else {"bias_ih_attr": False, "bias_hh_attr": False}  # zero, fixed biases
        cell = self._built(dtype, lambda: self._class()(xs.shape[2], H, **no_bias, **self._options(g)))
        weights = self._load(cell, native)
        inputs = self._tensor(xs)
        given = {key: self._tensor(value) for key, value in (state or {}).items()}  # (1, batch, H), as given
        carry = {key: given[key][0] if key in given else self.paddle.to_tensor(zeros)
                 for key, zeros in self.cell_state(None, xs.shape[1], H, dtype).items()}
        trace = {key: [] for key in carry}
        for t in range(xs.shape[0]):
            if self.family == "lstm":
                _, (h, c) = cell(inputs[t], (carry["h"], carry["c"]))
                carry = {"h": h, "c": c}
            else:
                _, h = cell(inputs[t], carry["h"])
                carry = {"h": h}
            for key, value in carry.items():
                trace[key].append(value)
        return ({key: self.paddle.stack(values) for key, values in trace.items()}, weights,
                {"inputs": inputs, "state": given})


class PaddleLayerRunner(PaddleRunner):
    """``SimpleRNN``, ``LSTM``, ``GRU`` called on the sequence, ``sequence_length`` where a batch is padded."""

    def own_weight_shapes(self, input_size: int, hidden_size: int):
        config = self.layout_config
        layer = self._class()(input_size, hidden_size, num_layers=config.num_layers,
                              direction="bidirect" if config.bidirectional else "forward")
        return {name: tuple(p.shape) for name, p in layer.named_parameters()}

    def arrange(self, result, config: LayerConfig):
        # time_major=False (Paddle's default) applies to the input and output, not to the final states.
        output = result["output"]
        arranged = {"output": output if config.option("time_major") else output.transpose(1, 0, 2),
                    "h_n": result["h_n"]}
        if "c_n" in result:
            arranged["c_n"] = result["c_n"]
        return arranged

    def forward(self, native: Native, xs, state, config: LayerConfig, g: str, padding=None):
        paddle = self.paddle
        if not config.bias:
            raise ValueError(f"{self.cell}: bias_ih_attr=False, bias_hh_attr=False: {NO_BIAS_LAYER}")
        dtype, H = self.check_call(native, xs, state, config, g)
        time_major = bool(config.option("time_major"))
        layer = self._built(dtype, lambda: self._class()(
            xs.shape[2], H, num_layers=config.num_layers, direction="bidirect" if config.bidirectional else "forward",
            time_major=time_major, **self._options(g)))
        weights = self._load(layer, native)
        leaf = self._tensor(xs)
        # Transposed in Paddle, not in NumPy, so that the gradient reaches the inputs in the canonical layout.
        inputs = leaf if time_major else paddle.transpose(leaf, [1, 0, 2])
        given = {key: self._tensor(state[key]) for key in ("h", "c")[:2 if self.family == "lstm" else 1]} \
            if state is not None else {}
        initial = None if state is None else (given["h"], given["c"]) if self.family == "lstm" else given["h"]
        lengths = None if padding is None else paddle.to_tensor(np.asarray(padding.lengths, np.int64))
        output, final = layer(inputs, initial, sequence_length=lengths)
        outputs = {"output": output, **({"h_n": final[0], "c_n": final[1]} if self.family == "lstm"
                                        else {"h_n": final})}
        return outputs, weights, {"inputs": leaf, "state": given}


# --- the systems: each a mapping, a runner and its test plan ------------------------------------------


class PaddleAdapter(Adapter):
    """A Paddle system: what every one declares."""

    environment = ENVIRONMENT
    distributions = ("paddlepaddle",)
    requires = ("paddle",)
    dtypes = ("float32", "float64")
    autodiff = "paddle.grad"
    optimizers = {"sgd": "paddle.optimizer.SGD", "adam": "paddle.optimizer.Adam"}
    # The installed include/paddle/phi/kernels/funcs/adam_functors.h (3.3.1): lr * sqrt(1 - beta2^t) / (1 - beta1^t)
    # * m / (sqrt(v) + epsilon * sqrt(1 - beta2^t)), which is lr * m_hat / (sqrt(v_hat) + epsilon): epsilon after the
    # correction. test_optimizer.py tells the two apart: with "before_correction" here 9 of its 12 Adam cases fail.
    adam_epsilon = "after_correction"
    state_names = {"h": "initial_states", "c": "initial_states[1]"}
    lengths_name = "sequence_length"


class PaddleCell(PaddleCellRunner, PaddleMapping, PaddleAdapter):
    """The cells' plan: ``TestPlan``'s defaults; the mistakes PyTorch's cells must catch (same names)."""

    state_names = {"h": "states", "c": "states[1]"}


def _with_biases(configs) -> tuple[LayerConfig, ...]:
    """A plan's configurations, each with biases (NO_BIAS_LAYER: a bias-free one keeps its structure, biases
    added), once each; an empty plan is an error."""
    kept = tuple(dict.fromkeys(replace(c, bias=True) for c in configs))
    if not kept:
        raise ValueError("a Paddle layer's plan: no configurations")
    return kept


def _time_major(config: LayerConfig) -> LayerConfig:
    """PyTorch's configuration in Paddle's option: batch_first -> time_major = not batch_first."""
    options = tuple(("time_major", not value) if key == "batch_first" else (key, value)
                    for key, value in config.options if key != "enforce_sorted")
    return LayerConfig(config.num_layers, config.bidirectional, bias=config.bias,
                       initial_state=config.initial_state, options=options)


class PaddleLayer(PaddleLayerRunner, PaddleLayerMapping, PaddleAdapter):
    """The layers' plan: PyTorch's layers' configurations in Paddle's ``time_major``, with biases (NO_BIAS_LAYER)."""

    layout_config = LayerConfig(2, True)
    mutation_config = LayerConfig(3, True, options=(("time_major", True),))
    padded_configs = (LayerConfig(1, False, options=(("time_major", True),)),
                      LayerConfig(2, True, options=(("time_major", False),)))
    chunked_configs = (LayerConfig(2, False, options=(("time_major", True),)),)


def _layer_plan(torch_class) -> tuple[tuple[LayerConfig, ...], dict]:
    """PyTorch's layer's configurations in Paddle's options, and its mistakes (no projection here) with a bias
    dropped and one doubled, which PyTorch's gated layers leave to their cells."""
    mutations = {k: m for k, m in torch_class.mutations.items() if "weight_hr" not in k}
    mutations.setdefault("bias_hh_l2_reverse dropped", scaled("bias_hh_l2_reverse", 0.0))
    mutations["bias_ih_l1 doubled"] = scaled("bias_ih_l1", 2.0)
    return _with_biases(tuple(map(_time_major, torch_class.configs))), mutations


class PaddleSimpleRNNCell(PaddleCell):
    name = "paddle-cell"
    cell = "paddle.nn.SimpleRNNCell"
    family = "rnn"
    activations = ("tanh", "relu")  # SimpleRNNCell accepts only these
    mutations = TorchRNNCell.mutations


class PaddleLSTMCell(PaddleCell):
    name = "paddle-cell-lstm"
    cell = "paddle.nn.LSTMCell"
    family = "lstm"
    mutations = TorchLSTMCell.mutations


class PaddleGRUCell(PaddleCell):
    name = "paddle-cell-gru"
    cell = "paddle.nn.GRUCell"
    family, variant = "gru", "reset_after"
    mutations = TorchGRUCell.mutations


class PaddleSimpleRNN(PaddleLayer):
    name = "paddle-rnn"
    cell = "paddle.nn.SimpleRNN"
    family = "rnn"
    activations = ("tanh", "relu")
    configs, mutations = _layer_plan(TorchRNN)


class PaddleLSTM(PaddleLayer):
    name = "paddle-lstm"
    cell = "paddle.nn.LSTM"
    family = "lstm"
    configs, mutations = _layer_plan(TorchLSTM)  # no proj_size: Paddle keeps its weight_ho in the cells only


class PaddleGRU(PaddleLayer):
    name = "paddle-gru"
    cell = "paddle.nn.GRU"
    family, variant = "gru", "reset_after"
    configs, mutations = _layer_plan(TorchGRU)
