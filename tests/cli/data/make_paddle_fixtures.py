"""Writes the PaddlePaddle fixtures of tests/cli/test_paddle_files.py: ``paddle.save(layer.state_dict(), path)``
of four small layers, and beside each an ``.npz`` of one seeded input batch, initial states, and Paddle's own
outputs for them (its ``nn.LSTM``/``nn.GRU``/``nn.SimpleRNN`` forward, on the CPU): what the suite's reference,
run on the weights as ``load_weights`` reads them, must reproduce within the derived float32 bound.

Paddle is no dependency of the project (the tests read these files without it). Run in a throwaway venv:

    python3.11 -m venv /tmp/paddle-venv && /tmp/paddle-venv/bin/pip install paddlepaddle numpy
    /tmp/paddle-venv/bin/python tests/cli/data/make_paddle_fixtures.py

The committed files were written by paddlepaddle 3.3.1 (CPU wheel), numpy 2.4.6, Python 3.11.7; each ``.npz``
records the versions that wrote it (``paddle_version``, ``numpy_version``).
"""

from pathlib import Path

import numpy as np
import paddle

HERE = Path(__file__).resolve().parent
I, H, BATCH, T = 3, 4, 2, 5


class Encoder(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.rnn = paddle.nn.LSTM(I, H)


class Model(paddle.nn.Layer):
    """A model as users have one: an embedding, an LSTM under ``encoder.rnn``, a dense head."""

    def __init__(self):
        super().__init__()
        self.embedding = paddle.nn.Embedding(7, I)
        self.encoder = Encoder()
        self.head = paddle.nn.Linear(H, 2)


def layers():
    """{fixture name: (the layer saved, the recurrent layer run)}, each seeded."""
    paddle.seed(1)
    lstm = paddle.nn.LSTM(I, H, num_layers=2, direction="bidirect")
    paddle.seed(2)
    gru = paddle.nn.GRU(I, H)
    paddle.seed(3)
    simple = paddle.nn.SimpleRNN(I, H)
    paddle.seed(4)
    model = Model()
    return {"paddle_lstm_bidirect": (lstm, lstm), "paddle_gru": (gru, gru), "paddle_simple_rnn": (simple, simple),
            "paddle_encoder": (model, model.encoder.rnn)}


def write(name: str, saved, rnn, seed: int) -> None:
    rng = np.random.default_rng(seed)
    states = rnn.num_layers * rnn.num_directions
    x = rng.uniform(-1, 1, (BATCH, T, I)).astype(np.float32)  # Paddle's default layout: batch-major
    h0 = rng.uniform(-1, 1, (states, BATCH, H)).astype(np.float32)
    c0 = rng.uniform(-1, 1, (states, BATCH, H)).astype(np.float32)
    is_lstm = isinstance(rnn, paddle.nn.LSTM)
    initial = (paddle.to_tensor(h0), paddle.to_tensor(c0)) if is_lstm else paddle.to_tensor(h0)
    rnn.eval()
    y, final = rnn(paddle.to_tensor(x), initial)
    outputs = {"y": y.numpy(), "h_n": (final[0] if is_lstm else final).numpy()}
    if is_lstm:
        outputs.update(c0=c0, c_n=final[1].numpy())
    paddle.save(saved.state_dict(), str(HERE / f"{name}.pdparams"))
    np.savez(HERE / f"{name}.npz", x=x, h0=h0, **outputs, paddle_version=np.array(paddle.__version__),
             numpy_version=np.array(np.__version__))


def main():
    for seed, (name, (saved, rnn)) in enumerate(layers().items()):
        write(name, saved, rnn, seed)
    gru = layers()["paddle_gru"][0]  # the same GRU again, pickled with protocol 2 (bytes as _codecs.encode)
    paddle.save(gru.state_dict(), str(HERE / "paddle_gru_protocol2.pdparams"), protocol=2)
    paddle.seed(5)  # an LSTM with a projection: its weight_ho is in the cell copy only (not read: refused)
    paddle.save(paddle.nn.LSTM(I, H, proj_size=2).state_dict(), str(HERE / "paddle_lstm_proj.pdparams"))


if __name__ == "__main__":
    main()
