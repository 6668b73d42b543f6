"""The tests' reader of ansible-runner's job events while a run still writes them (tests/runner_events.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.runner_events import written_events


def _events_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "0001-run" / "ansible" / "artifacts" / "a1b2" / "job_events"
    folder.mkdir(parents=True)
    return folder


def test_partial_and_half_written_events_are_left_for_the_next_poll(tmp_path: Path) -> None:
    folder = _events_folder(tmp_path)
    (folder / "1-aaa.json").write_text(json.dumps({"event": "playbook_on_start"}))
    (folder / "bbb-partial.json").write_text(json.dumps({"event": "runner_on_ok"}))
    (folder / "2-ccc.json").write_text('{"event": "runner_on_o')
    seen: set[Path] = set()
    assert [e["event"] for e in written_events(tmp_path / "runs", seen)] == ["playbook_on_start"]
    (folder / "2-ccc.json").write_text(json.dumps({"event": "runner_on_ok"}))
    assert [e["event"] for e in written_events(tmp_path / "runs", seen)] == ["runner_on_ok"]
    assert list(written_events(tmp_path / "runs", seen)) == []


def test_an_event_file_removed_between_listing_and_reading_is_skipped(tmp_path: Path) -> None:
    folder = _events_folder(tmp_path)
    (folder / "1-aaa.json").write_text(json.dumps({"event": "first"}))
    (folder / "2-bbb.json").write_text(json.dumps({"event": "second"}))
    (folder / "3-ccc.json").write_text(json.dumps({"event": "third"}))
    events = written_events(tmp_path / "runs")
    assert next(events)["event"] == "first"
    (folder / "2-bbb.json").unlink()
    assert [e["event"] for e in events] == ["third"]
