"""The catalogue's register: every check, in the order it runs, with what it depends on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuready.core.results import Check
from gpuready.validate.node.node import Node


@dataclass(frozen=True)
class CheckDef:
    id: str
    run: Callable[[Node], Check]
    remedy: str
    what: str
    #: Checks whose failure explains this one's: when one of them failed (or could not run), this check
    #: is skipped with "depends on <id>" instead of failing again for the same root cause.
    depends: tuple[str, ...] = ()


CATALOGUE: list[CheckDef] = []

#: Message prefix of a check skipped because a check it depends on did not pass.
DEPENDS = "depends on "


def check(
    id: str, what: str, remedy: str, depends: tuple[str, ...] = ()
) -> Callable[[Callable[[Node], Check]], Callable[[Node], Check]]:
    def register(func: Callable[[Node], Check]) -> Callable[[Node], Check]:
        unknown = [d for d in depends if d not in {c.id for c in CATALOGUE}]
        if unknown:  # a dependency must come earlier in the catalogue, so it has run when this one runs
            raise ValueError(f"check {id}: depends on {unknown}, not declared before it")
        CATALOGUE.append(CheckDef(id, func, remedy, what, depends))
        return func

    return register
