"""Acting on a node verdict through Slurm: drain a node whose check failed, with a reason that says which and
why; resume it when its checks pass again, but only a drain gpuready made.

Slurm leaves every action to the health check program ("Any action to be taken must be explicitly performed by
the program (e.g. execute "scontrol update NodeName=foo State=drain Reason=tmp_file_system_full")", slurm.conf(5),
HealthCheckProgram), so this module runs scontrol, as LBNL NHC's node-mark-offline does. Each scontrol call has
a time limit. A check that could not run never drains and never resumes: unknown is not failed, nor passed.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass

from gpuready.core.errors import BadInput, Unreachable, shorten
from gpuready.core.results import FAILED, PASSED, Check

log = logging.getLogger(__name__)

#: What marks a drain as gpuready's: a later pass resumes only nodes whose reason starts with it.
PREFIX = "gpuready: "
#: scontrol(1) documents no limit on a node's Reason, and sinfo -R shows only its first 20 characters
#: (sinfo(1), --list-reasons). gpuready keeps the whole reason to one short line a terminal shows whole in
#: `scontrol show node` and `sinfo -R -o "%100E %N"`: the prefix, the check id and the start of its message.
REASON_LIMIT = 100
#: Seconds one scontrol call may take (a slurmctld that does not answer must not hold slurmd's health check,
#: which slurmd kills after 60 seconds, slurm.conf(5) HealthCheckProgram).
SCONTROL_TIMEOUT = 10.0


def reason(check: Check) -> str:
    """``gpuready: <check id>: <message>`` on one line of printable ASCII, cut to :data:`REASON_LIMIT`."""
    text = "".join(ch if " " <= ch <= "~" else " " for ch in f"{PREFIX}{check.id}: {check.message}")
    text = " ".join(text.split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 3].rstrip() + "..."


def comment(check: Check) -> str:
    """The node's Comment beside the drain (scontrol(1): "Arbitrary descriptive string"): what to do, which the
    short reason has no room for, so `scontrol show node` says the check id, message and remedy."""
    text = f"{PREFIX}{check.id}: remedy: {check.remedy or 'see the check in the node verdict'}"
    return " ".join("".join(ch if " " <= ch <= "~" else " " for ch in text).split())


def ours(node_reason: str) -> bool:
    return node_reason.startswith(PREFIX)


@dataclass(frozen=True)
class NodeState:
    name: str
    #: As scontrol prints it: IDLE, IDLE+DRAIN, MIXED+DRAIN, DOWN+DRAIN+NOT_RESPONDING...
    state: str
    #: The reason without the ``[user@time]`` Slurm appends; "" when none.
    reason: str
    #: The node's Comment; "" when none.
    comment: str = ""

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state.split("+")


@dataclass(frozen=True)
class Action:
    #: drain, resume, keep (another's drain is left alone) or none.
    kind: str
    why: str
    reason: str = ""
    comment: str = ""


def decide(status: str, failure: Check | None, node: NodeState) -> Action:
    """What to do with ``node`` given its verdict's status and first failure."""
    if status == FAILED and failure is not None:
        wanted = reason(failure)
        if node.drained and not ours(node.reason):
            return Action("keep", f"drained by someone else ({node.reason or 'no reason'}); left alone")
        if node.drained and node.reason == wanted:
            return Action("none", "already drained for this")
        return Action("drain", f"{failure.id} failed", wanted, comment(failure))
    if status == PASSED and node.drained and ours(node.reason):
        return Action("resume", "every check passed; the drain was gpuready's")
    if status == PASSED:
        return Action("none", "every check passed")
    return Action("none", "a check could not run: unknown is not failed, so nothing is drained or resumed")


def scontrol_path() -> str:
    found = shutil.which("scontrol")
    if found is None:
        raise Unreachable("scontrol is not on PATH: cannot ask Slurm about this node (install slurm-client)")
    return found


def _scontrol(*args: str, timeout: float = SCONTROL_TIMEOUT) -> subprocess.CompletedProcess[str]:
    command = [scontrol_path(), *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=os.environ)
    except subprocess.TimeoutExpired:
        raise Unreachable(
            f"scontrol {' '.join(args[:2])} did not answer within {timeout:.0f}s (is slurmctld up?)"
        ) from None
    except OSError as e:
        raise Unreachable(f"cannot run scontrol: {e.strerror}") from None


def show_node(name: str) -> NodeState:
    """The node as slurmctld sees it; a node Slurm does not know is bad input."""
    done = _scontrol("show", "node", name)
    said = shorten(done.stderr or done.stdout, 200)
    if done.returncode != 0:
        if "not found" in said.lower() or "invalid node name" in said.lower():
            raise BadInput(f"slurm: node {name!r} is not a node Slurm knows (scontrol: {said})")
        raise Unreachable(f"scontrol show node {name} failed (exit {done.returncode}): {said}")
    return parse_node(name, done.stdout)


def parse_node(name: str, text: str) -> NodeState:
    """``scontrol show node NAME`` (the multi-line form: its Reason has a line of its own, spaces and all)."""
    state, node_reason, found, node_comment = "", "", "", ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Comment="):
            node_comment = stripped.removeprefix("Comment=")
        if stripped.startswith("NodeName="):
            found = stripped.split()[0].removeprefix("NodeName=")
        if stripped.startswith("Reason="):
            node_reason = stripped.removeprefix("Reason=")
            if node_reason.endswith("]") and " [" in node_reason:  # Slurm adds [user@time]
                node_reason = node_reason[: node_reason.rindex(" [")]
        for token in stripped.split():
            if token.startswith("State="):
                state = token.removeprefix("State=")
    if found != name or not state:
        raise BadInput(f"slurm: node {name!r} is not a node Slurm knows (scontrol show node printed no such node)")
    return NodeState(name, state, node_reason, "" if node_comment == "(null)" else node_comment)


def apply(node: NodeState, action: Action) -> None:
    """Drain or resume through scontrol update; refused updates are errors (exit 3), named in one line."""
    args: tuple[str, ...]
    if action.kind == "drain":
        args = ("update", f"NodeName={node.name}", "State=DRAIN", f"Reason={action.reason}")
        if not node.comment or ours(node.comment):  # someone else's comment is theirs
            args += (f"Comment={action.comment}",)
    elif action.kind == "resume":
        args = ("update", f"NodeName={node.name}", "State=RESUME")
        if ours(node.comment):
            args += ("Comment=",)
    else:
        return
    done = _scontrol(*args)
    if done.returncode != 0:
        raise Unreachable(
            f"scontrol update NodeName={node.name} State={args[2].split('=')[1]} failed (exit {done.returncode}): "
            f"{shorten(done.stderr or done.stdout, 200)}"
        )
    log.info("%s %s: %s", action.kind, node.name, action.reason or action.why)
