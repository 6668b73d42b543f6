"""The one boundary to ansible-runner: every playbook gpuready runs goes through :func:`run_playbook`.

It passes check/diff/limit/tags/extra vars, turns runner events into progress callbacks
and per-host results, keeps one artifact folder per run, and cancels cleanly on Ctrl-C.
Roles report findings by appending dicts to the fact ``gpuready_checks``; they come back
as :class:`~gpuready.core.results.Check` objects (about the finding's own ``host`` when it names one).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuready.core import ansible_diff, cancel, docs, redact
from gpuready.core.artifacts import ArtifactNotWritten, write_json, write_text
from gpuready.core.collection import collection_dir
from gpuready.core.errors import BadInput, Cancelled, Unreachable, shorten
from gpuready.core.inventory import INVENTORY_PLUGINS, checked_files
from gpuready.core.results import CHECK_STATUSES, Check

log = logging.getLogger(__name__)

FINDINGS_FACT = "gpuready_checks"
COLLECTION = ("gpuready", "gpu")

# The Ansible configuration of every run, passed explicitly: an ansible.cfg in the current
# directory or the user's ~/.ansible.cfg must not change what gpuready does.
# Keys: https://docs.ansible.com/ansible/latest/reference_appendices/config.html
ANSIBLE_SETTINGS: dict[str, dict[str, str]] = {
    "defaults": {
        "stdout_callback": "default",
        # Imports a connection plugin from a collection (community.general.chroot, ...) once, in
        # ansible-playbook's process, so that each forked task worker inherits it instead of importing it
        # again (playbooks/plugins/callback/preload.py).
        "callbacks_enabled": "gpuready.gpu.preload",
        "callback_result_format": "yaml",
        "host_key_checking": "True",
        "retry_files_enabled": "False",
        "interpreter_python": "auto_silent",
        # Facts are gathered once per host and run (the first play that wants them, with the subsets
        # site.yml names) and kept for the later plays.
        "gathering": "smart",
        "fact_caching": "memory",
        # Facts only under ansible_facts, not also as one ansible_* variable each: every task's variables
        # are then about a hundred entries smaller (a tenth of a no-change provisioning run's time here).
        # ansible-core 2.20 deprecates the injected names (porting guide 2.20, "INJECT_FACTS_AS_VARS");
        # inventories that template facts write ansible_facts['distribution'], not ansible_distribution.
        # https://docs.ansible.com/ansible/latest/reference_appendices/config.html#inject-facts-as-vars
        "inject_facts_as_vars": "False",
        "timeout": "20",
        "nocolor": "True",
        "force_color": "False",
    },
    # The inventory plugins gpuready checks the inventory with (gpuready.core.inventory.INVENTORY_PLUGINS), instead of
    # Ansible's default list, which also runs an executable inventory file as a script ("script") and reads
    # host lists and TOML. https://docs.ansible.com/ansible/latest/reference_appendices/config.html#inventory-enabled
    "inventory": {"enable_plugins": ", ".join(INVENTORY_PLUGINS)},
    # Pipelining feeds each module to the node's Python on stdin: one process per task instead of
    # making a temporary folder, copying the module, running it and removing the folder. Ansible reads
    # it for every connection (ssh, chroot, local; the ssh section alone reaches only ssh). With sudo,
    # sudoers must not set requiretty (Ansible's documentation of the setting).
    # https://docs.ansible.com/ansible/latest/reference_appendices/config.html#ansible-pipelining
    "connection": {"pipelining": "True"},
}


#: The message Ansible's command, shell and raw give a command that exited non-zero.
COMMAND_FAILED = "non-zero return code"
#: ansible-core's message for a loop task with a failed item (lib/ansible/executor/task_executor.py, TaskExecutor.run).
LOOP_FAILED = "One or more items failed"

#: ansible-core 2.17's message for a task past its ``timeout:`` (lib/ansible/executor/task_executor.py; its
#: test/integration/targets/adhoc/runme.sh greps for it).
TASK_TIMED_OUT = re.compile(r"action failed to execute in the expected time frame \((\d+)\) and was terminated")

#: How a TLS verification failure reads in module messages (Python's ssl, urllib3, requests, pyVmomi).
TLS_FAILURE = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|SSLCertVerificationError", re.I)


def playbooks_dir() -> Path:
    """Where site.yml is: the collection, or GPUREADY_PLAYBOOKS (a folder of your own playbooks)."""
    override = os.environ.get("GPUREADY_PLAYBOOKS")
    return Path(override) if override else collection_dir()


#: Seconds ansible-runner waits on a silent ansible-playbook before it next looks at the cancel callback (its
#: ``pexpect_timeout``, 5 by default). A cancel does not wait for that look (core/cancel.py ends the children at
#: once); the cancel tests set this to minutes, so that a cancel that did wait for it could not pass by luck.
PEXPECT_TIMEOUT_VAR = "GPUREADY_PEXPECT_TIMEOUT_S"


def _runner_settings(private: Path) -> None:
    """ansible-runner's settings file (``env/settings``) with ``$GPUREADY_PEXPECT_TIMEOUT_S`` when it is set."""
    value = os.environ.get(PEXPECT_TIMEOUT_VAR)
    if not value:
        return
    try:
        seconds = float(value)
    except ValueError:
        raise BadInput(f"{PEXPECT_TIMEOUT_VAR}={value!r}: not a number of seconds") from None
    (private / "env").mkdir(mode=0o700, exist_ok=True)
    write_json(private / "env" / "settings", {"pexpect_timeout": seconds})


