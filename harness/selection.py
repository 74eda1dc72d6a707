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
