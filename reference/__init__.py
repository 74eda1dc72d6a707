"""NumPy reference: the lecture's two RNN formulas, the gated cells, and the canonical parameters."""

from rnn_equivalence.reference.activations import ACTIVATIONS, activation
from rnn_equivalence.reference.cells import sequence, step
from rnn_equivalence.reference.params import CellParams, random_inputs, random_state
from rnn_equivalence.reference.rnn import FORMULAS, concatenate_kernels, concatenated_step, rnn_sequence, split_step
from rnn_equivalence.reference.stack import StackParams, drive, run_stack

__all__ = [
    "ACTIVATIONS", "FORMULAS", "CellParams", "StackParams", "activation", "concatenate_kernels",
    "concatenated_step", "drive", "random_inputs", "random_state", "rnn_sequence", "run_stack", "sequence",
    "split_step", "step",
]
