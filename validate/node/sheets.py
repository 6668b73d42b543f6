"""Vendor tables shipped as data beside the node checks, as tab-separated sheets (NVIDIA's Xid catalog and its
NVLink 5 decode sheet): a reviewer compares them with the vendor's sheet cell by cell."""

from __future__ import annotations

from importlib.resources import files


def table(name: str) -> list[dict[str, str]]:
    """The rows of the sheet ``name``, each a dict by the header row's column names; lines starting with # are
    comments (the source)."""
    text = files("gpuready.validate.node").joinpath(name).read_text(encoding="utf-8")
    header, *rows = (line.split("\t") for line in text.splitlines() if line and not line.startswith("#"))
    return [dict(zip(header, row, strict=True)) for row in rows]
