"""Results are never lost, and stay the user's: a hang-up is a cancel like SIGTERM, a full disk is one line and
exit 3 with the verdict still shown, every artifact is written whole or not at all, and folders are 0700, files
0600."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, gpuready
from tests.playbooks import site, wait_until_task_runs, waiting_play
from tests.processes import Child, leftovers, new_mark
from tests.unit.core.test_bad_inputs import make_inventory
from tests.unit.core.test_scope import LOCAL, marking_playbooks

pytestmark = pytest.mark.slow

LOCAL_INVENTORY = ROOT / "inventories" / "local"
PAGE = os.sysconf("SC_PAGE_SIZE")


def test_sighup_during_gpu_node_writes_the_results_and_exits_129(tmp_path: Path, hanging_inventory: Path) -> None:
    inv = hanging_inventory
    runs = tmp_path / "runs"
    env = new_mark()
    child = Child(["validate", "gpu-node", "-i", str(inv), "--artifacts", str(runs), "--host-timeout", "600"], env)
    child.wait_for("here: ")
    child.signal_and_wait(signal.SIGHUP, limit=5)
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == 129, child.stderr
    assert "Traceback" not in child.stderr
    [folder] = runs.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert "SIGHUP" in summary["aborted"]
    assert {c["host"] for c in summary["checks"]} == {"here", "hangs"}
    assert (folder / "junit.xml").is_file() and (folder / "report.md").is_file() and (folder / "FAILURE").is_file()


def test_a_closed_terminal_still_leaves_the_results(tmp_path: Path, hanging_inventory: Path) -> None:
    """gpuready on a real terminal (a pseudo-terminal), which then closes: the kernel hangs up the session
    (SIGHUP) and every later write to the terminal fails. The results are written all the same, exit 129."""
    inv = hanging_inventory
    runs = tmp_path / "runs"
    env = {**os.environ, **new_mark()}
    argv = [sys.executable, "-m", "gpuready.core.cli", "validate", "gpu-node", "-i", str(inv)]
    argv += ["--artifacts", str(runs), "--host-timeout", "600"]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a session leader with the pseudo-terminal as its controlling terminal
        os.chdir(ROOT)
        os.execve(sys.executable, argv, env)
    seen = b""
    deadline = time.monotonic() + 60
    while b"here: " not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([terminal], [], [], 1)
        if ready:
            seen += os.read(terminal, 65536)
    os.close(terminal)  # the terminal window closes
    deadline = time.monotonic() + 10
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        assert time.monotonic() < deadline, "gpuready did not end after the hang-up"
        time.sleep(0.1)
    assert os.waitstatus_to_exitcode(done[1]) == 129
    assert leftovers(env) == [], "processes of the run left behind"
    [folder] = runs.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert "SIGHUP" in summary["aborted"]
    assert {c["host"] for c in summary["checks"]} == {"here", "hangs"}


def test_sighup_during_provision_stops_ansible_and_writes_the_results(tmp_path: Path) -> None:
    playbooks = site(tmp_path, waiting_play({"minutes": 30}, first_task=False))
    runs = tmp_path / "runs"
    env = {"GPUREADY_PLAYBOOKS": str(playbooks), **new_mark()}
    child = Child(["provision", "cluster", "-i", str(LOCAL_INVENTORY), "--artifacts", str(runs)], env)
    wait_until_task_runs(child, runs)
    child.signal_and_wait(signal.SIGHUP, limit=15)
    assert leftovers(env) == [], "processes of the run left behind"
    assert child.proc.returncode == 129, child.stderr
    [summary] = runs.glob("*/summary.json")
    assert "SIGHUP" in json.loads(summary.read_text())["aborted"]


@contextlib.contextmanager
def small_disk(folder: Path, free_pages: int) -> Iterator[Path]:
    """A 1 MiB tmpfs at ``folder`` with ``runs/`` on it, filled but for ``free_pages`` pages."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(folder)], check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (folder / "runs").mkdir()
        with (folder / "filler").open("wb") as f:
            f.write(b"\0" * (2**20 - free_pages * PAGE))
        yield folder / "runs"
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_at_the_start_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", free_pages=0) as runs:
        done = gpuready("validate", "gpu-node", "-i", str(LOCAL_INVENTORY), "--artifacts", str(runs))
        assert done.returncode == 3, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("gpuready: error: could not write ") and "No space left on device" in line, line
        assert "command.txt" in line
        assert list(runs.iterdir()) == [], "a run folder without results was left"


def test_a_disk_that_fills_names_what_was_not_written_and_still_shows_the_verdict(tmp_path: Path) -> None:
    """Space for the command line and a page more: summary.json and junit.xml (two pages each for this run)
    cannot be written. The verdict still reaches the terminal; no artifact is left half-written."""
    with small_disk(tmp_path / "disk", free_pages=2) as runs:
        done = gpuready("validate", "gpu-node", "-i", str(LOCAL_INVENTORY), "--artifacts", str(runs))
        assert done.returncode == 3, done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()[-1:]
        assert line.startswith("gpuready: error: could not write summary.json, junit.xml"), done.stderr
        assert line.endswith("No space left on device")
        verdict = [x for x in done.stdout.splitlines() if x.startswith("validate gpu-node: ")]
        assert len(verdict) == 1, done.stdout
        [folder] = runs.iterdir()
        left = sorted(p.name for p in folder.iterdir())
        assert "summary.json" not in left and "junit.xml" not in left
        assert not [n for n in left if n.endswith(".tmp")], left
        assert (folder / "command.txt").read_text().strip(), "command.txt is empty"


def modes(folder: Path) -> dict[str, str]:
    found = {}
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            found[str(path.relative_to(folder.parent))] = oct(stat.S_IMODE(path.stat().st_mode))
    return found


def test_artifacts_are_readable_by_the_user_only(tmp_path: Path, artifacts: Path) -> None:
    """Every folder 0700 and every file 0600, ansible-runner's own files included, whatever the umask."""
    playbooks, _ = marking_playbooks(tmp_path)
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": {"gpu01": LOCAL}}})
    fresh = tmp_path / "new-root"
    done = gpuready(
        "provision", "cluster", "-i", str(inv), "--artifacts", str(fresh),
        env={"GPUREADY_PLAYBOOKS": str(playbooks)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = modes(fresh)
    assert any("/ansible/artifacts/" in p for p in found), "the Ansible artifacts were not looked at"
    wrong = {p: m for p, m in found.items() if m != ("0o700" if Path(tmp_path, p).is_dir() else "0o600")}
    assert wrong == {}
