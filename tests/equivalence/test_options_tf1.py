"""TF1 ``LSTMCell``'s options (use_peepholes, num_proj, cell_clip, proj_clip), measured on the
installed tf_keras legacy cells, beyond what test_reference.py compares.

- The documented layout with every option is the one LSTMCell builds (test_mapping.py holds the
  layout without options), and the options survive a round trip through the native dict.
- ``cell_clip`` clips the stored state c, not only what the output reads: the returned
  ``LSTMStateTuple.c`` is clipped, and the next step starts from it. A cell that clipped c only for
  its output (and carried the unclipped c on) is shown far outside the bound, in a case where the
  clip binds. The cell clips at the threshold in the weights' dtype (clip_by_value converts the
  Python float): in float32 a clipped element sits on fl32(cell_clip), |fl32(t) - t| from the
  reference's, the worst error of the clipped cases (within the bound).
- The output gate's peephole reads the clipped c (rnn_equivalence.reference.gated), not the unclipped sum.
- dynamic_rnn carries the tuple (c, m) with m of num_proj units, padded batches included.
"""

import numpy as np
import pytest

from rnn_equivalence.harness.cases import LENGTHS, PADDED_STEPS, case_of
from rnn_equivalence.reference.comparison import assert_within_bound, compare_outputs
from rnn_equivalence.reference.activations import activation
from rnn_equivalence.reference.gated import lstm_step
from rnn_equivalence.reference.padding import Padding
from rnn_equivalence.reference.params import CELL_CLIP

ORDERS_OF_MAGNITUDE = 100  # as in test_mutations: a wrong function is not a rounding effect
DTYPE = "float32"
sigmoid = activation("sigmoid")
ALL_OPTIONS = "peepholes+projection+cell_clip+proj_clip"


def is_tf1_lstm_cell(cls):
    return cls.name == "tf1-lstm"


def run_case(adapter, case, dtype=DTYPE):
    return adapter.run(case.stack(dtype), case.inputs(dtype), case.state(dtype), case.config, case.padding)


def compared(adapter, case, actual, expected, what):
    """The system's outputs against ``expected`` (rnn_equivalence.reference.stack.drive's keys) under the case's
    bound."""
    return compare_outputs(actual, adapter.arrange(expected, case.config),
                           adapter.arrange(case.bound_vs_reference(DTYPE), case.config),
                           f"{adapter.describe()} vs {what}, {case.describe(DTYPE)}")


def run_variant(params, xs, state, step):
    """A cell (float64, canonical parameters) stepped with another rule ``step(params, x, h, c) ->
    (h', c' kept)``: the results under rnn_equivalence.reference.stack.drive's keys for one cell."""
    h, c = (state[key][0].T for key in ("h", "c"))
    hs, cs = [], []
    for x in xs:
        h, c = step(params, x.T, h, c)
        hs.append(h.T)
        cs.append(c.T)
    return {"output": np.stack(hs), "c_output": np.stack(cs), "h_n": hs[-1][None], "c_n": cs[-1][None]}


def clip_case(adapter, options):
    """A case where the clip binds: some |c| of the reference reaches cell_clip on most steps."""
    return case_of(adapter, 3, 5, batch=3, steps=8, seed=41, options=options)


@pytest.mark.applies_to(lambda cls: is_tf1_lstm_cell(cls))
def test_tf1_lstm_cell_layout_with_every_option_is_the_frameworks_own(adapter):
    """native_spec with every option against the variables LSTMCell(use_peepholes=True, num_proj=P,
    cell_clip, proj_clip) builds; the settings are constructor arguments, shape () in the dict."""
    I, H, P = 3, 5, 3
    cell, variables = adapter._build(I, H, adapter.activations[0], DTYPE,
                                     {"use_peepholes": True, "num_proj": P, "cell_clip": 1.0, "proj_clip": 1.0})
    spec = adapter.native_spec(adapter.mutation_config, I, H, tuple(ALL_OPTIONS.split("+")), P)
    own = {name: tuple(v.shape) for name, v in variables.items()}
    assert own == {name: shape for name, (shape, _) in spec.items() if shape != ()}
    assert {name for name, (shape, _) in spec.items() if shape == ()} == {"cell_clip", "proj_clip"}
    assert (cell._cell_clip, cell._proj_clip, cell.output_size, tuple(cell.state_size)) == (1.0, 1.0, P, (H, P))


@pytest.mark.applies_to(lambda cls: is_tf1_lstm_cell(cls))
@pytest.mark.parametrize("options", ["peepholes", "projection+proj_clip", ALL_OPTIONS])
def test_tf1_lstm_cell_options_round_trip(adapter, dtype, options):
    """native -> canonical -> native is bitwise, settings included; canonical -> native -> canonical
    keeps the option tensors bitwise and each threshold as the weights' dtype holds it."""
    case = case_of(adapter, 3, 5, batch=2, steps=4, seed=11, options=options)
    params = case.params(dtype)
    native = adapter.to_native(params)
    back = adapter.from_native(native).first
    again = adapter.to_native(back)
    assert sorted(again) == sorted(native)
    for name in native:
        np.testing.assert_array_equal(again[name], native[name], err_msg=name, strict=True)
    assert back.options == params.options
    for name in ("peepholes", "W_proj"):
        if getattr(params, name) is not None:
            np.testing.assert_array_equal(getattr(back, name), getattr(params, name), err_msg=name, strict=True)
    for name in ("cell_clip", "proj_clip"):
        if getattr(params, name) is not None:
            assert getattr(back, name) == float(np.dtype(dtype).type(getattr(params, name))), name


