"""NumPy reference: the lecture's two RNN formulas and the canonical parameters."""

from reference.activations import ACTIVATIONS, activation
from reference.params import RNNParams, random_inputs, random_state
from reference.rnn import (
    FORMULAS,
    concatenate_kernels,
    concatenated_step,
    rnn_sequence,
    rnn_step,
    split_step,
)

__all__ = [
    "ACTIVATIONS", "FORMULAS", "RNNParams", "activation", "concatenate_kernels",
    "concatenated_step", "random_inputs", "random_state", "rnn_sequence", "rnn_step",
    "split_step",
]
