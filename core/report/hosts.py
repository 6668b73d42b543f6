"""The per-host view of a run, shared by report.html and report.md: each host's verdict, hosts with the same
verdict on every check grouped into one row, and skipped and pending checks grouped by reason."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuready.core.results import ERROR, FAILED, PASSED, PENDING, SKIPPED, Check, RunResult

#: Worst first: the order rows and cells sort in.
SEVERITY = {ERROR: 0, FAILED: 1, PENDING: 2, SKIPPED: 3, PASSED: 4, "": 5}


def host_verdict(statuses: list[str]) -> str:
    """A host's verdict, ranked as a run's: an error outranks a failure, a failure a pending check (the host
    waits on a reboot or an admin's action); skips alone do not fail a host."""
    if ERROR in statuses:
        return ERROR
    if FAILED in statuses:
        return FAILED
    if PENDING in statuses:
        return PENDING
    if statuses and all(s == SKIPPED for s in statuses):
        return SKIPPED
    return PASSED


@dataclass
class HostRow:
    """Hosts that got the same status from every check (a status per check id, "" where it did not run)."""

    statuses: tuple[str, ...]
    hosts: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return host_verdict([s for s in self.statuses if s])


@dataclass
class Matrix:
    check_ids: list[str]
    rows: list[HostRow]
    hosts: list[str]
    #: (check id, host) -> its check (the worst one when a check ran twice on a host)
    cells: dict[tuple[str, str], Check]


def matrix(run: RunResult) -> Matrix:
    """Hosts and check ids in the order they first appear; rows worst first, then by their first host."""
    check_ids: dict[str, None] = {}
    hosts: dict[str, None] = {}
    cells: dict[tuple[str, str], Check] = {}
    for c in run.checks:
        check_ids.setdefault(c.id, None)
        hosts.setdefault(c.host, None)
        old = cells.get((c.id, c.host))
        if old is None or SEVERITY[c.status] < SEVERITY[old.status]:
            cells[(c.id, c.host)] = c
    ids = list(check_ids)
    rows: dict[tuple[str, ...], HostRow] = {}
    for host in hosts:
        key = tuple(cells[(i, host)].status if (i, host) in cells else "" for i in ids)
        rows.setdefault(key, HostRow(key)).hosts.append(host)
    ordered = sorted(rows.values(), key=lambda r: (SEVERITY[r.verdict], -len(r.hosts), natural(r.hosts[0])))
    return Matrix(ids, ordered, list(hosts), cells)


def natural(name: str) -> tuple[int | str, ...]:
    """gn2 before gn10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


@dataclass
class SkipGroup:
    """One reason for skipping, with the checks it skipped on the same hosts."""

    reason: str
    check_ids: list[str]
    hosts: list[str]


def skip_reason(check: Check) -> str:
    """Why a check was skipped or left pending, its host's own name made ``<host>`` so hosts share the reason."""
    why = check.message.replace(check.host, "<host>") if len(check.host) > 2 else check.message
    return why or "(no reason given)"


def skips(run: RunResult) -> list[SkipGroup]:
    """Skipped checks grouped by reason (checks skipped for one reason on the same hosts share a group), the
    most hosts first: "DCGM not installed: 10 hosts"."""
    per_check: dict[tuple[str, str], list[str]] = {}
    for c in run.checks:
        if c.status == SKIPPED:
            per_check.setdefault((skip_reason(c), c.id), []).append(c.host)
    groups: dict[tuple[str, tuple[str, ...]], SkipGroup] = {}
    for (reason, check_id), hosts in per_check.items():
        key = (reason, tuple(hosts))
        if key in groups:
            groups[key].check_ids.append(check_id)
        else:
            groups[key] = SkipGroup(reason, [check_id], hosts)
    return sorted(groups.values(), key=lambda g: (-len(g.hosts), -len(g.check_ids), g.reason))


#: Checks whose messages and evidence are measured figures against references.
FIGURE_PREFIXES = ("perf.", "training.", "compare.")


def is_figure(check: Check) -> bool:
    return check.id.startswith(FIGURE_PREFIXES)


_FIGURE = re.compile(r"^(?P<label>.+?): median (?P<value>[-+.\deE]+) (?P<unit>\S+) of \d+ sample")


@dataclass
class Figure:
    """One measured figure as a performance check's evidence gives it."""

    host: str
    check_id: str
    status: str
    label: str
    value: float
    unit: str
    reference: str


def figures(check: Check) -> list[Figure]:
    """The figures in a performance check's evidence lines (``GPU 0: median 19.1 TFLOP/s of 5 sample(s), ...
    — reference: ...``)."""
    found = []
    for line in check.evidence.splitlines():
        measured, _, reference = line.partition(" — reference: ")
        m = _FIGURE.match(measured)
        if m:
            try:
                value = float(m["value"])
            except ValueError:
                continue
            found.append(Figure(check.host, check.id, check.status, m["label"], value, m["unit"], reference))
    return found


@dataclass
class PendingGroup:
    """Checks left pending for one reason (what finishes them is outside gpuready), with what to do for each."""

    reason: str
    check_ids: list[str]
    hosts: list[str]
    count: int
    #: Each distinct remedy once, in order (each may name the host or device it is for).
    remedies: list[str]


def pendings(run: RunResult) -> list[PendingGroup]:
    """Pending checks grouped by reason (a host's own name in it made ``<host>``), the most first."""
    groups: dict[str, PendingGroup] = {}
    for c in run.checks:
        if c.status != PENDING:
            continue
        why = skip_reason(c)
        g = groups.setdefault(why, PendingGroup(why, [], [], 0, []))
        g.count += 1
        for items, value in ((g.check_ids, c.id), (g.hosts, c.host), (g.remedies, c.remedy)):
            if value and value not in items:
                items.append(value)
    return sorted(groups.values(), key=lambda g: (-g.count, g.reason))
