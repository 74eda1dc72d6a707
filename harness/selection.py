"""Which systems a run tests, and whether a missing framework is a skip or an error.

``--systems`` (or ``$RNN_EQ_SYSTEMS``) names them; ``--frameworks`` and ``$RNN_EQ_FRAMEWORKS``, the
older spelling, are the same thing.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from rnn_equivalence.frameworks import ADAPTERS, adapter_class

ENV_VAR = "RNN_EQ_SYSTEMS"
OLD_ENV_VAR = "RNN_EQ_FRAMEWORKS"  # the same, under its older name


@dataclass(frozen=True)
class Selection:
    names: tuple[str, ...]
    explicit: bool  # named by the option or the environment variable
    ci: bool  # CI=true: nothing may be skipped for a missing framework

    @property
    def missing_is_error(self) -> bool:
        return self.explicit or self.ci


def is_ci(environ) -> bool:
    return environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def select(option: str | None, environ) -> Selection:
    """Systems from ``--systems``, else ``RNN_EQ_SYSTEMS`` (or ``RNN_EQ_FRAMEWORKS``), else all of them.

    Raises ValueError naming the unknown names and listing the valid ones.
    """
    variable = ENV_VAR if ENV_VAR in environ else OLD_ENV_VAR
    value = option if option is not None else environ.get(variable)
    ci = is_ci(environ)
    if value is None or value.strip() in ("", "all"):
        # The systems whose tool lives in an environment of its own (``Adapter.environment``, a nox
        # session) run there, named; a run that does not name them leaves them out (``elsewhere``).
        return Selection(tuple(n for n in ADAPTERS if not adapter_class(n).environment), explicit=False, ci=ci)
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        source = "--systems" if option is not None else variable
        raise ValueError(
            f"{source}: unknown system(s) {', '.join(map(repr, unknown))}; "
            f"valid names: {', '.join(ADAPTERS)} (comma-separated, or 'all')"
        )
    return Selection(names, explicit=True, ci=ci)


# A tool with no system (it refuses every node: frameworks/onnx2torch_export.py) is tested in its nox session,
# which names itself here; a run elsewhere deselects those tests, as it leaves out a session system.
ENVIRONMENT_VAR = "RNN_EQ_ENVIRONMENT"


def in_environment(session: str, environ) -> bool:
    """True where the run is the nox session ``session``'s (``RNN_EQ_ENVIRONMENT``, set by noxfile.py): there a
    missing tool is an error, as a session system's is (its session names it, and sets CI=true)."""
    return environ.get(ENVIRONMENT_VAR, "").strip() == session


def tested_here(session: str, module: str, environ) -> bool:
    """Whether a run tests a tool with no system that lives in the nox session ``session``: in that session, or
    where ``module`` is installed. Elsewhere its tests are deselected, as a session system's in a run that does
    not name it (conftest.py, the marker ``environment``)."""
    return in_environment(session, environ) or importlib.util.find_spec(module) is not None


def elsewhere(names) -> dict[str, list[str]]:
    """The systems a run of ``names`` leaves to their own environments: {nox session: [systems]}."""
    left: dict[str, list[str]] = {}
    for name in ADAPTERS:
        if name not in names and adapter_class(name).environment:
            left.setdefault(adapter_class(name).environment, []).append(name)
    return left


def uninstalled_modules(names) -> list[tuple[str, str]]:
    """(framework, module) for every module a framework needs that is not installed at all.

    Cheap (no import): a module that is installed but fails to import is
    caught later, when its adapter loads.
    """
    return [(name, module) for name in names for module in adapter_class(name).requires
            if importlib.util.find_spec(module) is None]