def ansible_environment(workdir: Path) -> dict[str, str]:
    """Environment variables for one ansible-playbook run, with its configuration written into ``workdir``.

    The collection is linked as ``workdir/collections/ansible_collections/gpuready/gpu`` and that folder
    is the run's collections path; the collections of the ``ansible`` package next to this Python are
    found on sys.path as usual.
    """
    import configparser

    # Absolute: ansible-playbook runs in another directory than gpuready, and reads these paths there.
    workdir = workdir.resolve()
    collections = workdir / "collections"
    link = collections.joinpath("ansible_collections", *COLLECTION)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(collection_dir(), target_is_directory=True)
    config = configparser.ConfigParser(interpolation=None)
    config.read_dict(ANSIBLE_SETTINGS)
    config["defaults"]["collections_path"] = str(collections)
    path = workdir / "ansible.cfg"
    with path.open("w") as f:
        config.write(f)
    return {
        "ANSIBLE_CONFIG": str(path),
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **utf8_locale(),
    }


def utf8_locale() -> dict[str, str]:
    """``LC_ALL=C.UTF-8`` where this process's character locale is not UTF-8, else nothing.

    ansible-core refuses to start under any other encoding ("ERROR: Ansible requires the locale encoding to be
    UTF-8", ``initialize_locale`` in ansible/cli/__init__.py), and the places gpuready runs from often have none:
    cron, a Slurm prolog, ``LC_ALL=C`` in a script, a locale named but not installed. C.UTF-8 is built into
    glibc from 2.35 (Debian 12, Ubuntu 22.04) and shipped by RHEL 8 and 9's glibc-minimal-langpack. Python set
    its character locale from the environment when it started, so this reads what ansible-playbook would get."""
    import locale

    encoding = locale.getlocale(locale.LC_CTYPE)[1] or ""
    return {} if encoding.lower().replace("-", "") == "utf8" else {"LC_ALL": "C.UTF-8"}


@contextmanager
def staged_inventory(inventory: Path) -> Iterator[Path]:
    """A private copy of exactly the inventory files gpuready checked (:func:`~gpuready.core.inventory.checked_files`),
    laid out as they are, for ansible-runner: given the folder itself, Ansible would also read every other file in it
    (a second .yml of hosts, an executable script that prints hosts). The copy lives in a temporary folder only the
    user can read (it may hold vaulted or plain credentials, which must not land among the artifacts) and is
    removed when the run ends. Yields the hosts file's copy."""
    import tempfile

    hosts_path, variables = checked_files(Path(inventory))
    base = hosts_path.parent
    folder = Path(tempfile.mkdtemp(prefix="gpuready-inventory-"))
    try:
        try:
            for source in [hosts_path, *variables]:
                copy = folder / source.relative_to(base)
                copy.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                descriptor = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "wb") as f:
                    f.write(source.read_bytes())
        except OSError as e:
            raise Unreachable(f"could not copy the inventory for Ansible: {e.strerror}: {e.filename}") from e
        yield folder / hosts_path.relative_to(base)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class TaskEvent:
    """A simplified runner event, for progress display."""

    host: str
    task: str
    status: str  # ok, changed, failed, unreachable, skipped
    message: str = ""


