"""How deep a run goes: which combinations of the factors each system is compared on.

Every system is checked over the same factors (``rnn_equivalence.harness.cases.factors``): its activations
or GRU variant, its configurations (layers, directions, layouts, options), two non-square
shapes, batch 1 and more, one step and a long sequence, an initial state given and
omitted; each case then runs in every dtype the system supports.

    full      the whole product of the factors' levels
    default   a covering design: every pair of levels of any two factors occurs in at
              least one case (allpairspy's greedy all-pairs generator); a mistake that
              shows only when two factors take particular levels together is still met
    quick     every level of every factor at least once

Converted systems (``TestPlan.converter``: what runs is a converter's output, e.g. TFLite's converter,
tf2onnx, ``torch.onnx.export``; a system added later follows by declaring it). A converter's result
depends on the structure it converts (layer kind, configuration, activations, options, dtype, fixed or
free dimensions, masking), not on the weights' values. So, short of full depth, such a system:

- converts once per structure of its design, and at default that design is the quick one (every level
  of every factor once), not the covering one: a structure is a conversion of 2-4 s, so the covering
  design's pairs of structure levels (an activation with a configuration, say: 18 structures for
  tflite-keras2-rnn) are met at full depth only. Each structure's first case (the factors other than
  shape, batch and steps) runs, the sizes dealt out again so that every level of every factor is still
  met (``rnn_equivalence.harness.cases.once_per_structure``). The converters' operator checks
  (tests/equivalence/test_converters.py) read the models of this design, which meet every activation
  and every configuration, rather than converting models of their own;
- draws each case's weights from its structure (``rnn_equivalence.harness.cases.structure_seed``), so that the cases
  of one structure in every design (a padded batch on each side of padding, a model per chunk length)
  share one conversion;
- runs, of the wrong mappings of the weights (each a conversion of its own:
  tests/equivalence/test_mutations.py), the first, so one per family member: it shows that the converted
  model carries what it is given; the others re-test the source system's mapping, which the source's own
  tests run. An option dropped and activations exchanged are made in the source Keras layer: they too
  re-test the source, and run on the source systems, not the converted ones (a test's
  ``applies_to(..., short_of_full=...)``). The wrong runs that reuse a converted model (lengths one
  short, the mask ignored, the state not carried) all run;
- checks what one code path does for every layer once per converter and Keras, on its LSTM: a model
  built once per structure, converted again with another case's weights, holds them; an
  ``Embedding(mask_zero=True)`` in front masks the converted model (its mask reaches the recurrent layer
  as a Masking layer's does, which every converted system's padded tests check)
  (tests/equivalence/test_converters.py).

Measured (default depth, each conversion logged by test): tflite-keras2-gru-rnn needed 19 converted models
before the rules on wrong runs and models converted again, 15 after (2 wrong runs and 2 models converted
again go); tf2onnx-keras2-gru-rnn 20 before. The quick design's structures then took the 12 Keras-converted
systems' design from 130 structures to 48 (148 to 61 with the torch.onnx.export systems): from a cold cache,
tf2onnx-keras2-gru-rnn 78 s and 16 converted models before, 40 s and 11 after; tflite-keras2-rnn 25
distinct models before, 13 after. The chunked runs (a model per chunk length) make much of the rest.

At full depth a converted system runs every case and every mutation, as every other system does.
Converted models are kept across runs besides (``rnn_equivalence.frameworks.conversion_cache``), and so are every
case's reference and bounds (``rnn_equivalence.harness.reference_cache``): engineering, not coverage; every depth
runs what it ran.

Tests of the reference and the machinery (no system: they run in every selection, the NumPy-only run's
cost) follow the depth too, where a test runs a product of factors: at full depth the whole product; short
of it every level of every factor, and every pair of levels where that is fewer runs than the product. A
test declares its factors with the ``factors`` marker (conftest.py; ``factor_design``: every pair of levels
at default, or every level once where the pairs are the product, i.e. one or two factors), or says its
rule where it runs:

- tests/reference/test_backward.py: the directional differences over every pair of family (activation,
  variant), structure (one layer, two bidirectional) and padding (whole, post, pre); the float32 running
  bound, each family on one of its two seeds, in turn;
- tests/reference/test_options.py: each options set in one configuration (a cell, two bidirectional
  layers), in turn;
- tests/reference/test_half_precision.py: two bidirectional layers over 50 steps (most of its time) for
  each family in one dtype, the dtypes in turn (the other three structures in every dtype: every pair of
  dtype, family, layers and steps met); each wrong mapping on each structure with one of the two seeds, the
  seeds exchanged from one mutation to the next;
- tests/equivalence/test_quantized_torch.py: int8 dynamic quantization's four short cases per layer (one and two
  layers, each direction, with and without h0, 5 steps); the 50- and 20-step cases and the dynamo exporter's
  refusal (some 7 s) at full depth only (the ``by_depth`` marker: conftest.py);
- tests/equivalence/test_quantized_onnx.py: ONNX Runtime's int8 DynamicQuantizeLSTM's three short cases (a cell
  from h0, a bidirectional layer, a widened batch per row; 5 steps), onnxruntime#10111, #15465, the GRU left float,
  both quantizer bugs and `reduce_range`'s 7-bit case, some 1.5 s; the 50- and 20-step and batch-8 cases at full
  depth only (``by_depth``);
- tests/equivalence/test_quantized_tflite.py: TFLite's int8 dynamic-range Keras 2 LSTM and GRU and the full-integer
  LSTM, 4 conversions (some 8 s from a cold cache); Keras 3's GRU, a widened Keras 2 GRU and the two-layer
  bidirectional LSTM at full depth, and tensorflow/model-optimization#1090's three calibrations (a child process each,
  TensorFlow imported and a model calibrated: 15 to 25 s apiece, for a thread about a converter, not a mapping);
- tests/equivalence/test_half_tflite.py: TFLite's float16 quantization on Keras 2's LSTM and Keras 3's GRU, each on
  its first configuration with its first wrong mapping (two conversions each); at full depth every TFLite system,
  configuration and wrong mapping;
- tests/equivalence/test_half_onnx.py: ONNX Runtime's float16 nodes, each system's last (richest) configuration and
  first wrong mapping; at full depth every configuration and wrong mapping;
- tests/harness/test_conversion_cache.py: the two processes writing one entry write it 25 times each, not
  100 (the reads still meet the writes: the test asserts it);
- tests/cli/test_verify_half.py: a wrong port rounded to a half format, every pair of a family (LSTM, GRU), a
  format and a mistake (8 of 16 verifies, each diagnosing: some 1.5 s), with the ``factors`` marker.

Tests of a framework's machinery run where the run selects that framework's systems, as a child run about a
system does (``require_system``): tests/harness/test_jax_cache.py's JAX processes where a system on JAX is
selected (an error, not a skip, where JAX is missing and the run selects it under CI=true or by name).

Systems in a nox session of their own (``Adapter.environment``: noxfile.py) run there at full depth and never in
the main environment's run, whatever its depth: onnx2tf, nobuco, PaddlePaddle, coremltools, MNN, ncnn, litert-torch
and ExecuTorch for their pins or their downloads; TorchScript and torch.export programs (``torch-programs``) and MLX
(``mlx``) for the default run's budget alone, their twelve systems measured at about two minutes of test time at
default depth. A system added later whose default-depth cost the run cannot carry goes the same way, and says so in
its module.

Half formats (issue 37) a system runs at full depth only (``TestPlan.full_depth_dtypes``; frameworks/plan.py,
``dtypes_for``): short of it no capability runs them. The Keras layers' half rows cost 167 s summed at default over
the thirteen layer systems (jax 26 to 31 s a system, tensorflow 7 to 10 s, torch 1.4 to 3.3 s), against a budget of
15 s: at default keras-tf-lstm-rnn runs float16 and tf-keras-rnn bfloat16 (this process's backend, both Keras
implementations, both formats), tests/equivalence/test_half_keras.py runs on keras-tf-lstm-rnn and keras-tf-rnn,
and every other Keras half row at full depth (frameworks/keras_plan.py, ``DEFAULT_HALF``). Flax's and Equinox's
half rows likewise: at default flax-nnx runs float16 and equinox-gru bfloat16 (both libraries, both formats; some
4.5 s with the JAX compilation cache warm, 10 s without), every other at full depth (frameworks/flax_cells.py,
``DEFAULT_HALF``); tests/equivalence/test_half_jax.py runs on those two at default, on all nine at full depth.

Chosen with ``--depth`` or ``RNN_EQ_DEPTH``; the report names it, with the seed.
"""

