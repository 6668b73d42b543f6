"""Ctrl-C and SIGTERM: one cancel request for the whole run, and nothing left running after it.

A supervisor or CI stopping gpuready with SIGTERM gets what Ctrl-C gets: the run stops, what
finished is written, and the exit code says which signal it was (130 for SIGINT, 143 for SIGTERM,
the shell's 128 + signal number).

Code that can poll (the Ansible runner) asks for a request with :func:`requested` inside
:func:`polled`; everywhere else the signal interrupts the main thread as ``KeyboardInterrupt``.
On a cancel, :func:`stop_children` ends every process this one started, including those that
made their own process group or session (ansible-playbook under a pseudo-terminal): terminate,
a bounded wait (:data:`GRACE_S`), then kill. Inside :func:`polled` the signal handler does this at
once, so a poller blocked waiting on its child returns as the child ends.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM
#: What a cancel is asked with: Ctrl-C, a supervisor's SIGTERM, and SIGHUP (the terminal closed, the SSH session
#: to the admin machine dropped), which would otherwise end the process at once with nothing written.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Exit codes and reasons of the signals other than SIGINT, which is the default (the shell's 128 + number).
_SIGNAL_EXITS: dict[int, tuple[int, str]] = {
    signal.SIGTERM: (128 + signal.SIGTERM, "terminated by SIGTERM"),
    signal.SIGHUP: (128 + signal.SIGHUP, "hung up (SIGHUP: the terminal or SSH session closed)"),
}
#: Seconds children get between SIGTERM and SIGKILL.
GRACE_S = 1.5

_request = threading.Event()
_signals: list[int] = []
_polling = 0
_holding = 0


def requested() -> bool:
    """True once Ctrl-C or SIGTERM arrived (a callback for code that polls)."""
    return _request.is_set()


def _first_other() -> tuple[int, str] | None:
    """Exit code and reason of the first SIGTERM or SIGHUP that arrived, if any did."""
    return next((_SIGNAL_EXITS[s] for s in _signals if s in _SIGNAL_EXITS), None)


def exit_code() -> int:
    other = _first_other()
    return other[0] if other else EXIT_SIGINT


def reason() -> str:
    other = _first_other()
    return other[1] if other else "cancelled by Ctrl-C"


def _handler(signum: int, frame: Any) -> None:
    first = not _request.is_set()
    _signals.append(signum)
    _request.set()
    if _holding:
        return  # raised when the held section ends
    _interrupt(first)


def _interrupt(first: bool) -> None:
    if first and _polling:
        # The running section polls requested(), but only between its waits: ansible-runner looks once its
        # child has printed something or after 5 s of silence (pexpect_timeout). Ending the children now
        # makes that wait return at once (end of file); the section then sees the request and stops.
        stop_children()
        return
    raise KeyboardInterrupt


@contextmanager
def handling_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP become a cancel request for as long as the command runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _become_subreaper()
    previous = {s: signal.signal(s, _handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _become_subreaper() -> None:
    """Processes that leave their parent (Ansible's workers call setsid; ssh masters daemonize) are re-parented
    to us instead of init when their parent dies, so :func:`stop_children` still finds them (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


_PR_SET_CHILD_SUBREAPER = 36


def stop_when_requested() -> bool:
    """A cancel callback for polling code: on a request, end the whole tree of children while it is still
    ours (before anyone kills the top of it and orphans the rest), then say so."""
    if not requested():
        return False
    stop_children()
    return True


@contextmanager
def polled() -> Iterator[None]:
    """Inside: the first signal only sets the request (the code polls it); a second one interrupts."""
    global _polling
    _polling += 1
    try:
        yield
    finally:
        _polling -= 1


@contextmanager
def held() -> Iterator[None]:
    """Inside: a signal waits until the section ends, then interrupts as it would have. For steps that must
    not be cut in two, such as starting a child and recording its pid: a ``KeyboardInterrupt`` raised while
    ``subprocess.Popen`` waits for the exec leaves a running child that nobody knows about."""
    global _holding
    if threading.current_thread() is not threading.main_thread():
        yield  # signals interrupt the main thread only
        return
    before = len(_signals)
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
    arrived = len(_signals) - before
    if arrived and not _holding:
        _interrupt(first=before == 0 and arrived == 1)


def descendants(pid: int | None = None) -> list[int]:
    """Every live process below ``pid`` (default: this one), children before grandchildren."""
    pid = os.getpid() if pid is None else pid
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields and fields[0] != b"Z":
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    queue = [pid]
    while queue:
        for child in parents.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def stop_children(grace: float = GRACE_S) -> list[int]:
    """Terminate this process's whole tree (process groups of children that made their own too),
    wait up to ``grace`` seconds, then kill what is left. Returns the pids that had to be killed."""
    if not os.path.isdir("/proc"):
        return []
    own_group = os.getpgrp()
    pids = descendants()
    for pid in pids:
        _signal(pid, own_group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in pids if _alive(p)]
    # Children may have started more processes while they stopped: those go too.
    stubborn = sorted(set(alive) | set(descendants()))
    for pid in stubborn:
        _signal(pid, own_group, signal.SIGKILL)
    # Exited children are left for their owners to collect (pexpect and subprocess wait for their own);
    # a zombie counts as stopped.
    return stubborn


def _signal(pid: int, own_group: int, sig: int) -> None:
    try:
        group = os.getpgid(pid)
        if group == pid and group != own_group:
            os.killpg(group, sig)  # a group leader: its whole group, including what it forked
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


#: Seconds a credential helper gpuready runs (a kubeconfig's exec plugin, a vault password script) may take:
#: they answer in seconds (a token from a cache or a cloud API); one that waits for a browser login or a prompt
#: never answers here, and neither the Kubernetes client nor Ansible bounds them. $GPUREADY_CREDENTIAL_TIMEOUT_S
#: sets it.
CREDENTIAL_TIMEOUT_S = 60.0


def credential_timeout_s() -> float:
    """:data:`CREDENTIAL_TIMEOUT_S`, or $GPUREADY_CREDENTIAL_TIMEOUT_S when it is a positive number."""
    try:
        value = float(os.environ.get("GPUREADY_CREDENTIAL_TIMEOUT_S", ""))
    except ValueError:
        return CREDENTIAL_TIMEOUT_S
    return value if 0 < value < float("inf") else CREDENTIAL_TIMEOUT_S


def bounded(fn: Any, seconds: float, what: str) -> Any:
    """``fn()``, given ``seconds``: past them, the processes it started (and theirs) are killed, and
    :class:`TimeoutError` names ``what``. For library calls that run a helper with no bound of their own.

    The processes are this one's descendants that started after the call began (their start time in /proc), so
    nothing is read from /proc unless the time runs out: cheap enough to wrap a hook the client calls before
    every request."""
    since = _boot_ticks()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller's thread as it is
            box["error"] = e

    worker = threading.Thread(target=run, name=f"bounded: {what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        started = [p for p in descendants() if (_started(p) or -1) >= since] if os.path.isdir("/proc") else []
        for pid in started:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        worker.join(GRACE_S)
        raise TimeoutError(f"{what} did not answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _boot_ticks() -> int:
    """Now, in the clock /proc/PID/stat gives a process's start time in: clock ticks since boot (proc(5))."""
    try:
        return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
    except (AttributeError, OSError, ValueError):
        return 0


def _started(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # from field 3, the state
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None
