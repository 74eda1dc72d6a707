"""Benchmark: is one concatenated matmul faster than two? Measured, per framework.

For H in {32, 128, 512} (input size I = H), batch in {1, 64}, one step and a
100-step sequence, float32, it times:

    concat    h = g([h, x] @ W_h^T + b)                 one matmul per step, plus the concatenation
    split     h = g(h @ W_hh^T + x @ W_hx^T + b)        two matmuls per step
    hoisted   P = X @ W_hx^T + b for all steps first, then h = g(h @ W_hh^T + P_t)
              (what cuDNN and PyTorch's nn.RNN do; only the split form allows it)
    own       the framework's own cell (one step) or layer (100 steps); for NumPy, the suite's reference

in NumPy, PyTorch (eager), TensorFlow (tf.function) and JAX (jit, lax.scan),
and reports medians and the ratio concat/split. Before timing, every variant's
output is checked against the float64 reference within the suite's derived
error bound (rnn_equivalence.reference.tolerance.reference_and_bound), so only correct code is timed.

    python benchmarks/rnn_formulas.py --output docs/BENCHMARKS.md      (about 5 minutes here)

A benchmark, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from rnn_equivalence.harness.report import cpu_name  # noqa: E402
from rnn_equivalence.reference.tolerance import reference_and_bound as bounded_reference  # noqa: E402
from rnn_equivalence.reference.params import CellParams, random_inputs, random_state  # noqa: E402
from rnn_equivalence.reference.rnn import rnn_sequence  # noqa: E402

SIZES = (32, 128, 512)
BATCHES = (1, 64)
STEPS = (1, 100)
VARIANTS = ("concat", "split", "hoisted", "own")


def random_params(size: int, seed: int) -> CellParams:
    """Float32-exact values with CellParams.random's scales. Not its all-distinct search, which is
    for catching wrong mappings and never ends at these sizes: this only has to be correct."""
    rng = np.random.default_rng(seed)
    W_hx = rng.uniform(-1, 1, (size, size)) / np.sqrt(size)
    W_hh = rng.uniform(-1, 1, (size, size)) * (1.6 / size)  # contracting: states stay in tanh's range
    b_x, b_h = rng.uniform(-0.5, 0.5, size), rng.uniform(-0.5, 0.5, size)
    return CellParams.rnn(*(t.astype(np.float32).astype(np.float64) for t in (W_hx, W_hh, b_x, b_h)))


def weights(params: CellParams) -> dict:
    """Row-major (batch-first) kernels, transposed once here rather than at every step."""
    W_h = np.hstack([params.W_hh, params.W_hx])  # the lecture's W_h = [W_hh | W_hx]
    return {"W_hT": np.ascontiguousarray(W_h.T), "W_hhT": np.ascontiguousarray(params.W_hh.T),
            "W_hxT": np.ascontiguousarray(params.W_hx.T), "b": params.b_x + params.b_h}


def numpy_variants(w, xs, h0, params):
    def concat():
        h = h0
        for x in xs:
            h = np.tanh(np.concatenate([h, x], axis=1) @ w["W_hT"] + w["b"])
        return h

    def split():
        h = h0
        for x in xs:
            h = np.tanh(h @ w["W_hhT"] + x @ w["W_hxT"] + w["b"])
        return h

    def hoisted():
        T, B, I = xs.shape
        projected = (xs.reshape(T * B, I) @ w["W_hxT"] + w["b"]).reshape(T, B, -1)
        h = h0
        for p in projected:
            h = np.tanh(h @ w["W_hhT"] + p)
        return h

    def reference():  # the suite's NumPy reference (split formula, column vectors), in float32
        return rnn_sequence(params, xs, h0)[-1]

    return {"concat": concat, "split": split, "hoisted": hoisted, "own": reference}


def torch_variants(w, xs, h0, params):
    import torch

    t = {k: torch.from_numpy(v) for k, v in w.items()}
    xs_t, h0_t = torch.from_numpy(xs), torch.from_numpy(h0)
    cell = torch.nn.RNNCell(params.input_size, params.hidden_size)
    layer = torch.nn.RNN(params.input_size, params.hidden_size)
    with torch.no_grad():  # PyTorch's layout: weight_ih (H, I), weight_hh (H, H), two biases
        for module, suffix in ((cell, ""), (layer, "_l0")):
            getattr(module, "weight_ih" + suffix).copy_(torch.from_numpy(params.W_hx))
            getattr(module, "weight_hh" + suffix).copy_(torch.from_numpy(params.W_hh))
            getattr(module, "bias_ih" + suffix).copy_(torch.from_numpy(params.b_x))
            getattr(module, "bias_hh" + suffix).copy_(torch.from_numpy(params.b_h))

    def inference(fn):
        def run():
            with torch.inference_mode():
                return fn().numpy()
        return run

    def concat():
        h = h0_t
        for x in xs_t:
            h = torch.tanh(torch.cat([h, x], dim=1) @ t["W_hT"] + t["b"])
        return h

    def split():
        h = h0_t
        for x in xs_t:
            h = torch.tanh(h @ t["W_hhT"] + x @ t["W_hxT"] + t["b"])
        return h

    def hoisted():
        T, B, I = xs_t.shape
        projected = torch.addmm(t["b"], xs_t.reshape(T * B, I), t["W_hxT"]).reshape(T, B, -1)
        h = h0_t
        for p in projected:
            h = torch.tanh(torch.addmm(p, h, t["W_hhT"]))
        return h

    def own():
        if len(xs_t) == 1:
            return cell(xs_t[0], h0_t)
        return layer(xs_t, h0_t[None])[1][0]

    return {name: inference(fn) for name, fn in
            (("concat", concat), ("split", split), ("hoisted", hoisted), ("own", own))}


def tensorflow_variants(w, xs, h0, params):
    import keras
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # each size traces its own functions, on purpose

    t = {k: tf.constant(v) for k, v in w.items()}
    xs_t, h0_t = tf.constant(xs), tf.constant(h0)
    # Keras 3: kernel (I, H) = W_hx^T, recurrent_kernel (H, H) = W_hh^T, one bias b_x + b_h.
    cell = keras.layers.SimpleRNNCell(params.hidden_size)
    layer = keras.layers.SimpleRNN(params.hidden_size)
    cell.build((None, params.input_size))
    layer.build((None, None, params.input_size))
    for layer_weights in (cell, layer):
        layer_weights.set_weights([w["W_hxT"], w["W_hhT"], w["b"]])
    xs_batch_first = tf.transpose(xs_t, [1, 0, 2])

    @tf.function
    def concat():
        h = h0_t
        for x in tf.unstack(xs_t):
            h = tf.tanh(tf.matmul(tf.concat([h, x], axis=1), t["W_hT"]) + t["b"])
        return h

    @tf.function
    def split():
        h = h0_t
        for x in tf.unstack(xs_t):
            h = tf.tanh(tf.matmul(h, t["W_hhT"]) + tf.matmul(x, t["W_hxT"]) + t["b"])
        return h

    @tf.function
    def hoisted():
        T, B, I = xs.shape
        projected = tf.reshape(tf.matmul(tf.reshape(xs_t, [T * B, I]), t["W_hxT"]) + t["b"], [T, B, -1])
        h = h0_t
        for p in tf.unstack(projected):
            h = tf.tanh(tf.matmul(h, t["W_hhT"]) + p)
        return h

    @tf.function
    def own():
        if xs.shape[0] == 1:
            return cell(xs_t[0], [h0_t])[0]
        return layer(xs_batch_first, initial_state=[h0_t])

    return {name: (lambda fn=fn: fn().numpy()) for name, fn in
            (("concat", concat), ("split", split), ("hoisted", hoisted), ("own", own))}


def jax_variants(w, xs, h0, params):
    import jax
    import jax.numpy as jnp
    from flax import linen

    t = {k: jnp.asarray(v) for k, v in w.items()}
    xs_j, h0_j = jnp.asarray(xs), jnp.asarray(h0)

    def scan(step, carry, sequence):
        return jax.lax.scan(lambda h, item: (step(h, item), None), carry, sequence)[0]

    @jax.jit
    def concat(xs_j, h0_j):
        return scan(lambda h, x: jnp.tanh(jnp.concatenate([h, x], axis=1) @ t["W_hT"] + t["b"]), h0_j, xs_j)

    @jax.jit
    def split(xs_j, h0_j):
        return scan(lambda h, x: jnp.tanh(h @ t["W_hhT"] + x @ t["W_hxT"] + t["b"]), h0_j, xs_j)

    @jax.jit
    def hoisted(xs_j, h0_j):
        projected = xs_j @ t["W_hxT"] + t["b"]
        return scan(lambda h, p: jnp.tanh(h @ t["W_hhT"] + p), h0_j, projected)

    # Flax linen SimpleCell: i.kernel (I, H) = W_hx^T, i.bias = b_x + b_h, h.kernel (H, H) = W_hh^T.
    cell = linen.SimpleCell(features=params.hidden_size)
    variables = {"params": {"i": {"kernel": t["W_hxT"], "bias": t["b"]}, "h": {"kernel": t["W_hhT"]}}}

    @jax.jit
    def own(xs_j, h0_j):
        return scan(lambda h, x: cell.apply(variables, h, x)[0], h0_j, xs_j)

    return {name: (lambda fn=fn: np.asarray(fn(xs_j, h0_j).block_until_ready())) for name, fn in
            (("concat", concat), ("split", split), ("hoisted", hoisted), ("own", own))}


FRAMEWORKS = {
    "numpy": numpy_variants,
    "torch": torch_variants,
    "tensorflow": tensorflow_variants,
    "jax": jax_variants,
}


def median_seconds(fn, min_time: float, repeats: int) -> float:
    """The median over ``repeats`` of the mean time per call, each repeat lasting at least ``min_time``."""
    fn()  # warm up: tracing, compilation, allocation
    calls, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            break
        calls *= 2
    samples = [elapsed / calls]
    for _ in range(repeats - 1):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def reference_and_bound(params, xs, h0):
    """The float64 reference's last state, and the suite's float32 error bound for it."""
    xs, h0 = xs.astype(np.float64), h0.astype(np.float64)
    _, bound = bounded_reference(params, xs, {"h": h0[None]}, "float32")
    return rnn_sequence(params, xs, h0)[-1], bound["output"][-1]


def check(name, variant, out, expected):
    """Only correct code is timed: the last state within the suite's float32 bound of the float64 reference."""
    ref, bound = expected
    error = np.abs(np.asarray(out, dtype=np.float64) - ref)
    if not np.all(error <= bound):
        raise AssertionError(f"{name} {variant}: error {error.max():.3g} exceeds the bound {bound.max():.3g}")


