"""gpuready as Slurm runs it: slurmd itself runs `gpuready slurm health-check` as its HealthCheckProgram and
`gpuready slurm prolog` as its Prolog, in the lab's Slurm cluster (Debian's slurmctld and slurmd, one slurmd per
namespace host). Each host's nvidia-smi replays real recordings (gpuready.lab.replay); a fault is put on a host by
writing another profile's recordings over its tools, and cleared by writing its own back.

The wrappers below are what a site's would be (docs/fleet.md): slurmd runs a HealthCheckProgram or Prolog
without arguments, so a two-line script names gpuready's options; here it also puts the host's replayed tools
first on PATH, and honours a flag file that pauses the health check while the prolog gate is shown.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuready.core.results import Check
from gpuready.lab import replay
from gpuready.validate import slurm
from tests.conftest import ModuleTmp, gpuready, require

pytestmark = [pytest.mark.root, pytest.mark.slow]

NODES = ["v100-x4-00", "v100-x4-01"]
HEALTHY, FAULTY = "v100-x4", "ecc-errors"
#: How often slurmd runs the health check here (slurm.conf HealthCheckInterval, seconds).
INTERVAL = 5
#: How long any change may take to show in Slurm: several health-check intervals.
WAIT = 90

WRAPPER = """#!/bin/sh
# gpuready as slurmd's {what} in the lab (no arguments: slurmd passes none)
N=$(hostname)
{pause}export PATH="{hosts}/$N/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" SLURM_CONF={conf}
exec {python} -m gpuready.core.cli slurm {command} --settings {settings} --node-class c4140-v100 \\
  --verdict {out}/$N.{command}.json >>{out}/$N.{command}.log 2>&1
