"""The example inventories gpuready ships, written out where a user can read and edit them."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core.errors import BadInput, Unreachable

if TYPE_CHECKING:
    # importlib.resources.abc is 3.11's name; importlib.abc has it on every Python gpuready runs on.
    from importlib.abc import Traversable


def _examples() -> dict[str, Traversable]:
    shipped = files("gpuready.inventories")
    return {e.name: e for e in sorted(shipped.iterdir(), key=lambda e: e.name) if (e / "hosts.yml").is_file()}


def names() -> list[str]:
    return list(_examples())


def _copy(source: Traversable, target: Path) -> list[Path]:
    written = []
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            written += _copy(entry, target / entry.name)
        elif entry.name.endswith(".yml"):
            (target / entry.name).write_bytes(entry.read_bytes())
            written.append(target / entry.name)
    return written


def write(folder: Path, only: list[str] | None = None) -> tuple[list[Path], list[Path]]:
    """Copy the example inventories (or ``only`` those) into ``folder/<name>``; returns the inventories written and
    those kept. An inventory already there is kept as it is, never overwritten: the user may have edited it."""
    examples = _examples()
    chosen = only or list(examples)
    unknown = [n for n in chosen if n not in examples]
    if unknown:
        raise BadInput(f"unknown example inventory {', '.join(unknown)} (known: {', '.join(examples)})")
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{folder} is not a folder")
    kept = [folder / n for n in chosen if (folder / n).exists()]
    written = [folder / n for n in chosen if folder / n not in kept]
    try:
        for path in written:
            _copy(examples[path.name], path)
    except OSError as e:
        raise Unreachable(f"cannot write the example inventories into {folder}: {e.strerror or e}") from e
    return written, kept
