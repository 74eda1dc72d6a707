"""Which parameter sets each test of the suite gets, computed without pytest.

A property test asks for some of ``system``, ``activation_spec``, ``dtype``, ``case``, ``mutation_case`` and
``mutation`` (or ``system_pair`` and ``pair_case``), and says, by its markers, which design its cases come
from, which systems it applies to, and which of the known upstream bugs it can meet. ``Request`` holds what
it asked; ``system_parameter_sets`` and ``pair_parameter_sets`` return its parameter sets as data, each with
the known issue that breaks it (None where none does). conftest.py's ``pytest_generate_tests`` is one
front-end of them: it reads the markers into a ``Request`` and marks each set (a strict expected failure
where a row meets it); tests/harness/test_parametrize.py calls them directly.

A test that applies to a system and gets no parameter set for it is an error naming both, never a silent
drop (a design with no cases, a pair list with no case to compare on).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from rnn_equivalence.frameworks import ADAPTERS, adapter_class
from rnn_equivalence.frameworks.plan import dtypes_for
from rnn_equivalence.harness.cases import (
    cases_for, chunked_cases, eager_cases, gradient_cases, mutation_cases, mutations_for, optimizer_cases,
    option_cases, padded_cases, pair_cases,
)
from rnn_equivalence.harness.known_issues import known_issue, rows_of, scopes_of

# The case designs a test's ``case`` comes from (``design(name)`` marker): whole sequences by default,
# padded batches, chunked runs, options changed or dropped, gradients, an optimizer step, a compiled
# system's eager run.
DESIGNS = {"whole": cases_for, "padded": padded_cases, "chunked": chunked_cases, "options": option_cases,
           "gradients": gradient_cases, "optimizer": optimizer_cases, "eager": eager_cases}
# The arguments a system test may take, in the order of its parameter sets.
ARGUMENTS = ("system", "activation_spec", "dtype", "case", "mutation_case", "mutation")


@dataclass(frozen=True)
class Request:
    """What one test asks for: its id (for errors), the arguments it takes (of ``ARGUMENTS``), the design
    its cases come from, the known-issue scope it can meet (None: it meets none), and whether the cases a
    known issue breaks are left out rather than run as expected failures (``not_where_known``: where the
    test cannot say anything there, as Adam's step hides a float32 run in float64)."""

    test: str
    arguments: tuple[str, ...]
    design: str = "whole"
    scope: str | None = None
    excluded: bool = False

    @property
    def capability(self) -> str:
        """What the test's dtypes are those of (``rnn_equivalence.frameworks.plan.CAPABILITY_DTYPES``): its
        design's where it takes a case, the wrong mappings' where it takes one, "" otherwise."""
        if "case" in self.arguments:
            return self.design
        return "mutations" if "mutation" in self.arguments else ""


def full_depth_only(cls) -> bool:
    """The predicate short of full depth of a test marked ``applies_to(..., short_of_full=False)``: no system, so
    that the test is deselected there (its cost written down in rnn_equivalence.harness.depth), not an error."""
    return False


def predicate_at(marker, depth: str) -> Callable | None:
    """A test's ``applies_to`` predicate at ``depth``: its ``short_of_full`` one short of full depth where it
    has one (a test that re-checks, system after system, what one system per converter shows:
    rnn_equivalence.harness.depth; False: the test runs at full depth only), its own otherwise; None without the
    marker (every system)."""
    if marker is None:
        return None
    short = marker.kwargs.get("short_of_full")
    if short is False and depth != "full":
        return full_depth_only
    return short if short is not None and depth != "full" else marker.args[0]


def applicable(predicate: Callable | None, names, test: str) -> list[type]:
    """The selected adapter classes (``names``) ``predicate`` (a test's ``applies_to``) admits. A predicate
    that admits no system at all, selected or not (a renamed system, a removed attribute), is an error:
    the test would otherwise vanish from every run; but ``full_depth_only``, which says so on purpose (its test's own
    predicate is checked at full depth)."""
    if predicate is full_depth_only:
        return []
    if predicate is not None and not any(predicate(cls) for cls in ADAPTERS.values()):
        raise ValueError(f"{test}: its applies_to predicate admits none of the {len(ADAPTERS)} systems")
    classes = [adapter_class(name) for name in names]
    return [cls for cls in classes if predicate is None or predicate(cls)]


def system_parameter_sets(cls, request: Request, depth: str, seed: int) -> list[tuple[tuple, object]]:
    """(values in ``request.arguments``' order, the known issue that breaks them or None), for one system.

    Each case of the test's design in the dtypes the depth gives it (``Case.runs_in``), with each activation
    where the test takes ``activation_spec`` without cases, and each wrong mapping where it takes
    ``mutation``. What an upstream bug breaks is shown on the quick design (every level once) short of full
    depth: a strict expected failure needs only to keep failing; a row the quick design never meets runs
    on the first case of the design that meets it. An error where nothing comes out."""
    arguments, make_cases = request.arguments, DESIGNS[request.design]
    system_dtypes = dtypes_for(cls, request.capability, depth)  # of the system's dtypes, those the test runs in
    marked = request.scope is not None
    # The table's rows this test can meet (rnn_equivalence.harness.known_issues), for whole runs and padded batches.
    rows = {padded: rows_of(cls.name, scopes_of(request.scope, request.design, padded)) if marked else []
            for padded in (False, True)}
    # A case carries its activation; without cases, ``activation_spec`` runs over the system's activations.
    cases = make_cases(cls, depth, seed) if "case" in arguments else [None]
    # The options design is small: its known issues show on every case of it.
    short = depth != "full" and make_cases is not option_cases
    known = rows[False] or rows[True]
    broken = make_cases(cls, "quick", seed) if known and "case" in arguments and short else cases

    def row_of(case, dtype, spec=None):
        here = rows[case is not None and case.padding is not None]
        return known_issue(here, cls.family, case.activation if case else spec, dtype, case)

    if broken is not cases:  # a row the quick design never meets runs on the first case that meets it
        met = {row_of(case, dtype) for case in broken for dtype in case.runs_in(system_dtypes)}
        for row in [row for row in dict.fromkeys(rows[False] + rows[True]) if row not in met]:  # in order:
            # every xdist worker must collect the same tests in the same order
            first = next((case for case in cases if any(row_of(case, d) == row for d in case.runs_in(system_dtypes))),
                         None)
            broken = broken + [first] if first is not None else broken

    sets = []
    for case in dict.fromkeys(cases + broken):
        def runs(dtype, case=case):
            return case is None or case in (broken if row_of(case, dtype) else cases)

        dtypes = case.runs_in(system_dtypes) if case is not None else system_dtypes  # the design's dtype factor
        if request.excluded:
            dtypes = [d for d in dtypes if not row_of(case, d)]
        axes = {"system": [cls.name], "dtype": [d for d in dtypes if runs(d)], "case": [case],
                "activation_spec": [case.activation] if case else cls.activations,
                # Every mutation on the square case, where only values can give it away; a non-square
                # one too (where shapes may refuse it) at full depth. Quick: the first mutation only
                # (one case per capability), so that the test is met; default, every one but for a
                # converted system, whose first alone needs a conversion of its own
                # (rnn_equivalence.harness.cases.mutations_for); full: every one.
                "mutation_case": mutation_cases(cls, depth if depth == "full" else "quick")
                if "mutation_case" in arguments else [None],
                "mutation": mutations_for(cls, depth)}
        for values in itertools.product(*(axes[a] for a in arguments)):
            named = dict(zip(arguments, values))
            row = row_of(case, named.get("dtype"), named.get("activation_spec")) if "dtype" in named else None
            sets.append((values, None if request.excluded else row))
    if not sets:
        raise ValueError(f"{request.test}: no parameters for {cls.name}, a system it applies to "
                         f"({request.design} design, depth {depth}): the test would silently not run for it")
    return sets


def anchored_pairs(classes) -> list[tuple[str, str]]:
    """Every cell against one anchor of the same family member (PyTorch's where selected, whose
    layout is the canonical one), not every pair: each is already within its bound of the
    reference, and n - 1 pairs show the same thing as n (n - 1) / 2 in a table one can read."""
    pairs, groups = [], {}
    for cls in classes:
        groups.setdefault((cls.family, cls.variant), []).append(cls.name)
    for members in groups.values():
        anchor = next((name for name in members if name.startswith("torch")), members[0])
        pairs += [(anchor, name) for name in members if name != anchor]
    return pairs


def paired_cases(classes, depth: str, seed: int) -> list[tuple]:
    """(a, b, case): each cell against its anchor (``anchored_pairs``) on every activation and options
    set both compute; one the anchor lacks, against the first other cell of the member that computes
    it (Keras 2's 0.2 hard sigmoid against ONNX's HardSigmoid), each pair of systems once per level.
    A system's known upstream bug at a level (in float32, where pairs run) keeps it out there."""
    by_name = {cls.name: cls for cls in classes}
    out, seen = [], set()

    def computes(cls, case):
        return (case.activation in cls.activations and case.options in cls.options
                and not known_issue(rows_of(cls.name, ("reference",)), cls.family, case.activation, "float32", case))

    for anchor, name in anchored_pairs(classes):
        other = by_name[name]
        family = [cls for cls in classes if (cls.family, cls.variant) == (other.family, other.variant)]
        for case in pair_cases(other, other, depth, seed):
            if not computes(other, case):
                continue
            partner = next((cls for cls in [by_name[anchor], *family]
                            if cls.name != name and computes(cls, case)), None)
            key = (frozenset((partner.name, name)) if partner else None, case.activation, case.options)
            if partner is None or key in seen:
                continue
            seen.add(key)
            out.append((partner.name, name, case.with_(zero_b_hn=case.zero_b_hn or partner.zero_b_hn)))
    return out


def pair_parameter_sets(classes, test: str, depth: str, seed: int) -> list[tuple]:
    """``paired_cases`` of the cells among ``classes``; an error where they make pairs but no case."""
    cells = [cls for cls in classes if not cls.layer]
    sets = paired_cases(cells, depth, seed)
    if anchored_pairs(cells) and not sets:
        raise ValueError(f"{test}: the selected cells make pairs ({anchored_pairs(cells)[:3]}...) but no case "
                         f"to compare them on")
    return sets
