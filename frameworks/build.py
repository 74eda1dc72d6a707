"""The framework's own object holding canonical parameters, to hand to one's own code or converter.

    build(system, params, config=None, activation=None) -> the framework's object

- PyTorch systems (``torch``, ``torch-lstm``, ``torch-gru``: ``nn.RNNCell``/``LSTMCell``/``GRUCell``;
  ``torch-rnn``, ``torch-lstm-rnn``, ``torch-gru-rnn``: ``nn.RNN``/``LSTM``/``GRU`` with the stack's
  layers, directions, bias and projection): the module, its state_dict loaded strictly;
- Keras systems (``keras-*``, ``tf-keras-*``): a ``Sequential`` of the layers (a cell system: its layer
  class, which holds that cell), every cell's weights assigned, ``return_sequences=True``;
- ONNX systems (``onnx-ort*``, ``onnx-reference*``): the ``ModelProto`` of the node, weights as
  initializers, ``X`` of shape (T, batch, I) with T and batch symbolic;
- Flax cells: linen (``flax-linen*``) the module and its variables, ``(cell, {"params": ...})`` for
  ``cell.apply(variables, carry, x)``; nnx (``flax-nnx``, ``flax-nnx-lstm``, ``flax-nnx-gru``) the
  module, which holds its parameters.

The weights are the mapping's (``rnn_equivalence.frameworks.convert.write``): what the suite checks each system with.
Another system is refused by name, as is what the target cannot hold (``ConversionRefused``).
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.convert import ConversionRefused, mapping, write
from rnn_equivalence.reference.config import LayerConfig
from rnn_equivalence.reference.stack import StackParams

TORCH_CLASSES = {"torch": "RNNCell", "torch-lstm": "LSTMCell", "torch-gru": "GRUCell",
                 "torch-rnn": "RNN", "torch-lstm-rnn": "LSTM", "torch-gru-rnn": "GRU"}
KERAS_CLASSES = {"rnn": "SimpleRNN", "lstm": "LSTM", "gru": "GRU"}
FLAX_CELLS = {"flax-linen": "SimpleCell", "flax-linen-lstm": "LSTMCell", "flax-linen-gru": "GRUCell",
              "flax-nnx": "SimpleCell", "flax-nnx-lstm": "LSTMCell", "flax-nnx-gru": "GRUCell"}
ACTIVATIONS = {"tanh": "tanh", "relu": "relu", "sigmoid": "sigmoid", "identity": "linear"}  # Keras's names


def build(system: str, params, config: LayerConfig | None = None, activation: str | None = None):
    """``params`` (a ``CellParams`` or ``StackParams``) as ``system``'s own object (see the module's docstring)."""
    if not (system in TORCH_CLASSES or system in FLAX_CELLS or system.startswith(("keras-", "tf-keras", "onnx-"))):
        raise ConversionRefused(f"build: {system!r} is not built here; expected a PyTorch "
                                f"({', '.join(TORCH_CLASSES)}), Keras (keras-*, tf-keras-*), ONNX (onnx-*) or Flax "
                                f"cell ({', '.join(FLAX_CELLS)}) system")
    stack = StackParams.of(params)
    config = config or LayerConfig(stack.num_layers, stack.bidirectional, stack.has_bias)
    native = write(stack, system, config, activation)
    first = stack.layers[0][0]
    g = activation or first.activation
    if system in TORCH_CLASSES:
        return _torch(system, native, stack, config, g)
    if system.startswith(("keras-", "tf-keras")):
        return _keras(system, native, stack, config, g)
    if system in FLAX_CELLS:
        return _flax(system, native, stack, g)
    return _onnx(system, native, stack, config, g)


def _torch(system, native, stack, config, g):
    import torch

    first = stack.layers[0][0]
    I, H = first.W_x.shape[1], first.W_h.shape[0] // {"rnn": 1, "lstm": 4, "gru": 3}[first.family]
    dtype = getattr(torch, np.asarray(first.W_x).dtype.name)
    options = {"bias": config.bias, "dtype": dtype}
    if first.family == "rnn":
        if g not in ("tanh", "relu"):
            raise ConversionRefused(f"build: PyTorch's {TORCH_CLASSES[system]} computes tanh or relu, not {g!r}")
        options["nonlinearity"] = g
    if system.endswith("-rnn") or system == "torch-rnn":
        options.update(num_layers=config.num_layers, bidirectional=config.bidirectional)
        if first.W_proj is not None:
            options["proj_size"] = first.W_proj.shape[0]
    module = getattr(torch.nn, TORCH_CLASSES[system])(I, H, **options)
    module.load_state_dict({name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in native.items()},
                           strict=True)
    return module


def _keras(system, native, stack, config, g):
    source = mapping(system)
    keras = __import__("tf_keras" if system.startswith("tf-keras") else "keras")
    first = stack.layers[0][0]
    I, H = first.W_x.shape[1], first.W_h.shape[1]
    dtype = np.asarray(first.W_x).dtype.name
    options = {"use_bias": config.bias, "return_sequences": True, "dtype": dtype,
               **(_system(system).activation_arguments(g) or {"activation": ACTIVATIONS.get(g, g)})}
    if first.family == "gru":
        options["reset_after"] = source.variant == "reset_after"
    layers = []
    for _ in range(config.num_layers):
        layer = getattr(keras.layers, KERAS_CLASSES[first.family])(H, **options)
        layers.append(keras.layers.Bidirectional(layer) if config.bidirectional else layer)
    start = keras.Input((None, I), dtype=dtype) if keras.__name__ == "keras" else keras.layers.InputLayer((None, I))
    model = keras.Sequential([start, *layers])
    for k, layer in enumerate(layers):
        halves = [layer.forward_layer, layer.backward_layer] if config.bidirectional else [layer]
        for d, half in enumerate(halves):
            for name in ("kernel", "recurrent_kernel", "bias")[:3 if config.bias else 2]:
                getattr(half.cell, name).assign(native[source.tag(k, d) + name])
    return model


def _onnx(system, native, stack, config, g):
    from rnn_equivalence.frameworks.systems import adapter_class

    adapter = adapter_class(system)()
    adapter.start()  # imports onnx (and the system's runtime)
    first = stack.layers[0][0]
    dtype = np.asarray(first.W_x).dtype
    xs = np.zeros((1, 1, first.W_x.shape[1]), dtype)
    model, _, _ = adapter.model(native, xs, None, config, g)
    for value in (*model.graph.input, *model.graph.output):  # T and batch: any size
        dims = value.type.tensor_type.shape.dim
        for index, name in ((0, "T"), (2 if value.name == "Y" else 1, "batch")):
            if value.name.startswith("Y_") and index == 0:
                continue  # Y_h, Y_c: (D, batch, H)
            if index < len(dims):
                dims[index].dim_param = name
    return model


def _flax(system, native, stack, g):
    from rnn_equivalence.frameworks.systems import adapter_class

    adapter = adapter_class(system)()
    adapter.start()  # imports jax and flax, float64 switched on
    first = stack.layers[0][0]
    I, H = first.W_x.shape[1], first.W_h.shape[1]
    dtype = np.asarray(first.W_x).dtype
    activations = ({"activation_fn": adapter._activation(g)} if first.family == "rnn"
                   else adapter.activation_arguments(g))
    if system.startswith("flax-nnx"):
        return adapter._nnx_cell(getattr(adapter.nnx, FLAX_CELLS[system]), native, "", I, H, dtype, **activations)
    params: dict = {}
    for name, value in native.items():
        module, weight = name.split(".")
        params.setdefault(module, {})[weight] = adapter.jnp.asarray(value)
    cell = getattr(adapter.linen, FLAX_CELLS[system])(features=H, dtype=dtype, param_dtype=dtype, **activations)
    return cell, {"params": params}


def _system(name: str):
    """The system ``name`` (its runner's way of building the framework's object), its framework not started."""
    from rnn_equivalence.frameworks.systems import adapter_class

    return adapter_class(name)()
