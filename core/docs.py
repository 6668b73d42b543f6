"""Where the manual's pages are: docs/ in a checkout, gpuready/docs in an installed wheel (package data of
``gpuready.docs``). A message that sends the reader to a page names it by that path, never by ``docs/...``,
which exists only in a checkout. The roles get the folder as the variable ``gpuready_docs_dir`` (the runner)."""

from __future__ import annotations

from pathlib import Path


def folder() -> Path:
    """The folder of the manual's pages."""
    from importlib.resources import files

    return Path(str(files("gpuready.docs")))


def page(name: str, section: str = "") -> str:
    """``<folder>/<name>``, followed by ``, "<section>"`` when a section is named: what a message cites."""
    path = folder() / name
    return f'{path}, "{section}"' if section else str(path)
