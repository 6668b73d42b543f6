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

#: Ends a part of the batch, with the exit status of the part (the fixed commands, then the measuring ones).
END = MARK + "end "
#: The measuring commands run only where this answered (exit 0), as their checks depend on driver.nvidia_smi.
GATE = "nvidia-smi -q -x"

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
    #: Starts the node's batch with its output read as it comes (connect.Session); None: ``host.run``, at once.
    open: Callable[[str], Any] | None = field(default=None, repr=False)
    _answers: dict[str, Answer] = field(default_factory=dict, repr=False)
    _session: Any = field(default=None, repr=False)
    _pending: list[str] = field(default_factory=list, repr=False)
    _then_timeout: int = field(default=0, repr=False)
    _then_offset: int = field(default=0, repr=False)

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

    def prefetch(
        self, commands: list[str], timeout: int | None = None, then: list[str] | None = None, then_timeout: int = 0
    ) -> None:
        """Run many commands in one round trip and keep each one's answer, as if run one by one.

        Over SSH every command costs a round trip and a local process; the catalogue's fixed
        commands are known in advance, so they travel together. Checks still ask ``run(command)``.

        ``then`` (the measuring commands) rides the same connection: the node runs them after ``commands``, under
        their own limit ``then_timeout``, where ``nvidia-smi -q -x`` answered (:data:`GATE`). Where the host's
        output can be read as it comes (``open``), this returns once ``commands`` answered and the measuring
        commands' answers are read when a later ``prefetch`` asks for them; the fixed checks need not wait.
        """
        if self._session is not None and any(c in self._pending for c in commands):
            self._read_then()
        todo = [c for c in dict.fromkeys(commands) if c not in self._answers]
        later = [c for c in dict.fromkeys(then or []) if c not in self._answers and c not in todo]
        limit = timeout or self.command_timeout
        if not todo:  # nothing before them: the measuring commands are the batch
            todo, later, limit = later, [], then_timeout or limit
        if not todo:
            return
        script = self.wrap(self.batch(todo, limit, later, then_timeout, watched=self.open is not None))
        if self.open is None:
            self._prefetch_at_once(script, todo, later, limit, then_timeout)
            return
        session = self.open(script)
        self._session, self._pending = session, later
        self._then_timeout, self._then_offset = then_timeout, len(todo)
        try:
            head, rc = session.until_end(END)
        except BaseException:
            self.close()
            raise
        if rc is None:  # the connection ended before the node's end mark: ssh itself failed
            failure = session.finish()
            self.close()
            raise ConnectionError(_failure(failure, limit))
        if rc != 0:
            failure = session.finish() if rc not in (124, 137) else (rc, "")
            self.close()
            raise ConnectionError(_failure(failure, limit))
        self._keep(_sections(head), todo, 0)
        if not later:
            self.close()

    def _prefetch_at_once(self, script: str, todo: list[str], later: list[str], limit: int, then_limit: int) -> None:
        """One blocking round trip through ``host.run`` (a host that cannot be read as it comes)."""
        try:
            result = self.host.run(script)
        except RuntimeError as e:  # testinfra's SSH backend raises on exit 255: ssh itself failed
            failure = e.args[0] if e.args else None
            said = getattr(failure, "stderr_bytes", None)
            raise ConnectionError((decode(said)[0] if said is not None else str(e)).strip()[:300]) from e
        if result.rc != 0:
            raise ConnectionError(_failure((result.rc, decode(result.stderr_bytes)[0]), limit))
        # Split as bytes, decoded answer by answer: each answer counts its own bytes that are not UTF-8.
        parts = result.stdout_bytes.split(b"\n" + END.encode())
        self._keep(_sections(parts[0]), todo, 0)
        if later and len(parts) > 2:
            try:
                self._keep_then(_sections(parts[1]), later, len(todo), _end_rc(parts[2]), then_limit)
            except ConnectionError as e:  # the host answered: the measurements that did not finish say so
                for command in later:
                    self.record(Answer(command, 124, "", str(e)))

    def _read_then(self) -> None:
        """The measuring commands' answers, from the connection the fixed batch came over."""
        session, later, offset = self._session, self._pending, self._then_offset
        assert session is not None
        try:
            body, rc = session.until_end(END)
            ended = session.finish()[0] if rc is None else None
        finally:
            self.close()
        if rc is None and not body.strip() and ended == 0:
            # The node did not run them (its nvidia-smi failed there, though it answered here): ask once more.
            self.prefetch(later, timeout=self._then_timeout)
            return
        self._keep_then(_sections(body), later, offset, rc, self._then_timeout)

    def _keep_then(
        self, found: dict[tuple[int, str], bytes], later: list[str], offset: int, rc: int | None, limit: int
    ) -> None:
        if rc == 0:
            self._keep(found, later, offset)
            return
        # Those that finished keep their answers; the caller says the others did not.
        for i, command in enumerate(later):
            if (offset + i, "r") in found:
                self._keep(found, [command], offset + i)
        if rc in (124, 137):
            raise ConnectionError(
                f"the node's commands ran past {limit}s and were stopped (a tool hangs: try nvidia-smi by hand)"
            )
        raise ConnectionError("the connection ended before the node's measuring commands finished")

    def _keep(self, found: dict[tuple[int, str], bytes], commands: list[str], offset: int) -> None:
        for i, command in enumerate(commands):
            rc = found.get((offset + i, "r"), b"").strip()
            self._answers[command] = Answer.of(
                command,
                int(rc) if rc.isdigit() else 255,
                found.get((offset + i, "o"), b""),
                found.get((offset + i, "e"), b""),
            )

    def close(self) -> None:
        """End the connection the measuring commands would have come over, if it is still open."""
        session, self._session, self._pending = self._session, None, []
        if session is not None:
            session.close()

    def batch(
        self,
        commands: list[str],
        timeout: int | None = None,
        then: list[str] | None = None,
        then_timeout: int = 0,
        watched: bool = False,
    ) -> str:
        """The one command that runs ``commands`` on the node, each answer behind its mark, then an end mark with
        their exit status; then, where ``nvidia-smi -q -x`` answered, ``then`` the same way (what prefetch sends).

        Each part runs under timeout(1) where the host has it: a hung tool (an nvidia-smi waiting on a GPU that fell
        off the bus) must not hold the host forever, and a measurement gets its own, longer limit.

        ``watched``: the batch's standard input is a pipe gpuready holds open for as long as it wants the answers
        (:class:`connect.Session`). A watchdog on the node reads it, and when it ends (gpuready closed it, was
        cancelled or killed, or its ssh connection dropped) stops what the batch still runs: without a terminal
        sshd sends no SIGHUP, and a hung command would otherwise run on until its timeout. It works through sudo
        (the pipe passes through) and needs no pty."""
        fixed = _sections_script(commands, 0, gate=GATE if then else None)
        parts = ["T=$(mktemp -d)"]
        if watched:
            parts += [WATCHDOG, _TIMED_WATCHED]
        else:
            parts.append(_TIMED)
        parts += [
            f't {timeout or self.command_timeout} sh -c {shlex.quote(fixed)} sh "$T"; r=$?',
            f"printf '\\n{END}%s\\n' $r",
        ]
        if then:
            measuring = _sections_script(then, len(commands))
            parts.append(
                f'if [ $r = 0 ] && {{ read -r g < "$T/gate"; }} 2>/dev/null && [ "$g" = 0 ]; then '
                f't {then_timeout or self.command_timeout} sh -c {shlex.quote(measuring)} sh "$T"; '
                f"printf '\\n{END}%s\\n' $?; fi"
            )
        if watched:
            parts.append('kill -s KILL "$W" 2>/dev/null')
        parts.append('rm -rf "$T"; exit $r')
        return "\n".join(parts)

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