from __future__ import annotations

import itertools
import math

DEPTHS = ("quick", "default", "full")


def design(factors: dict[str, tuple], depth: str) -> list[dict]:
    """The combinations of ``factors`` (name -> levels) that ``depth`` asks for, in a fixed order."""
    if depth not in DEPTHS:
        raise ValueError(f"depth: expected one of {DEPTHS}, got {depth!r}")
    names, levels = list(factors), [tuple(factors[name]) for name in factors]
    if any(not level for level in levels):
        empty = [name for name, level in zip(names, levels) if not level]
        raise ValueError(f"factors without levels: {empty}")
    if depth == "full":
        rows = itertools.product(*levels)
    elif depth == "default":
        # A factor of one level is in every row: left out of the generator, so that adding one
        # (a system with no options) leaves the design of the others as it was.
        varied = [i for i, level in enumerate(levels) if len(level) > 1]
        rows = []
        for row in all_pairs([levels[i] for i in varied]):
            full = [level[0] for level in levels]
            for i, value in zip(varied, row):
                full[i] = value
            rows.append(full)
    else:
        rows = ([level[i % len(level)] for level in levels] for i in range(max(map(len, levels))))
    return [dict(zip(names, row)) for row in rows]


def factor_design(factors: dict[str, tuple], depth: str) -> list[dict]:
    """The combinations a test of the reference or the machinery runs at ``depth`` (its ``factors`` marker,
    conftest.py): full, the product; default, every pair of levels where that is fewer rows than the
    product, else (one or two factors) every level once; quick, every level once."""
    if depth == "default" and len(design(factors, "default")) >= math.prod(map(len, factors.values())):
        depth = "quick"
    return design(factors, depth)


def all_pairs(levels: list[tuple]) -> list[tuple]:
    """Rows in which every pair of levels of any two factors occurs (a covering array of strength 2)."""
    if len(levels) < 2:
        return [(level,) for level in levels[0]] if levels else [()]
    from allpairspy import AllPairs

    # allpairspy works on indices here, so that levels need not be hashable or distinct as values.
    rows = AllPairs([list(range(len(level))) for level in levels])
    return [tuple(level[i] for level, i in zip(levels, row)) for row in rows]


def uncovered_pairs(factors: dict[str, tuple], rows: list[dict]) -> list[tuple]:
    """Pairs of (factor, level index) that no row covers: empty for a covering design."""
    index = {name: {id(level): i for i, level in enumerate(factors[name])} for name in factors}
    seen = {tuple(sorted((name, index[name][id(row[name])]) for name in pair))
            for row in rows for pair in itertools.combinations(factors, 2)}
    wanted = {((a, i), (b, j)) for a, b in itertools.combinations(sorted(factors), 2)
              for i in range(len(factors[a])) for j in range(len(factors[b]))}
    return sorted(wanted - seen)
