"""Finding a finished run's folder: by path, by its number in the artifacts folder, or the latest one."""

from __future__ import annotations

import glob
from pathlib import Path

from gpuready.core.artifacts import configured_root, run_number
from gpuready.core.errors import BadInput


def root(artifacts: Path | None = None) -> Path:
    """The artifacts folder a command would write to (without creating it)."""
    return configured_root(artifacts)


def runs(folder: Path) -> list[Path]:
    """The run folders under ``folder`` that hold a summary.json, oldest first (by their number)."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if run_number(p.name) is not None and (p / "summary.json").is_file()]
    return sorted(found, key=lambda p: (run_number(p.name) or 0, p.name))


def resolve(spec: str | None, artifacts: Path | None = None) -> Path:
    """The run folder ``spec`` names: a folder (or its summary.json), a glob matching one folder, a run number
    (``7``, ``0007``) in the artifacts folder, or (None) the latest run there."""
    where = root(artifacts)
    if spec is None:
        found = runs(where)
        if not found:
            raise BadInput(f"no finished run in {where} (give a run folder, or --artifacts where the runs are)")
        return found[-1]
    path = Path(spec)
    if path.name == "summary.json" and path.is_file():
        return path.parent
    if path.is_dir():
        if not (path / "summary.json").is_file():
            raise BadInput(f"{spec}: no summary.json in it; give a gpuready run folder")
        return path
    if spec.isdigit():
        number = int(spec)
        matches = [p for p in runs(where) if run_number(p.name) == number]
        if not matches:
            raise BadInput(f"no run number {number} in {where}")
        return matches[-1]
    if glob.has_magic(spec):
        matches = sorted(Path(p) for p in glob.glob(spec) if (Path(p) / "summary.json").is_file())
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BadInput(f"{spec}: matches no run folder")
        raise BadInput(f"{spec}: matches {len(matches)} run folders ({matches[0].name}, ...); name one")
    raise BadInput(f"{spec}: no such run folder (give a folder, a run number in {where}, or nothing for the latest)")


def with_folder(spec: str, artifacts: Path | None = None) -> str:
    """``RUN[=LABEL]`` with RUN resolved to its folder (a number, a glob), the label kept."""
    run, sep, label = spec.partition("=")
    if Path(run).exists():
        return spec
    try:
        return f"{resolve(run, artifacts)}{sep}{label}"
    except BadInput:
        return spec  # the loader names what is wrong with it
