"""The child processes that host other Keras backends: a child that dies is reported, not a BrokenPipe."""

import pytest

from rnn_equivalence.frameworks.child import ChildProcess


def test_a_dead_child_is_reported_with_its_exit_code():
    child = ChildProcess({"RNN_EQ_TEST_CHILD": "1"})  # no framework is imported until an adapter is made
    try:
        child.process.kill()
        child.process.wait()
        for _ in range(2):  # the first call after the death, and any later one
            with pytest.raises(RuntimeError, match=r"child process for adapter 'keras-jax' .* exited with code -9"):
                child.call("keras-jax", "describe")
    finally:
        child.process.kill()
