"""Run the catalogue on many hosts at once: a bounded pool, a deadline per host, progress as hosts finish.

An unreachable host (or one that runs past its deadline) becomes one error check for that host;
the others go on.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuready.core.errors import Cancelled
from gpuready.core.inventory import connection
from gpuready.core.results import Check, errored
from gpuready.validate.node import connect
from gpuready.validate.node.checks import perf_budget, perf_commands, prefetch_commands, run_catalogue
from gpuready.validate.node.node import Node

if TYPE_CHECKING:
    from gpuready.core.settings import NodeClass, Settings

log = logging.getLogger(__name__)

REACH_ID = "host.reachable"
#: Seconds a host given up at its deadline has to stop its commands (its session's input ended) before its
#: connection is killed.
GIVE_UP_GRACE_S = 3.0


@dataclass
class Target:
    name: str
    spec: dict[str, Any]
    node_class: NodeClass


@dataclass
class HostDone:
    """Progress: one host finished (``failing`` counts its failed or error checks)."""

    host: str
    done: int
    total: int
    failing: int
    seconds: float


def validate_host(
    target: Target,
    settings: Settings,
    timeout: int,
    only: set[str] | None = None,
    command_timeout: int = 60,
    on_measure: Callable[[int], None] | None = None,
    on_open: Callable[[connect.Session], None] | None = None,
) -> list[Check]:
    host = connect.testinfra_host(target.spec, timeout)

    def open_session(script: str) -> connect.Session:
        session = connect.start(target.spec, timeout, script)
        if on_open is not None:
            on_open(session)
        return session

    node = Node(
        target.name,
        host,
        target.node_class,
        settings,
        command_timeout=command_timeout,
        wrap=functools.partial(connection.become, target.spec),
        on_measure=on_measure,
        open=open_session,
    )
    try:
        # One connection per host: the measuring commands follow the fixed ones on it (Node.prefetch).
        node.prefetch(
            prefetch_commands(node, only), then=perf_commands(settings, only), then_timeout=perf_budget(settings, only)
        )
    except ConnectionError as e:
        return [
            errored(
                REACH_ID,
                target.name,
                f"cannot reach {target.name} ({connection.describe(target.spec)}): {str(e)[:300]}",
                remedy="Check ansible_host/ansible_port/ansible_user and the SSH key; ssh to the host by hand.",
            )
        ]
    try:
        return run_catalogue(node, only)
    finally:
        node.close()


def run(
    targets: list[Target],
    settings: Settings,
    *,
    workers: int = 32,
    host_timeout: float = 120,
    progress: Callable[[HostDone], None] | None = None,
    only: set[str] | None = None,
) -> list[Check]:
    """All targets concurrently; checks come back grouped by host, in inventory order.

    A host's deadline is ``host_timeout``, plus the time limit of its measuring batch once its checks read it
    (the measuring commands follow the fixed ones on the host's one connection, under their own limit)."""
    extra: dict[str, float] = {}
    results: dict[str, list[Check]] = {}
    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets) or 1)), thread_name_prefix="gpu-node")
    futures: dict[Future[list[Check]], Target] = {}
    begun: dict[str, float] = {}
    # A host given up at its deadline has its session aborted: the node stops its commands (Node.batch, watched).
    sessions = _Sessions()
    for t in targets:
        futures[
            pool.submit(
                _timed,
                begun,
                t,
                settings,
                int(min(host_timeout, 30)),
                only,
                max(1, int(host_timeout) - 5),
                functools.partial(extra.__setitem__, t.name),
                functools.partial(sessions.opened, t.name),
            )
        ] = t
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                target = futures[future]
                results[target.name] = _outcome(future, target)
                _report(progress, target, results, len(targets), begun)
            now = time.monotonic()
            for future in list(pending):
                target = futures[future]
                # A host's deadline runs from when a worker picked it up, not from the start of the run.
                deadline = host_timeout + extra.get(target.name, 0)
                if target.name in begun and now - begun[target.name] > deadline:
                    pending.discard(future)
                    future.cancel()
                    sessions.give_up(target.name)
                    results[target.name] = [
                        errored(
                            REACH_ID,
                            target.name,
                            f"no answer within {deadline:.0f}s; gave up on this host",
                            remedy="Look at the host: an nvidia-smi that hangs "
                            "usually means a GPU fell off the bus (Xid 79).",
                        )
                    ]
                    _report(progress, target, results, len(targets), begun)
    except KeyboardInterrupt as e:
        # Ctrl-C or SIGTERM: what finished is kept, the hosts still running are marked, the caller reports.
        from gpuready.core import cancel

        partial = [
            c
            for t in targets
            for c in results.get(t.name) or [errored(REACH_ID, t.name, f"{cancel.reason()} before this host finished")]
        ]
        raise Cancelled(cancel.reason(), partial) from e
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    log.debug("validated %d hosts in %.2fs", len(targets), time.monotonic() - started)
    return [c for t in targets for c in results.get(t.name, [])]


class _Sessions:
    """The hosts' open sessions, so that the main thread can end the one of a host it gave up on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, list[connect.Session]] = {}
        self._given_up: set[str] = set()

    def opened(self, host: str, session: connect.Session) -> None:
        with self._lock:
            self._open.setdefault(host, []).append(session)
            late = host in self._given_up
        if late:  # given up before its session started
            session.abort(kill_after=GIVE_UP_GRACE_S)

    def give_up(self, host: str) -> None:
        with self._lock:
            self._given_up.add(host)
            sessions = list(self._open.get(host, []))
        for session in sessions:
            session.abort(kill_after=GIVE_UP_GRACE_S)


def _timed(begun: dict[str, float], target: Target, *args: Any) -> list[Check]:
    begun[target.name] = time.monotonic()
    return validate_host(target, *args)


def _outcome(future: Future[list[Check]], target: Target) -> list[Check]:
    try:
        return future.result()
    except Exception as e:  # one host's surprise must not stop the others; it is reported on that host
        log.debug("host %s", target.name, exc_info=True)
        return [errored(REACH_ID, target.name, f"validation of {target.name} stopped: {type(e).__name__}: {e}")]


def _report(
    progress: Callable[[HostDone], None] | None,
    target: Target,
    results: dict[str, list[Check]],
    total: int,
    begun: dict[str, float],
) -> None:
    if progress is None:
        return
    failing = sum(c.status in ("failed", "error") for c in results[target.name])
    seconds = time.monotonic() - begun.get(target.name, time.monotonic())
    progress(HostDone(target.name, len(results), total, failing, seconds))