@pytest.mark.applies_to(lambda cls: is_tf1_lstm_cell(cls))
def test_tf1_cell_clip_clips_the_stored_state(adapter, record):
    """TF1 clips c itself (``c = clip_by_value(c, ...)`` before the output and the returned tuple):
    the c it returns is within +-cell_clip and the reference, which stores the clipped c, holds it
    within the bound, c and h, on every step. The other reading of "cell clipping", clipping only
    what the output reads and carrying the unclipped c on, is far outside the bound. The clip
    binds: the unclipped c exceeds cell_clip, and the returned c sits on it."""
    case = clip_case(adapter, "cell_clip")
    actual = run_case(adapter, case)
    assert_within_bound(compared(adapter, case, actual, case.reference(), "the float64 reference (c clipped)"))
    threshold = np.float32(CELL_CLIP)
    assert np.max(np.abs(actual["c"])) == threshold  # clipped, and the clip binds
    assert np.mean(np.abs(actual["c"]) == threshold) > 0.1, "the clip binds on too few elements to tell"

    def clip_for_the_output_only(p, x, h, c):
        h_next, _ = lstm_step(p, x, h, c)
        return h_next, lstm_step(p.without_option("cell_clip"), x, h, c)[1]

    params = case.params()
    unclipped = run_variant(params, case.inputs(), case.state(), clip_for_the_output_only)
    assert np.max(np.abs(unclipped["c_output"])) > 1.5 * CELL_CLIP
    comparison = compared(adapter, case, actual, unclipped, "a cell that clips c for its output only")
    record("nonequivalence", adapter, other="cell_clip on the output only", dtype=DTYPE,
           reason="TF1 LSTMCell stores the clipped c: the next step reads it", **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()
    # the h alone tells them apart too: from the second step on, the steps start from different c
    h_only = compared(adapter, case, {"h": actual["h"]}, {"output": unclipped["output"]},
                      "a cell that clips c for its output only, h alone")
    assert h_only.ratio > ORDERS_OF_MAGNITUDE, h_only.message()


@pytest.mark.applies_to(lambda cls: is_tf1_lstm_cell(cls))
def test_tf1_output_peephole_reads_the_clipped_c(adapter, record):
    """With peepholes and cell_clip, o = sigmoid(o + w_o_diag * c) reads the c after clipping, as
    the reference does (rnn_equivalence.reference.gated); reading the unclipped sum is far outside the bound."""
    case = clip_case(adapter, "peepholes+cell_clip")
    actual = run_case(adapter, case)
    assert_within_bound(compared(adapter, case, actual, case.reference(), "the float64 reference"))

    def peephole_before_the_clip(p, x, h, c):
        """rnn_equivalence.reference.gated.lstm_step (default activations) with o's peephole on the unclipped c."""
        a_i, a_f, a_g, a_o = np.split(p.W_x @ x + p.b_x[:, None] + p.W_h @ h + p.b_h[:, None], 4)
        p_i, p_f, p_o = np.split(p.peepholes[:, None], 3)
        c_raw = sigmoid(a_f + p_f * c) * c + sigmoid(a_i + p_i * c) * np.tanh(a_g)
        c_next = np.clip(c_raw, -p.cell_clip, p.cell_clip)
        return sigmoid(a_o + p_o * c_raw) * np.tanh(c_next), c_next

    other = run_variant(case.params(), case.inputs(), case.state(), peephole_before_the_clip)
    comparison = compared(adapter, case, actual, other, "o's peephole on the unclipped c")
    record("nonequivalence", adapter, other="o's peephole on the unclipped c", dtype=DTYPE,
           reason="TF1 LSTMCell's output peephole reads the clipped c", **comparison.as_record())
    assert comparison.ratio > ORDERS_OF_MAGNITUDE, comparison.message()


@pytest.mark.applies_to(lambda cls: is_tf1_lstm_cell(cls))
@pytest.mark.parametrize("config_index", [0, 1], ids=["time_major", "batch_major-no_initial_state"])
def test_tf1_dynamic_rnn_with_every_option_on_a_padded_batch(adapter, config_index, record):
    """dynamic_rnn(sequence_length=...) with a projection: its state tuple (c, m) carries m of
    num_proj units through the padding (c keeps num_units), and matches the reference."""
    config = adapter.padded_configs[config_index]
    case = case_of(adapter, 3, 5, len(LENGTHS), PADDED_STEPS, 561 + config_index, config,
                   padding=Padding(LENGTHS), options=ALL_OPTIONS)
    actual = run_case(adapter, case)
    assert actual["state.h"].shape == (len(LENGTHS), 3) and actual["state.c"].shape == (len(LENGTHS), 5)
    comparison = compared(adapter, case, actual, case.reference(), "the float64 reference of the padded batch")
    record("padded", adapter, dtype=DTYPE, **comparison.as_record())
    assert_within_bound(comparison)
