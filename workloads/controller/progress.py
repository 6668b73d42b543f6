"""A run's progress on the terminal while it trains: rank 0's latest ``GPUREADY_PROGRESS`` line, read from the
size's log as the launcher writes it, relayed at most once per period. Only rank 0 reports, so a sweep on 1000
nodes prints as few lines as one on a laptop. A launcher whose log arrives only at the end (Kubernetes) shows
none; the run's start and end lines still come."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuready.workloads.worker import PROGRESS_PREFIX

_LINE = re.compile(re.escape(PROGRESS_PREFIX) + r"(\{.*\})")
#: How much of a log's end is read for its latest line: the lines are short, and a log can be long.
TAIL_BYTES = 64 * 1024


def logs(folder: Path, workers: int) -> list[Path]:
    """Where the launchers write a size's log as it runs: local and ssh (one file, or one per worker while they
    run), Slurm (its output file)."""
    return sorted(
        [
            *folder.glob(f"workers-{workers}.log"),
            *folder.glob(f"workers-{workers}.*.log"),
            *folder.glob(f"slurm-{workers}w-*.out"),
        ]
    )


def latest(paths: list[Path]) -> dict[str, Any] | None:
    """The furthest progress line in ``paths``' ends, or None."""
    best: dict[str, Any] | None = None
    for path in paths:
        try:
            with path.open("rb") as fh:
                fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
                text = fh.read().decode(errors="replace")
        except OSError:
            continue  # not written yet, or gone between the listing and the read
        for match in _LINE.finditer(text):
            try:
                line = json.loads(match.group(1))
            except ValueError:
                continue  # a line cut by the tail's start, or still being written
            if not (isinstance(line, dict) and isinstance(line.get("step"), int)):
                continue
            if best is None or line["step"] > best["step"]:
                best = line
    return best


def describe(line: dict[str, Any]) -> str:
    """``step 12/53, 45.2 images/s so far``, or ``step 1/53 (warm-up, not timed)``."""
    head = f"step {line['step']}/{line.get('steps', '?')}"
    if line.get("warmup") or "images_per_second" not in line:
        return f"{head} (warm-up, not timed)"
    return f"{head}, {float(line['images_per_second']):.1f} images/s so far"


class Relay:
    """While a size runs (``with Relay(...)``), every ``every_s`` seconds: its furthest progress line, when it
    moved since the last one, as ``  <who>: step ...`` through ``note``."""

    def __init__(self, folder: Path, workers: int, who: str, every_s: float, note: Callable[[str], None]) -> None:
        self.folder, self.workers, self.who, self.every_s, self.note = folder, workers, who, every_s, note
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{workers}", daemon=True)
        self._said = 0

    def __enter__(self) -> Relay:
        if self.every_s > 0:
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            line = latest(logs(self.folder, self.workers))
            if line is not None and line["step"] > self._said:
                self._said = line["step"]
                self.note(f"  {self.who}: {describe(line)}")
