"""Which checks a run selects: ``--only`` and ``--skip`` name check ids or families (the part of an id before
its dot: ``gpu``, ``perf``...), and a selected check brings the checks it depends on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from gpuready.core.errors import BadInput
from gpuready.validate.node.checks.commands import MEASURING
from gpuready.validate.node.checks.registry import CATALOGUE

#: Checks that put work on the GPUs: a CUDA program on each GPU, the measurements, DCGM's diagnostic. The quick
#: set leaves them out, so it only reads (nvidia-smi, the kernel log, sysfs) and fits a Slurm prolog or
#: HealthCheckProgram, which slurmd kills after 60 seconds (slurm.conf(5), HealthCheckProgram).
ACTIVE = ("compute.vector_add", *MEASURING)
#: The named check sets of ``validate this-node --set``.
SETS = ("quick", "full")


@dataclass(frozen=True)
class Selection:
    #: The checks to run; None: the whole catalogue.
    ids: set[str] | None
    #: Checks that ``--only`` left out but a selected check depends on, in catalogue order: they run too,
    #: so a failure of theirs is reported as theirs, and what depends on them is skipped naming it.
    added: list[str]


def families() -> dict[str, list[str]]:
    """Family -> its check ids, in catalogue order."""
    found: dict[str, list[str]] = {}
    for definition in CATALOGUE:
        found.setdefault(definition.id.split(".", 1)[0], []).append(definition.id)
    return found


def expand(names: Iterable[str], flag: str) -> set[str]:
    """The check ids ``names`` stand for; an unknown name is bad input, with the closest known one."""
    groups = families()
    ids = [d.id for d in CATALOGUE]
    chosen: set[str] = set()
    unknown = []
    for name in names:
        if name in groups:
            chosen.update(groups[name])
        elif name in ids:
            chosen.add(name)
        else:
            unknown.append(name)
    if unknown:
        guesses = [(name, _closest(name, ids, list(groups))) for name in unknown]
        hints = [f"{close[0]}" + (f" for {name}" if len(unknown) > 1 else "") for name, close in guesses if close]
        hint = f"; did you mean {', '.join(hints)}?" if hints else ""
        raise BadInput(
            f"--{flag}: unknown check id(s) {', '.join(unknown)}{hint} "
            f"(families: {', '.join(groups)}; ids: {', '.join(ids)})"
        )
    return chosen


def _closest(name: str, ids: list[str], groups: list[str]) -> list[str]:
    """The id that ``name`` begins (a word cut short), else the closest id, else the closest family."""
    return (
        [i for i in ids if i.startswith(name)][:1]
        or difflib.get_close_matches(name, ids, n=1)
        or difflib.get_close_matches(name, groups, n=1)
    )


def dependencies(ids: set[str]) -> set[str]:
    """Every check that one of ``ids`` depends on, directly or through another."""
    depends = {d.id: d.depends for d in CATALOGUE}
    found: set[str] = set()
    todo = [d for i in ids for d in depends[i]]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(depends[current])
    return found


def select(only: Iterable[str] | None, skip: Iterable[str] | None) -> Selection:
    """The checks ``--only`` and ``--skip`` select. A check named by ``--skip`` stays out even where a selected
    check depends on it (the user said so)."""
    skipped = expand(skip, "skip") if skip is not None else set()
    if only is None:
        return Selection({d.id for d in CATALOGUE} - skipped if skipped else None, [])
    chosen = expand(only, "only") - skipped
    needed = dependencies(chosen) - chosen - skipped
    return Selection(chosen | needed, [d.id for d in CATALOGUE if d.id in needed])


def check_set(name: str) -> set[str] | None:
    """The checks of a named set: ``full`` is the whole catalogue (None), ``quick`` every check that only reads."""
    if name not in SETS:
        raise BadInput(f"--set {name!r}: not a check set (one of {', '.join(SETS)})")
    return None if name == "full" else {d.id for d in CATALOGUE if d.id not in ACTIVE}
