"""The code on docs/ANSWERS.md runs: each question's mapping snippet, in the asker's frameworks, ends in a check
against the other framework's output, and each ``convert()`` one-liner maps real weights. A snippet that fails
here is a wrong answer on the page (watched red: the GRU snippet without its gate reordering fails its check).

The frameworks a snippet imports are those of suite systems (``SYSTEM_OF``): a run that does not select them
skips the snippet, a missing framework skips it locally and fails it under CI=true, as the suite's own tests. A
system that lives in an environment of its own (MLX, ncnn, litert-torch, ExecuTorch: ``Adapter.environment``) is not
selected in the main one: its snippet is skipped there with a reason naming that environment and how to run the
snippet in it.
Each snippet costs well under a second once its frameworks are imported (their import: the worker's, shared), but
litert-torch's and ExecuTorch's, which convert a model (some 5 s).
"""

import importlib
import os
import re
import sys

import pytest

from docgen.answers import PAGE
from docgen.questions import QUESTIONS
from rnn_equivalence.frameworks import adapter_class
from rnn_equivalence.harness.selection import ENV_VAR, is_ci

SYSTEM_OF = {"torch": "torch", "keras": "keras-tf", "tf_keras": "tf-keras", "numpy": "numpy-split", "mlx": "mlx",
             "pnnx": "ncnn-lstm", "ncnn": "ncnn-lstm", "litert_torch": "litert-torch-lstm",
             "ai_edge_litert": "litert-torch-lstm", "executorch": "executorch-gru"}
WITH_SNIPPETS = [q for q in QUESTIONS if q.snippet]


def require_modules(require_system, modules):
    systems = ",".join(dict.fromkeys(SYSTEM_OF[module] for module in modules))
    for module in modules:
        system = SYSTEM_OF[module]
        try:
            require_system(system)
        except pytest.skip.Exception as skipped:
            session = adapter_class(system).environment
            if not session:
                raise
            # Not a silent pass: the reason says where the snippet runs (its system's nox session) and how.
            pytest.skip(f"{skipped.msg}: {module} is {system}'s, which runs in an environment of its own "
                        f"(nox -s {session}); there: {ENV_VAR}={systems} pytest tests/harness/test_answer_snippets.py")
        try:
            importlib.import_module(module)
        except ImportError as error:
            if is_ci(os.environ):
                pytest.fail(f"{module} is needed by a snippet of docs/ANSWERS.md: {error} (an error under CI=true)")
            pytest.skip(f"{module} not available: {error}")


def test_every_snippet_declares_what_it_imports():
    assert WITH_SNIPPETS
    for question in WITH_SNIPPETS:
        # The frameworks it imports; numpy and Python's own modules (io) need no declaring.
        imported = set(re.findall(r"^(?:import|from) (\w+)", question.snippet, re.M)) - {"numpy",
                                                                                         *sys.stdlib_module_names}
        assert imported == set(question.snippet_needs), (question.anchor, imported)


@pytest.mark.xdist_group("answer-snippets")  # one worker imports the frameworks once
@pytest.mark.parametrize("question", WITH_SNIPPETS, ids=[q.anchor for q in WITH_SNIPPETS])
def test_the_snippet_runs_and_its_check_holds(question, require_system):
    require_modules(require_system, question.snippet_needs)
    assert f"```python\n{question.snippet.rstrip()}\n```" in PAGE.read_text()  # the code the page shows
    exec(compile(question.snippet, f"docs/ANSWERS.md#{question.anchor}", "exec"), {"__name__": "snippet"})


def one_liners():
    text = PAGE.read_text()
    return re.findall(r"b_weights = convert\(a_weights, '([^']+)', '([^']+)', config=LayerConfig\(1, False\)\)", text)


@pytest.mark.parametrize("pair", one_liners(), ids="-".join)
def test_the_convert_one_liner_maps_real_weights(pair):
    """The page's one-liner, run on the weights the first system holds (NumPy only: the mapping imports no
    framework): it gives the second system's names and shapes, and its kernels read back bitwise. (That the
    mapping keeps the function, biases included, is tests/mapping/test_convert.py's, for every pair.)"""
    import numpy as np

    from rnn_equivalence.frameworks import adapter_class, mapping
    from rnn_equivalence.harness.cases import case_of
    from rnn_equivalence.reference.config import LayerConfig

    a, b = pair
    config = LayerConfig(1, False)
    stack = case_of(adapter_class(a), 3, 5, 1, 1, 0, config).stack()
    namespace = {"a_weights": mapping(a).to_native(stack, config)}
    exec("from rnn_equivalence.frameworks import convert\nfrom rnn_equivalence.reference.config import LayerConfig\n"
         f"b_weights = convert(a_weights, {a!r}, {b!r}, config=LayerConfig(1, False))", namespace)
    b_weights = namespace["b_weights"]
    spec = mapping(b).native_spec(config, 3, 5)
    assert set(b_weights) == set(spec), (sorted(b_weights), sorted(spec))
    for (_, _, want), (_, _, have) in zip(stack.cells(), mapping(b).from_native(b_weights, config).cells(),
                                          strict=True):
        np.testing.assert_array_equal(have.W_x, np.asarray(want.W_x, np.float32))
        np.testing.assert_array_equal(have.W_h, np.asarray(want.W_h, np.float32))


def test_every_question_that_maps_weights_shows_a_one_liner():
    assert len(one_liners()) >= sum(1 for q in QUESTIONS if any(c.verdict != "No" for c in q.claims)) - 1
