"""``provision cluster --diff``: the before/after of every change, per task, with the hosts that got the same one
grouped, so a change made on 1,000 hosts reads as one diff. The terminal shows the largest groups of each task,
cut to a screenful; diffs.txt in the run folder has every one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core.artifacts import write_text
from gpuready.core.report.summary import showable

if TYPE_CHECKING:
    from rich.console import Console

    from gpuready.core.runner import PlaybookRun

#: Different diffs shown per task on the terminal (the largest groups first).
DIFFS_SHOWN = 3
#: Lines shown of one diff on the terminal.
LINES_SHOWN = 40
#: Host names shown per group.
NAMES_SHOWN = 3
FILE = "diffs.txt"


@dataclass
class Group:
    """Hosts whose change by one task had the same diff (a host's own name in it read as ``<host>``)."""

    text: str
    hosts: list[str] = field(default_factory=list)

    def names(self, shown: int | None = NAMES_SHOWN) -> str:
        if shown is None or len(self.hosts) <= shown:
            return ", ".join(self.hosts)
        return ", ".join(self.hosts[:shown]) + f" +{len(self.hosts) - shown} more"


def grouped(run: PlaybookRun) -> dict[str, list[Group]]:
    """Task -> its diffs grouped by identical text, largest group first; tasks in the order they first changed."""
    tasks: dict[str, dict[str, Group]] = {}
    for host, result in sorted(run.hosts.items()):
        for task, text in result.diffs:
            # A control character in a file (ESC) is shown, not obeyed by the terminal.
            key = showable(text.replace(host, "<host>") if len(host) > 2 else text)
            group = tasks.setdefault(task, {}).setdefault(key, Group(key))
            if host not in group.hosts:
                group.hosts.append(host)
    return {task: sorted(groups.values(), key=lambda g: -len(g.hosts)) for task, groups in tasks.items()}


def without_diff(run: PlaybookRun) -> dict[str, int]:
    """Task -> hosts it changed with no diff (the module returns none, as set_fact or a command's own), so that
    every task that changed is named."""
    tasks: dict[str, int] = {}
    for result in run.hosts.values():
        with_diff = {task for task, _ in result.diffs}
        for task in dict.fromkeys(result.changed_tasks):
            if task not in with_diff:
                tasks[task] = tasks.get(task, 0) + 1
    return tasks


def lines(groups: dict[str, list[Group]], *, diffs_shown: int | None, lines_shown: int | None) -> list[str]:
    """The report: one heading per task and group, then the diff; ``None`` shows everything."""
    out: list[str] = []
    for task, task_groups in groups.items():
        hosts = sum(len(g.hosts) for g in task_groups)
        kinds = f" ({len(task_groups)} different diffs)" if len(task_groups) > 1 else ""
        out.append(f"── {task}: {hosts} host(s){kinds}")
        for group in task_groups[:diffs_shown]:
            out.append(f"{len(group.hosts)} host(s): {group.names(NAMES_SHOWN if lines_shown else None)}")
            text = group.text.rstrip("\n").splitlines()
            out += text[:lines_shown]
            if lines_shown is not None and len(text) > lines_shown:
                out.append(f"… {len(text) - lines_shown} more line(s) ({FILE})")
        if diffs_shown is not None and len(task_groups) > diffs_shown:
            rest = task_groups[diffs_shown:]
            out.append(f"… {len(rest)} more different diff(s) on {sum(len(g.hosts) for g in rest)} host(s) ({FILE})")
    return out


def show(console: Console, run: PlaybookRun, folder: Path, *, check_mode: bool) -> None:
    """Write every diff to ``folder``/diffs.txt and print the summary of them."""
    from rich.text import Text

    groups = grouped(run)
    verb = "would change (check mode)" if check_mode else "changed"
    bare = [f"── {task}: {hosts} host(s), no diff from its module" for task, hosts in without_diff(run).items()]
    if not groups:
        console.print(f"diff: no task that {verb.split(' (')[0]} anything reported a diff", markup=False)
        for line in bare:
            console.print(showable(line), markup=False, highlight=False, soft_wrap=True)
        return
    changes = sum(len(g.hosts) for task_groups in groups.values() for g in task_groups)
    heading = f"diff: {changes} change(s) in {len(groups)} task(s) {verb}"
    every = [heading, *lines(groups, diffs_shown=None, lines_shown=None), *bare]
    write_text(folder / FILE, "\n".join(every) + "\n")
    console.print(heading, markup=False, highlight=False, soft_wrap=True)
    for line in [*lines(groups, diffs_shown=DIFFS_SHOWN, lines_shown=LINES_SHOWN), *bare]:
        style = {"+": "green", "-": "red", "@": "cyan", "─": "bold"}.get(line[:1], "")
        if line.startswith(("+++", "---")):
            style = "bold"
        console.print(Text(line, style=style), soft_wrap=True)
    console.print(f"every diff: {folder / FILE}", markup=False, highlight=False, soft_wrap=True)