def run(frameworks, min_time, repeats):
    rows = []
    for name in frameworks:
        for H in SIZES:
            params64 = random_params(H, seed=H)
            params = params64.astype(np.float32)
            w = weights(params)
            for B in BATCHES:
                for T in STEPS:
                    xs = random_inputs(T, B, H, seed=T, dtype=np.float32)
                    h0 = random_state((B, H), seed=B, dtype=np.float32)
                    expected = reference_and_bound(params64, xs, h0)
                    variants = FRAMEWORKS[name](w, xs, h0, params)
                    row = {"framework": name, "H": H, "batch": B, "steps": T}
                    for variant in VARIANTS:
                        fn = variants[variant]
                        if fn is None:
                            row[variant] = None
                            continue
                        check(name, variant, fn(), expected)
                        row[variant] = median_seconds(fn, min_time, repeats)
                    rows.append(row)
                    print(_line(row), flush=True)
    return rows


def _fmt(seconds):
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _line(row):
    ratio = row["concat"] / row["split"]
    return (f"| {row['framework']} | {row['H']} | {row['batch']} | {row['steps']} | "
            + " | ".join(_fmt(row[v]) for v in VARIANTS) + f" | {ratio:.2f} |")


def versions(frameworks) -> str:
    from importlib.metadata import version

    dists = {"numpy": ["numpy"], "torch": ["torch"], "tensorflow": ["tensorflow", "keras"], "jax": ["jax", "flax"]}
    return ", ".join(f"{d} {version(d)}" for f in frameworks for d in dists[f])


