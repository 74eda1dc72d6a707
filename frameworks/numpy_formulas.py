"""The lecture's two formulas run in NumPy in the test dtype (float32 or float64).

These are the reference code itself, run in float32 as well, so the summary
shows that the two formulas agree with each other exactly as closely as the
error model predicts, before any framework enters.
"""

from __future__ import annotations

import numpy as np

from rnn_equivalence.frameworks.base import Adapter, Mapping, Native, NativeSpec, scaled, swapped, transposed
from rnn_equivalence.reference.rnn import concatenate_kernels, concatenated_step, rnn_sequence


# --- the mappings: the lecture's two layouts ----------------------------------------------------------


class LectureSplitMapping(Mapping):
    """Formula 2's layout: native layout = canonical layout, in the lecture's names.

    canonical: W_x (H, I), W_h (H, H), b_x (H), b_h (H)
    native:    W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    """

    kept_hidden_biases = ("h",)

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {"W_hx": ((H, I), "(H, I)"), "W_hh": ((H, H), "(H, H)")}
        if has_bias:
            spec.update(b_x=((H,), "(H,)"), b_h=((H,), "(H,)"))
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"W_hx": params.W_hx, "W_hh": params.W_hh}
        if params.has_bias:
            native.update(b_x=params.b_x, b_h=params.b_h)
        return native

    def cell_from_native(self, native: Native, tag: str):
        return self.params(native["W_hx"], native["W_hh"], native.get("b_x"), native.get("b_h"))

    def recurrent_kernel(self, config) -> str:
        return "W_hh"


class LectureConcatenatedMapping(Mapping):
    """Formula 1's layout, the lecture's concatenated kernel, shared by every system that uses it.

    canonical: W_hx (H, I), W_hh (H, H), b_x (H), b_h (H)
    native:    W_h = [W_hh | W_hx]  (H, H+I), hidden columns first;  b = b_x + b_h  (H)

    One bias slot, so the two canonical biases are summed (one rounding) and
    the way back returns b_x = b, b_h = 0: lossy unless b_h was zero.
    """

    hidden_axis = 0

    def cell_spec(self, input_size: int, hidden_size: int, has_bias: bool, tag: str) -> NativeSpec:
        I, H = input_size, hidden_size
        spec = {"W_h": ((H, H + I), "(H, H+I)")}
        if has_bias:
            spec["b"] = ((H,), "(H,)")
        return spec

    def cell_to_native(self, params, tag: str) -> Native:
        native = {"W_h": concatenate_kernels(params.W_hh, params.W_hx)}
        if params.has_bias:
            native["b"] = params.b
        return native

    def cell_from_native(self, native: Native, tag: str):
        W_h = np.asarray(native["W_h"])
        H = W_h.shape[0]
        b = native.get("b")
        return self.params(W_h[:, H:], W_h[:, :H], b, None if b is None else np.zeros_like(b))

    def recurrent_kernel(self, config) -> str:
        return "W_h"  # (H, H+I): its rows are the hidden size


# --- the test plans: the mistakes each layout invites ---------------------------------------------------

SPLIT_MUTATIONS = {
    "W_hx transposed": transposed("W_hx"),
    "W_hh transposed": transposed("W_hh"),
    "W_hx and W_hh swapped": swapped("W_hx", "W_hh"),
    "b_h dropped": scaled("b_h", 0.0),
    "b_x doubled": scaled("b_x", 2.0),
}


def _transpose_block(W_h: np.ndarray, hidden_block: bool) -> np.ndarray:
    """W_h = [W_hh | W_hx] with one block transposed; a non-square W_hx block is transposed
    and then reshaped back to its shape, the other form of the same mistake."""
    H = W_h.shape[0]
    W_hh, W_hx = W_h[:, :H], W_h[:, H:]
    if hidden_block:
        return np.hstack([W_hh.T, W_hx])
    return np.hstack([W_hh, W_hx.T.reshape(W_hx.shape)])


CONCATENATED_MUTATIONS = {
    "input columns first in W_h (wrong concatenation order)":
        lambda n: {**n, "W_h": np.roll(n["W_h"], -n["W_h"].shape[0], axis=1)},
    "W_hh block transposed": lambda n: {**n, "W_h": _transpose_block(n["W_h"], hidden_block=True)},
    "W_hx block transposed": lambda n: {**n, "W_h": _transpose_block(n["W_h"], hidden_block=False)},
    "b dropped": scaled("b", 0.0),
    "b doubled": scaled("b", 2.0),
}


# --- the runners: the reference's own step functions, in the run's dtype ------------------------------


class SplitFormulaRunner:
    """Formula 2, h_t = g(W_hh h_{t-1} + W_hx x_t + b), the reference's ``rnn_sequence``."""

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        dtype, H = self.check_call(native, xs, state, config, g)
        h0 = self.cell_state(state, xs.shape[1], H, dtype)["h"]
        return {"h": rnn_sequence(self.cell_from_native(native, "").replace(activation=g), xs, h0, formula="split")}


class ConcatenatedFormulaRunner:
    """Formula 1, h_t = g(W_h [h_{t-1}; x_t] + b), one matmul per step."""

    def run_native(self, native: Native, xs, state, config, g: str) -> dict:
        dtype, H = self.check_call(native, xs, state, config, g)
        h, outputs = self.cell_state(state, xs.shape[1], H, dtype)["h"].T, []
        for x in xs:
            h = concatenated_step(native["W_h"], h, x.T, native.get("b"), g)
            outputs.append(h.T)
        return {"h": np.stack(outputs)}


# --- the systems ------------------------------------------------------------------------------------------


class NumpySplit(SplitFormulaRunner, LectureSplitMapping, Adapter):
    name = "numpy-split"
    cell = "reference.split_step"
    family = "rnn"
    distributions = ("numpy",)
    mutations = SPLIT_MUTATIONS


class NumpyConcatenated(ConcatenatedFormulaRunner, LectureConcatenatedMapping, Adapter):
    name = "numpy-concat"
    cell = "reference.concatenated_step"
    family = "rnn"
    distributions = ("numpy",)
    mutations = CONCATENATED_MUTATIONS
