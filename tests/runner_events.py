"""ansible-runner's job events read while a run is still writing them.

ansible-runner's callback writes each event to ``<uuid>-partial.json``; the runner then writes the finished event
to ``<counter>-<uuid>.json`` and removes the partial file. A reader that globs the folder can therefore see a file
that is gone by the time it opens it, or a finished file still being written. Both are read again on the next poll.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def written_events(runs: Path, seen: set[Path] | None = None) -> Iterator[dict[str, Any]]:
    """The finished job events under a runs folder that can be read whole now, skipping those in ``seen`` (and
    adding what it yields to it, so a poll loop reads each event once)."""
    for path in sorted(runs.glob("**/ansible/artifacts/*/job_events/*.json")):
        if path.name.endswith("-partial.json") or (seen is not None and path in seen):
            continue
        try:
            event = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue  # removed or still being written: the next poll reads it
        if seen is not None:
            seen.add(path)
        yield dict(event)


def task_of(event: dict[str, Any]) -> str:
    """The name of the task an event is about; "" for events of no task."""
    return str((event.get("event_data") or {}).get("task", ""))
