"""NumPy reference: the lecture's two RNN formulas, the gated cells, and the canonical parameters."""

from reference.activations import ACTIVATIONS, activation
from reference.cells import sequence, step
from reference.params import CellParams, random_inputs, random_state
from reference.rnn import FORMULAS, concatenate_kernels, concatenated_step, rnn_sequence, split_step
from reference.stack import StackParams, drive, run_stack

__all__ = [
    "ACTIVATIONS", "FORMULAS", "CellParams", "StackParams", "activation", "concatenate_kernels",
    "concatenated_step", "drive", "random_inputs", "random_state", "rnn_sequence", "run_stack", "sequence",
    "split_step", "step",
]
