"""The verdict of one check on one host: it knows the check's id, the host and the remedy, so the code that
judges says only what it found."""

from __future__ import annotations

from dataclasses import dataclass

from gpuready.core.results import ERROR, FAILED, PASSED, PENDING, SKIPPED, Check

#: Message prefix of a check skipped because a check it depends on did not pass: one failure per root cause.
DEPENDS = "depends on "


def blocks(check: Check) -> bool:
    """Whether ``check`` keeps the checks that depend on it from running: it failed, could not run, or was itself
    skipped for a root cause."""
    return check.status in (FAILED, ERROR) or (check.status == SKIPPED and check.message.startswith(DEPENDS))


@dataclass(frozen=True)
class Verdict:
    id: str
    host: str
    #: What to do when the check fails; a failure can name a more precise one.
    remedy: str = ""

    def passed(self, message: str = "", evidence: str = "") -> Check:
        return Check(self.id, self.host, PASSED, message, evidence)

    def failed(self, message: str, evidence: str = "", remedy: str = "") -> Check:
        return Check(self.id, self.host, FAILED, message, evidence, remedy or self.remedy)

    def skipped(self, reason: str, evidence: str = "") -> Check:
        return Check(self.id, self.host, SKIPPED, reason, evidence)

    def depends_on(self, root: Check, evidence: str = "") -> Check:
        """Skipped, not failed again for the same cause: ``root`` (a check this one depends on) did not pass. Names
        the root cause (``root``'s own when it was skipped for one) with the first clause of its message, identical
        across hosts so they group."""
        if root.message.startswith(DEPENDS):
            return self.skipped(root.message, evidence)
        return self.skipped(f"{DEPENDS}{root.id} ({root.message.split(':', 1)[0]})", evidence)

    def pending(self, message: str, evidence: str = "", remedy: str = "") -> Check:
        """Done as far as gpuready goes; a reboot or an admin's action finishes it (``remedy`` says which)."""
        return Check(self.id, self.host, PENDING, message, evidence, remedy or self.remedy)

    def errored(self, message: str, evidence: str = "") -> Check:
        """The check could not reach its verdict: the check's remedy (for what it judges) does not apply."""
        return Check(self.id, self.host, ERROR, message, evidence)

    def passed_if(self, ok: bool, message: str, otherwise: str, evidence: str = "") -> Check:
        """Passed with ``message`` when ``ok``, else failed with ``otherwise``; the same evidence either way."""
        return self.passed(message, evidence) if ok else self.failed(otherwise, evidence)
