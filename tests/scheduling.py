"""How pytest-xdist hands the test groups to its workers: the longest first, so the workers end together.

A group's length is the sum of its tests' last recorded durations (setup, call and teardown), kept in the
user's cache dir beside the lab's builds, so a warm run orders by what the previous runs measured. A test
with no record counts as :data:`UNKNOWN_TEST_S`: on a cold run that is xdist's own order (most tests first).
Longest processing time first (Graham, 1969) ends within 4/3 of the best possible split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuready.lab import cache_dir

#: Where the controller keeps each test's last duration, by test id.
RECORD = cache_dir() / "test-seconds.json"
#: A test never timed: most tests are quick, and on a cold run this keeps xdist's order by count.
UNKNOWN_TEST_S = 1.0


def load(path: Path = RECORD) -> dict[str, float]:
    try:
        seconds = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in seconds.items() if isinstance(v, (int, float))} if isinstance(seconds, dict) else {}


def save(measured: Mapping[str, float], path: Path = RECORD) -> None:
    """Merge this run's durations into the record: tests this run did not select keep theirs."""
    if not measured:
        return
    merged = {**load(path), **measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(merged, indent=0, sort_keys=True))
    os.replace(partial, path)


def group_seconds(tests: Iterable[str], seconds: Mapping[str, float]) -> float:
    return sum(seconds.get(test, UNKNOWN_TEST_S) for test in tests)


def longest_first(base: type, split: Callable[[str], str], seconds: Mapping[str, float]) -> type:
    """``base`` (xdist's LoadScopeScheduling) with ``split`` as its grouping and the longest group handed out first.

    xdist gives a worker the next group whenever it has two tests or fewer left; only which group is next
    changes here."""

    class LongestFirst(base):  # type: ignore[valid-type,misc]
        def _split_scope(self, nodeid: str) -> str:
            return split(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            longest = max(self.workqueue, key=lambda group: group_seconds(self.workqueue[group], seconds))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return LongestFirst
