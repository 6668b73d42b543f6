"""The vendor sheets shipped beside the node checks: read by their header, comments skipped, a row that does not
fit its header or a kind the references do not know stops the import instead of judging with a wrong table."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.validate.node import references, sheets

SHEETS = Path(references.__file__).parent


def test_every_shipped_sheet_is_read_whole() -> None:
    for path in sorted(SHEETS.glob("*.tsv")):
        lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
        assert len(sheets.table(path.name)) == len(lines) - 1, path.name


def test_a_row_with_a_cell_too_many_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad.tsv").write_text("# a comment\nXid\tMnemonic\n8\tA\n9\tB\textra\n")
    monkeypatch.setattr(sheets, "files", lambda _package: tmp_path)
    with pytest.raises(ValueError):
        sheets.table("bad.tsv")


def test_comments_and_blank_lines_are_not_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ok.tsv").write_text("# source\nXid\tMnemonic\n\n# a note between rows\n8\tA\n")
    monkeypatch.setattr(sheets, "files", lambda _package: tmp_path)
    assert sheets.table("ok.tsv") == [{"Xid": "8", "Mnemonic": "A"}]


@pytest.mark.parametrize(("kind", "lower"), [("peak", 600.0), ("achieved", 800.0), ("floor", 1000.0)])
def test_a_reference_rows_kind_sets_its_lower_bound(kind: str, lower: float) -> None:
    row = {"GPU model": "X", "metric": "memory_bandwidth", "kind": kind, "figure": "1000", "unit": "GB/s"}
    assert references._reference({**row, "source": "s"}).lower == lower


def test_a_reference_row_of_an_unknown_kind_is_refused() -> None:
    row = {"GPU model": "X", "metric": "memory_bandwidth", "kind": "peek", "figure": "1", "unit": "GB/s", "source": "s"}
    with pytest.raises(ValueError, match="unknown kind 'peek'"):
        references._reference(row)