"""


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    from gpuready.lab import slurm as lab_slurm

    require(os.geteuid() == 0 and shutil.which("ip"), "needs root and `ip netns` (network namespaces)")
    require(not lab_slurm.missing_tools(), f"missing {lab_slurm.missing_tools()} (scripts/install-system-deps)")
    root = module_tmp("lab")
    out = module_tmp("hc")
    prefix = f"gh{os.getpid() % 100000}"
    up = gpuready("lab", "up", "--components", "slurm", "--set", f"slurm.prefix={prefix}", "--lab-dir", str(root))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((root / "state.json").read_text())["slurm"]
    conf = Path(state["slurm_conf"])
    values = {
        "hosts": conf.parent / "hosts",
        "conf": conf,
        "python": sys.executable,
        "settings": Path(state["inventory"]) / "group_vars" / "all" / "gpuready.yml",
        "out": out,
    }
    programs = {
        "health-check": WRAPPER.format(
            what="HealthCheckProgram", command="health-check", pause=f"[ -e {out}/paused ] && exit 0\n", **values
        ),
        "prolog": WRAPPER.format(
            what="Prolog", command="prolog", pause=f"[ -e {out}/paused-prolog ] && exit 0\n", **values
        ),
        "epilog": WRAPPER.format(what="Epilog", command="epilog", pause="", **values),
    }
    for name, text in programs.items():
        (out / name).write_text(text)
        (out / name).chmod(0o755)
    with conf.open("a") as f:
        f.write(f"HealthCheckProgram={out / 'health-check'}\nHealthCheckInterval={INTERVAL}\n")
        f.write(f"Prolog={out / 'prolog'}\nEpilog={out / 'epilog'}\n")
    lab = {**state, "root": root, "out": out, "hosts": values["hosts"]}
    try:
        done = scontrol(lab, "reconfigure")
        assert done.returncode == 0, done.stderr
        yield lab
    finally:
        down = gpuready("lab", "down", "--lab-dir", str(root))
        assert down.returncode == 0, down.stdout + down.stderr


def scontrol(lab: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scontrol", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "SLURM_CONF": lab["slurm_conf"]},
    )


def reasons(lab: dict[str, Any]) -> dict[str, str]:
    """Node -> its reason, as `sinfo -R` lists them (the whole reason, not its first 20 characters)."""
    done = subprocess.run(
        ["sinfo", "-R", "-h", "-N", "-o", "%N|%E"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "SLURM_CONF": lab["slurm_conf"]},
    )
    return dict(line.split("|", 1) for line in done.stdout.splitlines() if "|" in line)


def ours(reason: str) -> str:
    return reason if slurm.ours(reason) else ""


def wait_for(what: str, ok: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := ok():
            return value
        time.sleep(1)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def profile(lab: dict[str, Any], node: str, name: str) -> None:
    replay.build(name, lab["hosts"] / node)


def verdict(lab: dict[str, Any], node: str, command: str = "health-check") -> dict[str, Any]:
    path = lab["out"] / f"{node}.{command}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def fresh_verdict(lab: dict[str, Any], node: str, status: str, after: float) -> dict[str, Any]:
    """A health-check verdict of ``node`` written after ``after`` (a time.time()) with ``status``."""

    def newer() -> dict[str, Any]:
        path = lab["out"] / f"{node}.health-check.json"
        found = verdict(lab, node) if path.exists() and path.stat().st_mtime > after else {}
        return found if found.get("status") == status else {}

    return wait_for(f"a {status} health check of {node}", newer)


def test_a_fault_drains_the_node_with_gpuready_reason_and_clearing_it_resumes_it(lab: dict[str, Any]) -> None:
    node = NODES[1]
    assert wait_for("a first health check", lambda: verdict(lab, node)), "slurmd never ran the health check"
    assert node not in reasons(lab)
    profile(lab, node, FAULTY)
    try:
        reason = wait_for(f"{node} drained by gpuready", lambda: ours(reasons(lab).get(node, "")))
        # one state: the reason says the verdict's first failure, its check id and message
        failure = verdict(lab, node)["failure"]
        assert failure["id"] == "gpu.ecc_volatile"
        assert reason == slurm.reason(Check(failure["id"], node, "failed", failure["message"]))
        assert reason.startswith("gpuready: gpu.ecc_volatile: GPU 1 (00000000:1C:00.0): 2 volatile uncorrectable")
        assert len(reason) <= slurm.REASON_LIMIT
        shown = scontrol(lab, "show", "node", node).stdout
        assert "DRAIN" in shown
        # and the remedy, which the short reason has no room for, in the node's Comment
        assert f"   Comment=gpuready: gpu.ecc_volatile: remedy: {failure['remedy']}\n" in shown
        assert NODES[0] not in reasons(lab)  # the healthy node stays in service
    finally:
        profile(lab, node, HEALTHY)
    wait_for(f"{node} resumed once its checks pass", lambda: node not in reasons(lab))
    shown = scontrol(lab, "show", "node", node).stdout
    assert "DRAIN" not in shown and "gpuready" not in shown


def test_an_admins_drain_is_left_alone_fault_or_not(lab: dict[str, Any]) -> None:
    node = NODES[0]
    done = scontrol(lab, "update", f"NodeName={node}", "State=DRAIN", "Reason=admin: new DIMMs")
    assert done.returncode == 0, done.stderr
    try:
        profile(lab, node, FAULTY)
        fresh_verdict(lab, node, "failed", time.time())
        assert reasons(lab)[node] == "admin: new DIMMs"
        assert "gpuready" not in scontrol(lab, "show", "node", node).stdout
        assert "left alone" in (lab["out"] / f"{node}.health-check.log").read_text().splitlines()[-1]
        profile(lab, node, HEALTHY)
        fresh_verdict(lab, node, "passed", time.time())
        assert reasons(lab)[node] == "admin: new DIMMs"  # a pass resumes only gpuready's own drains
    finally:
        profile(lab, node, HEALTHY)
        scontrol(lab, "update", f"NodeName={node}", "State=RESUME")


def submit(lab: dict[str, Any], node: str, command: str) -> str:
    """sbatch ``command`` on ``node`` of the lab's gpu partition; the job's id."""
    submitted = subprocess.run(
        ["sbatch", "--parsable", "-p", "gpu", "-w", node, "-o", "/dev/null", "--wrap", command],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "SLURM_CONF": lab["slurm_conf"]},
    )
    return submitted.stdout.strip().split(";")[0]


def test_the_prolog_gate_fails_a_job_start_on_the_faulty_node(lab: dict[str, Any]) -> None:
    node = NODES[1]
    env = {"SLURM_CONF": lab["slurm_conf"]}
    (lab["out"] / "paused").touch()  # the health check would drain the node before any job reached it
    time.sleep(2 * INTERVAL)  # a health check already under way finishes
    scontrol(lab, "update", f"NodeName={node}", "State=RESUME")
    job = ""
    try:
        profile(lab, node, FAULTY)
        job = submit(lab, node, "hostname")

        def held() -> str:
            shown = scontrol(lab, "show", "job", job).stdout
            # PENDING once the epilog of the failed start has run too
            return shown if "launch_failed_requeued_held" in shown and "JobState=PENDING" in shown else ""

        wait_for(f"job {job} requeued held by the prolog", held)
        assert verdict(lab, node, "prolog")["failure"]["id"] == "gpu.ecc_volatile"
        # drained, with gpuready's reason, not only Slurm's "Prolog error"
        assert reasons(lab)[node].startswith("gpuready: gpu.ecc_volatile: ")
    finally:
        if job:
            subprocess.run(["scancel", job], timeout=30, check=False, env={**os.environ, **env})
        profile(lab, node, HEALTHY)
        (lab["out"] / "paused").unlink()
    wait_for(f"{node} resumed by the health check", lambda: node not in reasons(lab))


def test_the_epilog_gate_drains_a_node_that_went_bad_during_the_job(lab: dict[str, Any]) -> None:
    node = NODES[1]
    env = {**os.environ, "SLURM_CONF": lab["slurm_conf"]}
    (lab["out"] / "paused").touch()  # the health check would find the fault first
    time.sleep(2 * INTERVAL)
    job = ""
    try:
        job = submit(lab, node, "sleep 8")
        wait_for(f"job {job} running", lambda: "JobState=RUNNING" in scontrol(lab, "show", "job", job).stdout)
        profile(lab, node, FAULTY)  # the GPU goes bad while the job runs
        reason = wait_for(f"{node} drained by the epilog", lambda: ours(reasons(lab).get(node, "")))
        assert "JobState=RUNNING" not in scontrol(lab, "show", "job", job).stdout  # after the job, not during it
        assert reason.startswith("gpuready: gpu.ecc_volatile: ")
        assert verdict(lab, node, "epilog")["failure"]["id"] == "gpu.ecc_volatile"
    finally:
        if job:
            subprocess.run(["scancel", job], timeout=30, check=False, env=env)
        profile(lab, node, HEALTHY)
        (lab["out"] / "paused").unlink()
    wait_for(f"{node} resumed by the health check", lambda: node not in reasons(lab))


def test_bad_input_drains_nothing(lab: dict[str, Any], tmp_path: Path) -> None:
    env = {"SLURM_CONF": lab["slurm_conf"], "PATH": f"{lab['hosts'] / NODES[0] / 'bin'}:{os.environ['PATH']}"}
    wait_for("a health check of each node", lambda: all(verdict(lab, n) for n in NODES))
    unknown = gpuready("slurm", "health-check", "--node-name", "gpu99", env=env)
    assert unknown.returncode == 2, unknown.stderr
    assert unknown.stderr.strip() == (
        "gpuready: error: slurm: node 'gpu99' is not a node Slurm knows (scontrol: Node gpu99 not found)"
    )
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "gpuready.node-verdict/v2", "gpuready": "9.0", "host": NODES[0]}))
    other = gpuready("slurm", "health-check", "--node-name", NODES[0], "--from-verdict", str(old), env=env)
    assert other.returncode == 2, other.stderr
    assert len(other.stderr.strip().splitlines()) == 1 and "schema 'gpuready.node-verdict/v2'" in other.stderr
    elsewhere = lab["out"] / f"{NODES[1]}.health-check.json"
    not_mine = gpuready("slurm", "health-check", "--node-name", NODES[0], "--from-verdict", str(elsewhere), env=env)
    assert not_mine.returncode == 2 and "not of this node (v100-x4-00)" in not_mine.stderr, not_mine.stderr
    # a verdict that would drain, were it not a day old
    stale = tmp_path / "stale.json"
    written = verdict(lab, NODES[0])
    failure = {"id": "gpu.xid", "message": "m", "remedy": "r"}
    day_old = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).isoformat(timespec="seconds")
    written.update(time=day_old, status="failed", failure=failure)
    stale.write_text(json.dumps(written))
    old_news = gpuready("slurm", "health-check", "--node-name", NODES[0], "--from-verdict", str(stale), env=env)
    assert old_news.returncode == 3 and "older than --max-age 3600s" in old_news.stderr, old_news.stderr
    # scontrol missing: PATH without it (python found by its full path)
    no_scontrol = gpuready("slurm", "health-check", "--node-name", NODES[0], env={**env, "PATH": "/nonexistent"})
    assert no_scontrol.returncode == 3, no_scontrol.stderr
    assert no_scontrol.stderr.strip() == (
        "gpuready: error: scontrol is not on PATH: cannot ask Slurm about this node (install slurm-client)"
    )
    assert reasons(lab) == {}


def on_node(lab: dict[str, Any], tmp_path: Path) -> Path:
    """How the lab's nodes run gpuready: their replayed tools first on PATH (a site's would be `gpuready`)."""
    command = tmp_path / "gpuready-on-node"
    replayed = f'export PATH="{lab["hosts"]}/$(hostname)/bin:$PATH"'
    command.write_text(f'#!/bin/sh\n{replayed}\nexec {sys.executable} -m gpuready.core.cli "$@"\n')
    command.chmod(0o755)
    return command


def sweep(lab: dict[str, Any], command: Path, runs: Path) -> subprocess.CompletedProcess[str]:
    return gpuready(
        "slurm",
        "sweep",
        "--partition",
        "gpu",
        "--settings",
        str(Path(lab["inventory"]) / "group_vars" / "all" / "gpuready.yml"),
        "--node-class",
        "c4140-v100",
        "--gpuready-command",
        str(command),
        "--timeout",
        "120",
        "--artifacts",
        str(runs),
        env={"SLURM_CONF": lab["slurm_conf"]},
        timeout=300,
    )


def test_a_sweep_of_the_partition_becomes_one_run_folder(lab: dict[str, Any], tmp_path: Path) -> None:
    node = NODES[1]
    command = on_node(lab, tmp_path)
    # the health check would drain the faulty node before the sweep reached it, the prolog refuse the job there
    (lab["out"] / "paused").touch()
    (lab["out"] / "paused-prolog").touch()
    time.sleep(2 * INTERVAL)
    runs = tmp_path / "runs"
    try:
        profile(lab, node, FAULTY)
        done = sweep(lab, command, runs)
    finally:
        profile(lab, node, HEALTHY)
        (lab["out"] / "paused").unlink()
        (lab["out"] / "paused-prolog").unlink()
    assert done.returncode == 1, done.stdout + done.stderr
    (folder,) = runs.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["command"] == "slurm sweep"
    failed = {(c["host"], c["id"]) for c in summary["checks"] if c["status"] in ("failed", "error")}
    assert failed == {(node, "gpu.ecc_volatile"), (node, "gpu.xid")}, failed
    assert {c["host"] for c in summary["checks"]} == set(NODES)
    assert all((folder / name).exists() for name in ("junit.xml", "report.html", "report.md"))
    assert summary["metrics"]["slurm_job"]["state"] == "COMPLETED"
    # the node's own verdict, as it wrote it on the node
    assert json.loads((folder / "verdicts" / f"{node}.json").read_text())["failure"]["id"] == "gpu.ecc_volatile"
    # the epilog met the fault after the sweep's job and drained the node; the health check resumes it
    wait_for(f"{node} back in service", lambda: node not in reasons(lab))


def test_a_sweep_stopped_by_the_prolog_gate_says_why_without_waiting_out_its_timeout(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    node = NODES[1]
    (lab["out"] / "paused").touch()  # the prolog, not the health check, is what meets the fault here
    time.sleep(2 * INTERVAL)
    runs = tmp_path / "runs"
    started = time.monotonic()
    try:
        profile(lab, node, FAULTY)
        done = sweep(lab, on_node(lab, tmp_path), runs)
    finally:
        profile(lab, node, HEALTHY)
        (lab["out"] / "paused").unlink()
    assert time.monotonic() - started < 100, "the sweep waited out its 120 s timeout"
    assert done.returncode == 3, done.stdout + done.stderr
    (folder,) = runs.iterdir()
    checks = {c["host"]: c for c in json.loads((folder / "summary.json").read_text())["checks"]}
    assert checks[node]["status"] == "error"
    assert "requeued held (a node's prolog failed) and cancelled" in checks[node]["message"]
    assert "Slurm drained it: gpuready: gpu.ecc_volatile: " in checks[node]["message"], checks[node]["message"]
    wait_for(f"{node} resumed by the health check", lambda: node not in reasons(lab))