@dataclass
class HostResult:
    host: str
    ok: int = 0
    changed: int = 0
    failures: int = 0
    unreachable: bool = False
    skipped: int = 0
    changed_tasks: list[str] = field(default_factory=list)
    failed_tasks: list[tuple[str, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    unreachable_message: str = ""
    #: A task failed because a TLS certificate did not verify (the failed task's message).
    tls_failure: str = ""
    #: (task, before/after text) of each change that came with a diff (``--diff``), secrets masked.
    diffs: list[tuple[str, str]] = field(default_factory=list)
    #: Loop items that changed, by task, while the task has not finished: what a stop mid-loop leaves applied.
    changed_items: dict[str, tuple[str, list[str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class TimedOut:
    """A task that hit its ``timeout:`` keyword: Ansible gave up on what the task waited for."""

    host: str
    task: str
    seconds: int


@dataclass
class PlaybookRun:
    playbook: str
    status: str  # successful, failed, canceled, timeout
    rc: int
    hosts: dict[str, HostResult]
    artifacts: Path
    cancelled: bool = False
    #: The run was stopped at the first task that timed out: whatever it waited for stopped answering, and every
    #: later task would wait for it again (a play that rescues the failure goes on to the next).
    timed_out: TimedOut | None = None

    @property
    def stopped(self) -> bool:
        """Ended before the playbook finished: cancelled, or stopped at a task that timed out."""
        return self.cancelled or self.timed_out is not None

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())


class StepTimedOut(Unreachable):
    """A task of the run timed out and the run was stopped there; ``partial`` is the :class:`PlaybookRun`."""

    def __init__(self, run: PlaybookRun, timed_out: TimedOut) -> None:
        super().__init__(f"{timed_out.host}: {timed_out.task!r} did not finish within {timed_out.seconds}s")
        self.partial: object = run
        self.timed_out = timed_out


def known_tags(playbook: Path) -> set[str]:
    """Tags a user may ask for: those on plays, roles and imports in the playbook, plus Ansible's own."""
    import yaml

    tags = {"all", "always", "never", "tagged", "untagged"}

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            value = node.get("tags")
            if isinstance(value, str):
                tags.update(t.strip() for t in value.split(","))
            elif isinstance(value, list):
                tags.update(str(t) for t in value)
            for child in node.values():
                collect(child)
        elif isinstance(node, list):
            for child in node:
                collect(child)

    collect(yaml.safe_load(playbook.read_text()))
    return tags


def check_tags(playbook: Path, tags: list[str]) -> None:
    allowed = known_tags(playbook)
    unknown = [t for t in tags if t not in allowed]
    if unknown:
        raise BadInput(
            f"unknown tag(s) {', '.join(unknown)}; {playbook.name} has: "
            f"{', '.join(sorted(allowed - {'all', 'always', 'never', 'tagged', 'untagged'}))}"
        )


def run_playbook(
    playbook: str,
    inventory: Path,
    artifacts: Path,
    *,
    check: bool = False,
    diff: bool = False,
    limit: str | None = None,
    tags: list[str] | None = None,
    skip_tags: list[str] | None = None,
    extra_vars: dict[str, Any] | None = None,
    progress: Callable[[TaskEvent], None] | None = None,
    forks: int = 50,
    timeout_s: int | None = None,
    envvars: dict[str, str] | None = None,
    fact_cache: Path | None = None,
    stop_on_timeout: Collection[str] = (),
) -> PlaybookRun:
    """Run ``<playbooks_dir()>/<playbook>`` with ansible-runner and return per-host results.

    ``fact_cache``: a jsonfile fact cache folder to use instead of a fresh one per run (planning
    from recorded facts: hosts whose cached facts say they were gathered are not gathered again).

    ``stop_on_timeout``: hosts through which the play reaches one service (vCenter): a task of theirs that hits
    its ``timeout:`` means the service stopped answering, and the run stops there. Elsewhere a timed-out task
    is a failed task of its host, like any other.

    Raises :class:`Cancelled` (with what ran so far in ``.partial``) on Ctrl-C, :class:`StepTimedOut` (likewise)
    when a task hit its ``timeout:`` (the run is stopped there, nothing of it left running), and
    :class:`Unreachable` when Ansible itself could not start.
    """
    import ansible_runner

    path = playbooks_dir() / playbook
    if not path.is_file():
        raise BadInput(f"no playbook {path}")
    if tags:
        check_tags(path, tags)
    redact.register_environment()
    private = artifacts / "ansible"
    try:
        private.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = {**ansible_environment(private), **(envvars or {})}
        _runner_settings(private)
    except OSError as e:
        raise ArtifactNotWritten(f"could not write the Ansible configuration in {private}: {e.strerror}") from e
    write_json(
        artifacts / "variables.json",
        {
            "playbook": playbook,
            "inventory": str(inventory),
            "check": check,
            "diff": diff,
            "limit": limit,
            "tags": tags,
            "skip_tags": skip_tags,
            "extra_vars": extra_vars or {},
        },
    )
    hosts: dict[str, HostResult] = {}
    findings: dict[str, list[dict[str, Any]]] = {}
    timeouts: list[TimedOut] = []
    stopping_hosts = frozenset(stop_on_timeout)

    def on_event(event: dict[str, Any]) -> bool:
        _record(event, hosts, findings, progress)
        if not timeouts and (timed_out := _timed_out(event)) and timed_out.host in stopping_hosts:
            timeouts.append(timed_out)
        return True

    def stop() -> bool:
        # ansible-runner asks after each event it handled: a timed-out task stops the run at once, and its module,
        # which Ansible's timeout leaves running (still waiting on the silent service), ends with the rest.
        if cancel.stop_when_requested():
            return True
        if timeouts:
            cancel.stop_children()
            return True
        return False

    cmdline = []
    if check:
        cmdline.append("--check")
    if diff:
        cmdline.append("--diff")
    if skip_tags:
        cmdline += ["--skip-tags", ",".join(skip_tags)]
    if shutil.which("ansible-playbook", path=env["PATH"]) is None:
        raise Unreachable("ansible-playbook not found next to this Python or on PATH; install gpuready with pip")
    with cancel.polled(), staged_inventory(inventory) as hosts_copy:
        try:
            result = ansible_runner.run(
                private_data_dir=str(private),
                project_dir=str(private),
                playbook=str(path),
                inventory=str(hosts_copy),
                cmdline=" ".join(cmdline) or None,
                limit=limit,
                tags=",".join(tags) if tags else None,
                # The manual's folder, so the roles' messages name pages the user has (a wheel has no docs/).
                extravars={"gpuready_docs_dir": str(docs.folder()), **(extra_vars or {})},
                envvars=env,
                forks=forks,
                quiet=True,
                event_handler=on_event,
                cancel_callback=stop,
                timeout=timeout_s,
                suppress_env_files=True,
                rotate_artifacts=1,
                # ansible-runner joins this onto its artifact folder; an absolute path replaces it.
                **({"fact_cache": str(fact_cache.resolve())} if fact_cache else {}),
            )
        except Exception as e:  # ansible-runner raises plain exceptions for set-up problems
            raise Unreachable(f"could not run {playbook}: {shorten(e)}") from e
    _scrub(private)
    run = PlaybookRun(
        playbook=playbook,
        status=result.status,
        rc=result.rc or 0,
        hosts=hosts,
        artifacts=private,
        cancelled=cancel.requested() or (result.status == "canceled" and not timeouts),
        timed_out=None if cancel.requested() or not timeouts else timeouts[0],
    )
    _apply_stats(result, hosts)
    _keep_half_applied(hosts)
    for host, items in findings.items():
        hosts.setdefault(host, HostResult(host)).checks = [_finding(host, item) for item in items]
    try:
        write_json(artifacts / "recap.json", {h: _recap(r) for h, r in hosts.items()} | {"status": run.status})
    except ArtifactNotWritten as e:
        # What ran is still reported (summary.json, or one line naming what could not be written).
        log.debug("%s", e)
    if run.cancelled:
        raise Cancelled(cancel.reason(), run)
    if run.timed_out:
        raise StepTimedOut(run, run.timed_out)
    if result.status == "failed" and not hosts:
        raise Unreachable(f"{playbook} did not run: {shorten(_last_error(result))}")
    return run


def _record(
    event: dict[str, Any],
    hosts: dict[str, HostResult],
    findings: dict[str, list[dict[str, Any]]],
    progress: Callable[[TaskEvent], None] | None,
) -> None:
    kind = event.get("event", "")
    data = event.get("event_data", {})
    host = data.get("host") or data.get("remote_addr")
    if not host:
        return
    res = data.get("res", {}) or {}
    task = data.get("task", "")
    if kind == "runner_item_on_ok" and res.get("changed"):
        # A loop's task reports its changes when every item is done; until then they are only here.
        item = str(res.get("_ansible_item_label", res.get("item", "")))
        pending = hosts.setdefault(host, HostResult(host)).changed_items
        pending.setdefault(str(data.get("task_uuid", task)), (task, []))[1].append(item)
    if not kind.startswith("runner_on_") or kind in ("runner_on_start",):
        return
    record = hosts.setdefault(host, HostResult(host))
    ignored = kind == "runner_on_failed" and bool(data.get("ignore_errors"))
    if kind == "runner_on_ok" or ignored:
        # The task's change is counted now (Ansible's recap counts an ignored failure's change too); the items of a
        # task that failed stay, counted at the end (the recap counts no change for a failed task, though its items
        # before the failure were applied).
        record.changed_items.pop(str(data.get("task_uuid", task)), None)
    status = {
        "runner_on_ok": "changed" if res.get("changed") else "ok",
        "runner_on_failed": "failed",
        "runner_on_unreachable": "unreachable",
        "runner_on_skipped": "skipped",
    }.get(kind)
    if status is None:
        return
    if ignored:
        status = "changed" if res.get("changed") else "ok"
    message = ""
    # Counted as the events come, so a run stopped before Ansible's recap still says what it did; the recap's
    # figures replace these when there is one.
    if status in ("ok", "changed"):
        record.ok += 1
    if status == "skipped":
        record.skipped += 1
    if status == "failed":
        record.failures += 1
    if status == "changed":
        record.changed += 1
        record.changed_tasks.append(task)
        if diff := ansible_diff.of_result(res, data.get("resolved_action") or data.get("task_action", "")):
            record.diffs.append((task, redact.text(diff)))
    elif status == "failed":
        full = _failure(res)
        message = shorten(redact.text(full))
        record.failed_tasks.append((task, message))
        if not record.tls_failure and (tls := TLS_FAILURE.search(full)):
            record.tls_failure = shorten(redact.text(full[max(0, tls.start() - 120) :]))
    elif status == "unreachable":
        message = shorten(redact.text(str(res.get("msg", "unreachable"))))
        record.unreachable = True
        record.unreachable_message = message
    facts = res.get("ansible_facts") or {}
    if FINDINGS_FACT in facts and isinstance(facts[FINDINGS_FACT], list):
        findings[host] = facts[FINDINGS_FACT]
    if progress:
        progress(TaskEvent(host=host, task=task, status=status, message=message))


def _timed_out(event: dict[str, Any]) -> TimedOut | None:
    """The task (or one item of its loop) that hit its ``timeout:`` keyword. From ansible-core 2.18 the result
    carries ``timedout`` with the ``period`` (the documented return value of the ``ansible.builtin.timedout``
    test); before, only :data:`TASK_TIMED_OUT`'s message said so (ansible 10 is ansible-core 2.17)."""
    if event.get("event") not in ("runner_on_failed", "runner_item_on_failed"):
        return None
    data = event.get("event_data", {})
    res = data.get("res") or {}
    host = data.get("host") or data.get("remote_addr")
    timedout = res.get("timedout")
    if isinstance(timedout, dict):
        seconds = int(timedout.get("period") or 0)
    elif said := TASK_TIMED_OUT.search(str(res.get("msg", ""))):
        seconds = int(said.group(1))
    else:
        return None
    return TimedOut(str(host), str(data.get("task", "")), seconds) if host else None


def _failure(res: dict[str, Any]) -> str:
    """What a failed task said. Commands (command, shell, raw) fail with Ansible's bare "non-zero return
    code"; what the command itself said, on stderr (else stdout), is what tells the user why. A loop fails with
    "One or more items failed": the first failed item and what it said tell why."""
    msg = str(res.get("msg") or "")
    items = [r for r in res.get("results") or () if isinstance(r, dict) and r.get("failed")]
    if items and msg == LOOP_FAILED:
        first = items[0]
        label = first.get("_ansible_item_label", first.get("item", ""))
        more = f" (+{len(items) - 1} more failed items)" if len(items) > 1 else ""
        return f"item {label}: {_failure(first)}{more}"
    said = str(res.get("stderr") or res.get("stdout") or "").strip()
    if said and (not msg or msg == COMMAND_FAILED):
        return f"exit {res.get('rc', '?')}: {said}" if msg else said
    return msg


def _scrub(private: Path) -> None:
    """Mask secrets in what ansible-runner saved: it keeps the whole environment and gathered facts."""
    import json

    for path in private.glob("artifacts/*/fact_cache"):
        shutil.rmtree(path, ignore_errors=True)  # a copy of every host's environment, not needed afterwards
    for path in private.glob("artifacts/*/**/*"):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        try:
            scrubbed = json.dumps(redact.structure(json.loads(text)))
        except ValueError:
            scrubbed = redact.text(text)
        if scrubbed != text:
            try:
                write_text(path, scrubbed)
            except ArtifactNotWritten as e:
                # Unmasked, it must not stay (a full disk): the run's own results do not depend on it.
                path.unlink(missing_ok=True)
                log.warning("%s; removed it, since it held unmasked values", e)


def _keep_half_applied(hosts: dict[str, HostResult]) -> None:
    """A loop that did not finish (stopped, or failed on a later item): the items that had changed count as a change
    of their task. Ansible's recap counts none for a failed task, though its items before the failure were applied."""
    for record in hosts.values():
        for task, items in record.changed_items.values():
            record.changed += 1
            record.changed_tasks.append(f"{task} ({', '.join(items)})")
        record.changed_items.clear()


def _apply_stats(result: Any, hosts: dict[str, HostResult]) -> None:
    stats = result.stats or {}
    if stats:
        for record in hosts.values():  # the recap's figures, not the ones counted from events
            record.ok = record.changed = record.failures = record.skipped = 0
    for key, attr in (("ok", "ok"), ("changed", "changed"), ("failures", "failures"), ("skipped", "skipped")):
        for host, n in (stats.get(key) or {}).items():
            setattr(hosts.setdefault(host, HostResult(host)), attr, n)
    for host in stats.get("dark") or {}:
        hosts.setdefault(host, HostResult(host)).unreachable = True


def _finding(host: str, item: dict[str, Any]) -> Check:
    status = str(item.get("status", "error"))
    if status not in CHECK_STATUSES:
        status = "error"
    return Check(
        id=str(item.get("id", "finding")),
        host=str(item.get("host") or host),
        status=status,
        message=redact.text(_text(item.get("message", ""))),
        evidence=redact.text(_text(item.get("evidence", ""))),
        remedy=_text(item.get("remedy", "")),
    )


def _text(value: Any) -> str:
    """A finding's field as text a person reads: a role's mapping or list (a ``{...} | tojson`` in a YAML
    template is read back as one) as YAML's ``key: value`` lines, true and null as YAML writes them, never as
    Python prints them (``{'check_mode': True}``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        import yaml

        try:
            return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)).strip()
        except yaml.YAMLError:
            pass
    return json.dumps(value, default=str)


def _recap(r: HostResult) -> dict[str, Any]:
    return {
        "ok": r.ok,
        "changed": r.changed,
        "failures": r.failures,
        "unreachable": r.unreachable,
        "skipped": r.skipped,
        "changed_tasks": r.changed_tasks,
        "failed_tasks": r.failed_tasks,
    }


def _last_error(result: Any) -> str:
    try:
        lines = [line for line in result.stdout.read().splitlines() if line.strip()]
    except Exception:  # the stdout file may be missing when ansible never started
        return str(result.status)
    errors = [line for line in lines if "ERROR" in line]
    return str((errors or lines or [result.status])[-1])