#: Runs a part of the batch under timeout(1) where the host has it.
_TIMED = 't() { if command -v timeout >/dev/null 2>&1; then timeout -k 5 "$@"; else shift; "$@"; fi; }'
#: The same, watched: timeout(1) moves itself and the part into a process group of their own, which a signal to
#: the batch's group misses, so its pid is written down for the watchdog.
_TIMED_WATCHED = (
    "t() { if command -v timeout >/dev/null 2>&1; then "
    'timeout -k 5 "$@" & echo $! >>"$T/p"; wait $!; else shift; "$@"; fi; }'
)
#: The watchdog of a watched batch, started first: it reads the batch's standard input (saved as fd 3, as an
#: asynchronous list's own standard input is /dev/null) until it ends, then stops the batch: SIGTERM to the
#: timeout(1) groups (timeout passes it on, and kills after 5 s) and to the batch's own process group (sshd makes
#: each session its own; the watchdog ignores SIGTERM itself), then SIGKILL to what is left, its scratch folder
#: removed. The batch kills the watchdog when it ends on its own.
WATCHDOG = "\n".join(
    [
        "exec 3<&0",
        "( trap '' TERM; while read -r _; do :; done",
        '  P=$(cat "$T/p" 2>/dev/null); G=$(for p in $P; do printf -- " -%s" "$p"; done)',
        "  kill -s TERM $P 0 2>/dev/null; kill -s TERM -- $G 2>/dev/null; sleep 2",
        '  kill -s KILL -- $G 2>/dev/null; rm -rf "$T"; kill -s KILL 0',
        ") <&3 >/dev/null 2>&1 &",
        "W=$!; exec 3<&- 0</dev/null",
    ]
)


def _sections_script(commands: list[str], first: int, gate: str | None = None) -> str:
    """A script that runs ``commands`` (numbered from ``first``), each answer behind its marks; ``$1`` is a folder
    for its scratch files, and the exit status of ``gate`` goes to ``$1/gate``."""
    parts = ['T="$1"']
    for i, command in enumerate(commands, first):
        # A subshell (a fork, no exec): a command's exit or variables stay its own. Its output goes
        # straight back after its mark; its errors wait in a file that is read only when it is not empty
        # (a `cat` is a process on the node: one per command and stream was three per command).
        parts.append(
            f"printf '\\n{MARK}{i} o\\n'; ( {command}\n) 2>$T/e </dev/null; r=$?; "
            f"printf '\\n{MARK}{i} e\\n'; [ -s $T/e ] && cat $T/e; printf '\\n{MARK}{i} r\\n%s\\n' $r"
            + ('; echo $r >"$T/gate"' if command == gate else "")
        )
    return "\n".join(parts)


def _sections(data: bytes) -> dict[tuple[int, str], bytes]:
    """(command number, o/e/r) -> the bytes that followed that mark (decoded per answer, by :meth:`Answer.of`)."""
    found: dict[tuple[int, str], bytes] = {}
    for section in data.split(b"\n" + MARK.encode())[1:]:
        head, _, body = section.partition(b"\n")
        index, _, kind = head.decode(errors="replace").partition(" ")
        if index.isdigit():
            found[(int(index), kind)] = body
    return found


def _end_rc(data: bytes) -> int | None:
    """The exit status an end mark carries (the bytes right after the mark)."""
    value = data.split(b"\n", 1)[0].strip()
    return int(value) if value.isdigit() else None


def _failure(failure: tuple[int, str], limit: int) -> str:
    rc, stderr = failure
    if rc in (124, 137):
        return f"the node's commands ran past {limit}s and were stopped (a tool hangs: try nvidia-smi by hand)"
    return (stderr.strip() or f"exit {rc}")[:300]
