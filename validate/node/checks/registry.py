"""The catalogue's register: every check, in the order it runs, with what it depends on."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
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


def check(
    id: str, what: str, remedy: str, depends: tuple[str, ...] = ()
) -> Callable[[Callable[[Node, Verdict], Check]], Callable[[Node], Check]]:
    """Register a check; it is called with the node and a :class:`Verdict` that knows this check's id, the
    node's name and ``remedy``. What the decorator returns takes the node alone."""

    def register(judge: Callable[[Node, Verdict], Check]) -> Callable[[Node], Check]:
        unknown = [d for d in depends if d not in {c.id for c in CATALOGUE}]
        if unknown:  # a dependency must come earlier in the catalogue, so it has run when this one runs
            raise ValueError(f"check {id}: depends on {unknown}, not declared before it")

        @functools.wraps(judge)
        def run(node: Node) -> Check:
            return judge(node, Verdict(id, node.name, remedy))

        CATALOGUE.append(CheckDef(id, run, remedy, what, depends))
        return run

    return register
