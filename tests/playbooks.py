"""Playbooks written for a test: a ``site.yml`` in a folder that ``GPUREADY_PLAYBOOKS`` points gpuready at."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tests.runner_events import task_of, written_events

if TYPE_CHECKING:
    from tests.processes import Child


def site(tmp_path: Path, *plays: dict[str, Any]) -> Path:
    """``tmp_path/playbooks/site.yml`` with these plays; returns the folder."""
    playbooks = tmp_path / "playbooks"
    playbooks.mkdir()
    (playbooks / "site.yml").write_text(yaml.safe_dump(list(plays)))
    return playbooks


def waiting_play(
    wait: dict[str, int], *, prefix: str = "Slow", title: str = "A play that waits", first_task: bool = True
) -> dict[str, Any]:
    """A play on gpu_nodes (tag ``slow``) whose task ``<prefix> | Wait`` pauses for ``wait`` (ansible.builtin.pause's
    minutes or seconds), after a task that returns at once unless ``first_task`` is false: a run to cancel."""
    tasks: list[dict[str, Any]] = []
    if first_task:
        tasks.append({"name": f"{prefix} | First task", "ansible.builtin.debug": {"msg": "first"}})
    tasks.append({"name": f"{prefix} | Wait", "ansible.builtin.pause": wait})
    return {
        "name": f"{prefix} | {title}",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "tags": ["slow"],
        "tasks": tasks,
    }


def wait_until_task_runs(
    child: Child, runs: Path, task: str = "Slow | Wait", limit: float = 90, poll: float = 0.2
) -> None:
    """Until the run's Ansible events (under ``runs``) show ``task`` started; the child must still run."""
    deadline = time.monotonic() + limit
    seen: set[Path] = set()
    while not any(task_of(event) == task for event in written_events(runs, seen)):
        assert time.monotonic() < deadline and child.proc.poll() is None, child.stderr
        time.sleep(poll)
