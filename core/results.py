"""One results model for every command: checks (per host) plus metrics.

Every command builds a :class:`RunResult`; :mod:`gpuready.core.report.writers` writes it as
``summary.json``, ``junit.xml``, ``report.md`` and a terminal table.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from gpuready.core import __version__
from gpuready.core.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, EXIT_UNREACHABLE

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
ERROR = "error"
#: Done as far as gpuready can take it; what finishes it is outside gpuready (a reboot, an admin's action), so it
#: fails nothing: a run with passes and pendings passes, and its remedy is listed as left to do.
PENDING = "pending"
CHECK_STATUSES = (PASSED, FAILED, SKIPPED, ERROR, PENDING)


@dataclass
class Check:
    """One finding about one host (or the cluster, or a VM): what, where, verdict, why, how to fix."""

    id: str
    host: str
    status: str
    message: str = ""
    evidence: str = ""
    remedy: str = ""

    def __post_init__(self) -> None:
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {CHECK_STATUSES}")


def passed(id: str, host: str, message: str = "", evidence: str = "") -> Check:
    return Check(id, host, PASSED, message, evidence)


def failed(id: str, host: str, message: str, evidence: str = "", remedy: str = "") -> Check:
    return Check(id, host, FAILED, message, evidence, remedy)


def skipped(id: str, host: str, reason: str, evidence: str = "") -> Check:
    return Check(id, host, SKIPPED, reason, evidence)


def pending(id: str, host: str, message: str, evidence: str = "", remedy: str = "") -> Check:
    return Check(id, host, PENDING, message, evidence, remedy)


def errored(id: str, host: str, message: str, evidence: str = "", remedy: str = "") -> Check:
    return Check(id, host, ERROR, message, evidence, remedy)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunResult:
    """What one gpuready command found. ``status`` is derived from the checks."""

    command: str
    inventory: str = ""
    started: str = field(default_factory=now_iso)
    finished: str = ""
    checks: list[Check] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    #: Set when the command itself could not complete (bad input found late, run aborted).
    aborted: str = ""
    artifacts: str = ""

    def add(self, *checks: Check) -> None:
        self.checks.extend(checks)

    @property
    def status(self) -> str:
        if self.aborted or any(c.status == ERROR for c in self.checks):
            return ERROR
        if any(c.status == FAILED for c in self.checks):
            return FAILED
        return PASSED

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(CHECK_STATUSES, 0)
        for check in self.checks:
            counts[check.status] += 1
        return counts

    def exit_code(self) -> int:
        """0 all passed (pending checks included), 1 a check failed, 3 something could not be reached or run.

        A failed check outranks an unreachable host: the admin has a real finding to act on.
        """
        if any(c.status == FAILED for c in self.checks):
            return EXIT_CHECK_FAILED
        if self.aborted or any(c.status == ERROR for c in self.checks):
            return EXIT_UNREACHABLE
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        data = {
            # Which gpuready wrote it: a result is read against the checks and references of that version.
            "gpuready_version": __version__,
            "command": self.command,
            "started": self.started,
            "finished": self.finished,
            "status": self.status,
            "inventory": self.inventory,
            "counts": self.counts(),
            # Every field is a string: a shallow copy is asdict()'s result, without its deep copy of each value.
            "checks": [dict(vars(c)) for c in self.checks],
            "metrics": self.metrics,
        }
        if self.aborted:
            data["aborted"] = self.aborted
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        run = cls(
            command=data["command"],
            inventory=data.get("inventory", ""),
            started=data.get("started", ""),
            finished=data.get("finished", ""),
            metrics=data.get("metrics", {}),
            aborted=data.get("aborted", ""),
        )
        run.checks = [Check(**c) for c in data.get("checks", [])]
        return run


__all__ = [
    "CHECK_STATUSES",
    "ERROR",
    "EXIT_BAD_INPUT",
    "FAILED",
    "PASSED",
    "PENDING",
    "SKIPPED",
    "Check",
    "RunResult",
    "errored",
    "failed",
    "passed",
    "pending",
    "skipped",
]