def markdown(rows, frameworks, min_time, repeats, command) -> str:
    ratios, hoisting = {}, {}
    for row in rows:
        ratios.setdefault(row["framework"], []).append(row["concat"] / row["split"])
        if row["steps"] > 1:
            hoisting.setdefault(row["framework"], []).append(row["hoisted"] / row["split"])
    lines = [
        "# Benchmark: concatenated against split formula", "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, {platform.platform()}; Python {platform.python_version()}; "
        f"{versions(frameworks)}. float32, input size I = H, default thread settings.", "",
        f"Command: `{command}`. Each figure is the median of {repeats} repeats of the mean time per call, "
        f"each repeat at least {min_time} s long, after a warm-up call (tracing, compilation). Every variant's "
        "result was checked against the float64 reference within the suite's error bound before timing.", "",
        "concat/split below 1 means the single concatenated matmul is faster.", "",
        "Median concat/split over all sizes: " + ", ".join(
            f"{name} {statistics.median(r):.2f} (range {min(r):.2f} to {max(r):.2f})"
            for name, r in ratios.items()) + ".",
        "",
        f"Median hoisted/split over the {max(STEPS)}-step sequences: " + ", ".join(
            f"{name} {statistics.median(r):.2f} (range {min(r):.2f} to {max(r):.2f})"
            for name, r in hoisting.items()) + ".",
        "", "| framework | H | batch | steps | concat | split | hoisted "
            "| own cell/layer (NumPy: the reference) | concat/split |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_line(row) for row in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), help=f"any of {', '.join(FRAMEWORKS)}")
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per repeat (default 0.05)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", help="write the Markdown table here")
    args = parser.parse_args(argv)
    frameworks = [f for f in args.frameworks.split(",") if f]
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        parser.error(f"unknown frameworks {sorted(unknown)}; expected any of {', '.join(FRAMEWORKS)}")
    rows = run(frameworks, args.min_time, args.repeats)
    if args.output:
        command = "python benchmarks/rnn_formulas.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.output).write_text(markdown(rows, frameworks, args.min_time, args.repeats, command.strip()))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
