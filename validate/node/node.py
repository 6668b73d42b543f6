"""One host as the checks see it: a testinfra host, what the inventory expects of it, and the
answers of the commands already run there (each command runs once per host, however many checks read it)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gpuready.validate.node import nvsmi

if TYPE_CHECKING:
    from gpuready.core.settings import NodeClass, Settings

#: Starts a section of the batched output (an ASCII record separator: never in tool output).
MARK = "\x1egpuready:"

#: lsmod where the host has it (kmod), else the file it reads; both print the module name first.
MODULES_COMMAND = "lsmod 2>/dev/null || cat /proc/modules"

QUERY_FIELDS = ["index", "name", "pci.bus_id", "driver_version", "persistence_mode"]
#: The CSV view the checks fall back to when the XML cannot be read.
QUERY_COMMAND = f"nvidia-smi --query-gpu={','.join(QUERY_FIELDS)} --format=csv,noheader"


def decode(data: bytes) -> tuple[str, int]:
    """What a node printed as text, and how many of its bytes were not UTF-8 (each shown as U+FFFD).

    dmesg prints binary junk from USB descriptors and firmware, and a GPU's name can carry a byte of another
    encoding: one such byte must not stop the host's validation. Each byte that does not decode becomes one
    U+FFFD (surrogateescape, then replaced), so the count is exact and the text keeps its length in bytes.
    """
    try:
        return data.decode(), 0
    except UnicodeDecodeError:
        escaped = data.decode(errors="surrogateescape")
        bad = sum(1 for ch in escaped if "\udc80" <= ch <= "\udcff")
        return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in escaped), bad


@dataclass
class Answer:
    """What a command printed, kept for evidence."""

    command: str
    rc: int
    stdout: str
    stderr: str
    #: Bytes of its output that were not UTF-8 (shown as U+FFFD; the evidence says so).
    undecodable: int = 0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def evidence(self, limit: int = 1500) -> str:
        out = self.stdout if self.ok or self.stdout.strip() else self.stderr
        out = out.strip()
        if len(out) > limit:
            out = out[:limit] + "\n…"
        note = f"\n({self.undecodable} bytes that are not UTF-8 shown as \ufffd)" if self.undecodable else ""
        return f"$ {self.command}\n(exit {self.rc}){note}\n{out}"

    @classmethod
    def of(cls, command: str, rc: int, stdout: bytes, stderr: bytes) -> Answer:
        """An answer from the bytes a command printed."""
        (out, bad_out), (err, bad_err) = decode(stdout), decode(stderr)
        return cls(command, rc, out, err, bad_out + bad_err)


class NoGpuView(Exception):
    """nvidia-smi could not be read; every GPU check fails with the same reason."""


@dataclass
class Node:
    name: str
    host: Any  # testinfra.host.Host
    node_class: NodeClass
    settings: Settings
    #: Seconds one command may run on the host (killed there with timeout(1) when it has one).
    command_timeout: int = 60
    #: Turns a command into what runs on the host (become: sudo -u <user>); identity when not becoming.
    wrap: Callable[[str], str] = field(default=lambda command: command, repr=False)
    #: Told the seconds the measuring batch may take, when it starts (the fan-out extends the host's deadline).
    on_measure: Callable[[int], None] | None = field(default=None, repr=False)
    _answers: dict[str, Answer] = field(default_factory=dict, repr=False)

    @classmethod
    def recorded(cls, name: str, node_class: NodeClass, settings: Settings, answers: dict[str, str | Answer]) -> Node:
        """A node whose commands answer with recorded outputs (a command not recorded is not installed there)."""
        node = cls(name, None, node_class, settings)
        for command, answer in answers.items():
            node._answers[command] = answer if isinstance(answer, Answer) else Answer(command, 0, answer, "")
        return node

    def run(self, command: str) -> Answer:
        if command not in self._answers and self.host is None:
            return Answer(command, 127, "", f"sh: {command.split()[0]}: not found")
        if command not in self._answers:
            result = self.host.run(self.wrap(command))
            self._answers[command] = Answer.of(command, result.rc, result.stdout_bytes, result.stderr_bytes)
        return self._answers[command]

    def undecodable(self) -> list[Answer]:
        """The answers that held bytes that are not UTF-8 (each shown as U+FFFD)."""
        return [a for a in self._answers.values() if a.undecodable]

    def record(self, answer: Answer) -> None:
        """Keep ``answer`` as its command's, unless the command already answered."""
        self._answers.setdefault(answer.command, answer)

    def prefetch(self, commands: list[str], timeout: int | None = None) -> None:
        """Run many commands in one round trip and keep each one's answer, as if run one by one.

        Over SSH every command costs a round trip and a local process; the catalogue's fixed
        commands are known in advance, so they travel together. Checks still ask ``run(command)``.
        """
        todo = [c for c in dict.fromkeys(commands) if c not in self._answers]
        if not todo:
            return
        limit = timeout or self.command_timeout
        try:
            result = self.host.run(self.wrap(self.batch(todo, limit)))
        except RuntimeError as e:  # testinfra's SSH backend raises on exit 255: ssh itself failed
            failure = e.args[0] if e.args else None
            said = getattr(failure, "stderr_bytes", None)
            raise ConnectionError((decode(said)[0] if said is not None else str(e)).strip()[:300]) from e
        if result.rc in (124, 137):
            raise ConnectionError(
                f"the node's commands ran past {limit}s and were stopped (a tool hangs: try nvidia-smi by hand)"
            )
        if result.rc != 0:
            raise ConnectionError((decode(result.stderr_bytes)[0].strip() or f"exit {result.rc}")[:300])
        # Split as bytes, decoded section by section: each answer counts its own bytes that are not UTF-8.
        found: dict[tuple[int, str], bytes] = {}
        for section in result.stdout_bytes.split(b"\n" + MARK.encode())[1:]:
            head, _, body = section.partition(b"\n")
            index, _, kind = head.decode(errors="replace").partition(" ")
            found[(int(index), kind)] = body
        for i, command in enumerate(todo):
            rc = found.get((i, "r"), b"").strip()
            self._answers[command] = Answer.of(
                command, int(rc) if rc.isdigit() else 255, found.get((i, "o"), b""), found.get((i, "e"), b"")
            )

    def batch(self, commands: list[str], timeout: int | None = None) -> str:
        """The one command that runs ``commands`` on the node, each answer behind its mark (what prefetch sends)."""
        parts = ["T=$(mktemp -d)"]
        for i, command in enumerate(commands):
            # A subshell (a fork, no exec): a command's exit or variables stay its own. Its output goes
            # straight back after its mark; its errors wait in a file that is read only when it is not empty
            # (a `cat` is a process on the node: one per command and stream was three per command).
            parts.append(
                f"printf '\\n{MARK}{i} o\\n'; ( {command}\n) 2>$T/e </dev/null; r=$?; "
                f"printf '\\n{MARK}{i} e\\n'; [ -s $T/e ] && cat $T/e; printf '\\n{MARK}{i} r\\n%s\\n' $r"
            )
        parts.append('rm -rf "$T"')
        script = shlex.quote("\n".join(parts))
        # A hung tool (an nvidia-smi waiting on a GPU that fell off the bus) must not hold the host forever:
        # the batch runs under timeout(1) where the host has it.
        return (
            f"if command -v timeout >/dev/null 2>&1; then timeout -k 5 {timeout or self.command_timeout} "
            f"sh -c {script}; "
            f"else sh -c {script}; fi"
        )

    # What nvidia-smi says, parsed once.
    @cached_property
    def smi_xml(self) -> Answer:
        return self.run("nvidia-smi -q -x")

    @cached_property
    def smi(self) -> nvsmi.SmiLog:
        answer = self.smi_xml
        if not answer.ok:
            why = "not installed" if answer.rc == 127 else f"failed (exit {answer.rc})"
            raise NoGpuView(
                f"cannot read the GPUs: nvidia-smi {why}: "
                f"{(answer.stderr or answer.stdout).strip()[:200] or 'no output'}"
            )
        try:
            return nvsmi.parse_xml(answer.stdout)
        except nvsmi.ParseError as e:
            raise NoGpuView(f"cannot read the GPUs: {e}") from e

    @cached_property
    def query(self) -> Answer:
        return self.run(QUERY_COMMAND)

    def gpus_csv(self) -> list[dict[str, str]]:
        answer = self.query
        if not answer.ok:
            self.smi  # noqa: B018 - raises the same clear reason as every GPU check
            raise NoGpuView(f"nvidia-smi --query-gpu failed (exit {answer.rc})")
        try:
            return nvsmi.parse_query_csv(answer.stdout, QUERY_FIELDS)
        except nvsmi.ParseError as e:
            raise NoGpuView(str(e)) from e

    @cached_property
    def modules(self) -> Answer:
        return self.run(MODULES_COMMAND)
