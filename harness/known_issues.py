"""Known upstream bugs, one table: which system, where, in which dtype and activation, the cause, the link.

The parametrisation (conftest.py) reads this table and nothing else: a generated test that a row
matches is a strict expected failure, which only the bug's own symptom satisfies, an exceeded bound
(``rnn_equivalence.reference.comparison.BoundExceeded``) or, for a bug that shows as an error, that error and message
(``shows_as``): never a shape, key or dtype assertion standing in for it. A fix upstream turns the
test red here (strict), and a row that matches no generated test is an error
(tests/harness/test_known_issues.py), so the table cannot go stale.

Scopes, the tests a row reaches:
- "reference": every whole, padded, chunked, options, gradient and optimizer comparison with the
  reference (a forward bug reaches them all);
- "activation": the check of an activation's own accuracy (test_activation_accuracy_...);
- "padded": the comparisons of padded batches alone;
- "gradients": the gradient comparisons alone (the forward is right).

``activation``: "*" any; a spec ("default") that exact spec; a function ("tanh", "hard_sigmoid_relu6")
every spec that applies it somewhere. ``option``: a bug in an option (rnn_equivalence.reference.params.OPTIONS) shows
only on cases with the option where it changes the results (``Case.changed_by``): elsewhere, one step
from a zero state or a threshold not reached, the buggy system computes the right thing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rnn_equivalence.reference.params import activation_names

SCOPES = ("reference", "activation", "padded", "gradients")

KERAS_23223 = "https://github.com/keras-team/keras/issues/23223"
JAX_TANH = ("Keras 3 on jax computes tanh of float64 in float32: keras.ops.tanh promotes with "
            "result_type(x.dtype, float), which demotes 64-bit dtypes")
TORCH_MATMUL = ("Keras 3 on torch computes float64 @ float64 in float32: keras.ops.matmul takes its dtype from "
                "result_type, which demotes 64-bit dtypes (the fix of the report covered elementwise ops, not matmul)")
ONNX_REFERENCE_IGNORES = ("onnx.reference ignores {what} (onnx/reference/ops/{ops}: '{line}  # noqa: ARG002' in "
                          "_run): it computes {instead} (tests/equivalence/test_options_onnx.py)")
ONNX_REFERENCE_OPS = "https://github.com/onnx/onnx/tree/main/onnx/reference/ops"
# Measured on 24001 points of [-12, 12]: MLX's CPU exp, and the sigmoid made of it, are one float32 polynomial for
# every dtype (mlx/backend/cpu/simd/math.h), about 1.3e-6 relative at worst, 7e9 float64 ulps; within the
# error model's float32 allowance for an activation (an absolute 4 ulps of 1.0), beyond its float64 one.
MLX_EXP = ("MLX's CPU exp (and sigmoid) is one float32 polynomial for every dtype, about 1.3e-6 relative: "
           "{where}")
MLX_FLOAT64 = "https://github.com/ml-explore/mlx/issues/3047"


@dataclass(frozen=True)
class KnownIssue:
    systems: tuple[str, ...]  # the systems' names, literally
    scope: str  # SCOPES
    cause: str
    link: str  # the upstream report, or where the cause is seen in the upstream source
    dtype: str = "*"  # "float32", "float64" or "*"
    activation: str = "*"
    option: str = ""
    # "" : the bug shows as an exceeded bound; else a regular expression over "ExceptionType: message" of
    # the error the framework raises because of it (and the test then fails with KnownIssueObserved)
    shows_as: str = ""

    @property
    def reason(self) -> str:
        return f"{self.cause}; {self.link}"

    def matches(self, family: str, spec: str, dtype: str) -> bool:
        """Whether the row covers an activation spec and a dtype (not the option, see ``known_issue``)."""
        if self.dtype not in ("*", dtype):
            return False
        return self.activation in ("*", spec) or self.activation in activation_names(family, spec)


KERAS_JAX_CELLS = ("keras-jax", "keras-jax-lstm", "keras-jax-gru", "keras-jax-gru-reset-before")
KERAS_JAX_LAYERS = ("keras-jax-rnn", "keras-jax-lstm-rnn", "keras-jax-gru-rnn", "keras-jax-gru-reset-before-rnn")
KERAS_TORCH_ALL = ("keras-torch", "keras-torch-rnn", "keras-torch-lstm", "keras-torch-gru",
                   "keras-torch-gru-reset-before", "keras-torch-lstm-rnn", "keras-torch-gru-rnn",
                   "keras-torch-gru-reset-before-rnn")
ONNX_REFERENCE_ALL = ("onnx-reference", "onnx-reference-lstm", "onnx-reference-gru", "onnx-reference-gru-reset-before")
MLX_ALL = ("mlx", "mlx-lstm", "mlx-gru")

KNOWN_ISSUES = (
    KnownIssue(KERAS_JAX_CELLS, "reference", JAX_TANH, KERAS_23223, dtype="float64", activation="tanh"),
    KnownIssue(("keras-jax",), "activation", JAX_TANH + " (tanh itself)", KERAS_23223, dtype="float64",
               activation="tanh"),
    # The layers' scan then refuses the float32 carry it is handed (with a mask, jnp.where keeps the carry
    # float64 and the run ends, in error): the symptom is that error, or the exceeded bound.
    KnownIssue(KERAS_JAX_LAYERS, "reference", JAX_TANH + "; in the layers' scan the float32 carry is then refused",
               KERAS_23223, dtype="float64", activation="tanh",
               shows_as=r"^TypeError: .*carry input and carry output must have equal types"),
    KnownIssue(("keras-torch", "keras-torch-rnn", "keras-torch-lstm", "keras-torch-gru", "keras-torch-gru-reset-before",
                "keras-torch-gru-reset-before-rnn"), "reference", TORCH_MATMUL, KERAS_23223, dtype="float64"),
    # LSTM and GRU(reset_after=True) layers on torch hand the whole sequence to the backend's own loops
    # (keras/src/backend/torch/rnn.py, _fallback_lstm, _fallback_gru: torch.matmul, right in float64); with a
    # mask they leave them for the generic loop of keras.ops, and its matmul.
    KnownIssue(("keras-torch-lstm-rnn", "keras-torch-gru-rnn"), "padded",
               TORCH_MATMUL + "; with a mask, LSTM and GRU(reset_after=True) leave the torch backend's own loops "
               "for the generic one (keras/src/backend/torch/rnn.py), and its matmul", KERAS_23223,
               dtype="float64", activation="default"),
    # torch.nn.functional.hardsigmoid's backward multiplies by 1/6 rounded to float32 in float64 too (measured:
    # 0.1666666716337204), so float64 gradients through Keras 3's hard_sigmoid on torch are off by 3e-9
    # relative, far above the float64 bound; the forward is right.
    KnownIssue(KERAS_TORCH_ALL, "gradients", "torch hardsigmoid backward uses 1/6 rounded to float32 in float64",
               "no upstream report found (worth filing with pytorch/pytorch)", dtype="float64",
               activation="hard_sigmoid_relu6"),
    KnownIssue(ONNX_REFERENCE_ALL, "padded",
               "onnx.reference ignores sequence_lens (onnx/reference/ops/op_rnn.py, op_lstm.py, op_gru.py: "
               "'sequence_lens=None,  # noqa: ARG002'): every element runs all T steps, Y is not zero on padded "
               "steps and Y_h is the state after step T (tests/equivalence/test_padded_onnx.py)",
               "https://github.com/onnx/onnx/issues/7935"),
    KnownIssue(ONNX_REFERENCE_ALL, "reference",
               ONNX_REFERENCE_IGNORES.format(what="clip", ops="op_rnn.py, op_lstm.py, op_gru.py", line="clip=None,",
                                             instead="the cell without clipping"),
               ONNX_REFERENCE_OPS, option="gate_clip"),
    KnownIssue(("onnx-reference-lstm",), "reference",
               ONNX_REFERENCE_IGNORES.format(what="input_forget", ops="op_lstm.py", line="input_forget=None,",
                                             instead="an uncoupled forget gate"),
               ONNX_REFERENCE_OPS, option="coupled_gates"),
    # In float64 a cell with a sigmoid in it is float32-accurate: far beyond the float64 bound.
    KnownIssue(MLX_ALL, "reference", MLX_EXP.format(where="float64 gets float32 accuracy"), MLX_FLOAT64,
               dtype="float64", activation="sigmoid"),
    KnownIssue(("mlx",), "activation", MLX_EXP.format(where="float64 gets float32 accuracy"), MLX_FLOAT64,
               dtype="float64", activation="sigmoid"),
)


def rows_of(system: str, scopes) -> list[KnownIssue]:
    return [row for row in KNOWN_ISSUES if system in row.systems and row.scope in scopes]


def scopes_of(test_scope: str, design: str, padded: bool) -> tuple[str, ...]:
    """The scopes of rows a test reaches: its marker's scope, and the padded and gradient rows where its case
    is a padded batch or a gradient (a forward bug, where both apply, is listed first: it is the cause)."""
    if test_scope == "activation":
        return ("activation",)
    return ("reference",) + (("padded",) if padded else ()) + (("gradients",) if design == "gradients" else ())


def known_issue(rows, family: str, spec: str, dtype: str, case=None) -> KnownIssue | None:
    """The first row (of ``rows``) that a test on ``spec`` in ``dtype`` meets; a row in an option only
    where the case has that option and it changes the results."""
    for row in rows:
        if not row.matches(family, spec, dtype):
            continue
        if row.option:
            if case is None or row.option not in case.option_names or not case.changed_by({row.option}, dtype):
                continue
        return row
    return None


def option_rows(system: str) -> dict[str, KnownIssue]:
    """A system's bugs in options, by option (every scope)."""
    return {row.option: row for row in KNOWN_ISSUES if system in row.systems and row.option}


def shows_as(row: KnownIssue, error: BaseException) -> bool:
    return bool(row.shows_as) and re.search(row.shows_as, f"{type(error).__name__}: {error}", re.S) is not None
