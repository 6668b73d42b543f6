"""The ssh and slurm launchers run for real against the lab: a Slurm cluster from Debian's slurm-wlm and
munge (slurmctld + one slurmd per namespace host) and the same hosts' sshds. TensorFlow with Horovod
(horovodrun, mpirun, srun) and PyTorch (torchrun over ssh, srun torchrun), on CPU.

Each run is driven through the CLI as a user would; the assertions read the workers' own results,
which name the host each worker ran on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import training_sizes as sizes
from tests.conftest import ModuleTmp, gpuready, require
from tests.lab_hints import run_hints
from tests.processes import Child

pytestmark = [pytest.mark.root, pytest.mark.slow]

TINY = [*sizes.TINY, "--cpu"]
HOSTS = ["v100-x4-00", "v100-x4-01"]


def _train_on_two(inventory: str | Path, artifacts: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`validate training` on 2 workers, the tiny run, with ``options``."""
    return gpuready(
        "validate", "training", "-i", str(inventory), *options, "--gpus", "2", *TINY, "--artifacts", str(artifacts)
    )


@pytest.fixture(scope="module")
def lab(module_tmp: ModuleTmp) -> Iterator[dict[str, Any]]:
    from gpuready.lab import slurm

    require(os.geteuid() == 0 and shutil.which("ip"), "needs root and `ip netns` (network namespaces)")
    require(not slurm.missing_tools(), f"missing {slurm.missing_tools()} (scripts/install-system-deps)")
    root = module_tmp("lab")
    prefix = f"gw{os.getpid() % 100000}"
    up = gpuready("lab", "up", "--components", "slurm", "--set", f"slurm.prefix={prefix}", "--lab-dir", str(root))
    assert up.returncode == 0, up.stdout + up.stderr
    state = json.loads((root / "state.json").read_text())["slurm"]
    try:
        yield {**state, "root": root, "inventory": Path(up.stdout.strip().splitlines()[-1]), "printed": up.stderr}
    finally:
        down = gpuready("lab", "down", "--lab-dir", str(root))
        assert down.returncode == 0, down.stdout + down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
        assert f"{prefix}-" not in left, f"namespaces left behind: {left}"
        running = subprocess.run(["pgrep", "-af", str(root)], capture_output=True, text=True, check=False).stdout
        assert not running, f"processes left behind by lab down: {running}"
        assert not Path(state["munge_dir"]).exists()


@pytest.fixture
def horovod() -> None:
    require(
        importlib.util.find_spec("tensorflow") and importlib.util.find_spec("horovod"),
        "TensorFlow and Horovod (make test installs the train extra)",
    )


@pytest.fixture
def torch() -> None:
    require(
        importlib.util.find_spec("torch") and importlib.util.find_spec("torchvision"),
        "torch and torchvision (make .venv/.stamp-torch)",
    )


def _env(lab: dict[str, Any]) -> dict[str, str]:
    return {"SLURM_CONF": lab["slurm_conf"]}


def _scontrol(lab: dict[str, Any], *args: str) -> str:
    done = subprocess.run(
        ["scontrol", *args], capture_output=True, text=True, env={**os.environ, **_env(lab)}, check=True
    )
    return done.stdout


def _inventory(lab: dict[str, Any], where: Path, **training: Any) -> Path:
    """A copy of the lab's inventory with some training settings changed."""
    shutil.copytree(lab["inventory"], where)
    path = where / "group_vars" / "all" / "gpuready.yml"
    doc = yaml.safe_load(path.read_text())
    doc["gpuready"]["training"].update(training)
    path.write_text(yaml.safe_dump(doc))
    return where


def _run(artifacts: Path) -> Path:
    (run,) = list(artifacts.iterdir())
    return run


def _assert_two_hosts_trained_together(run: Path) -> list[dict[str, Any]]:
    raw = json.loads((run / "step_times.json").read_text())
    ranks = raw["2"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["size"] == 2 for r in ranks)
    # one worker on each node, each named by its own hostname
    assert sorted(r["host"] for r in ranks) == HOSTS
    assert all(len(r["step_times"]) == 3 for r in ranks)
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"] != ranks[0]["weights_sha256_before"]
    summary = json.loads((run / "summary.json").read_text())
    assert {c["id"]: c["status"] for c in summary["checks"]} == {
        "training.2w.trained": "passed",
        "training.2w.images_per_second": "skipped",  # --cpu: recorded, never judged as GPUs are
        "training.2w.per_gpu": "skipped",
    }
    per_worker = [r["batch_size"] * len(r["step_times"]) / sum(r["step_times"]) for r in ranks]
    # summary.json keeps 3 decimals
    assert summary["metrics"]["images_per_second_2w"] == pytest.approx(sum(per_worker), rel=1e-4, abs=5e-4)
    assert "| 2 |" in (run / "training.md").read_text()
    return ranks


def test_lab_cluster_has_a_node_per_host_with_its_gpus(lab: dict[str, Any]) -> None:
    nodes = _scontrol(lab, "show", "node", "-o").splitlines()
    assert sorted(line.split()[0].removeprefix("NodeName=") for line in nodes) == HOSTS
    for line in nodes:
        assert "Gres=gpu:4" in line and "State=IDLE" in line, line
    partitions = _scontrol(lab, "show", "partition", "-o")
    # the partition inventories/baremetal-c4140 submits to
    example = yaml.safe_load(
        (Path(__file__).parents[3] / "inventories/baremetal-c4140/group_vars/all/gpuready.yml").read_text()
    )
    assert f"PartitionName={example['gpuready']['training']['slurm_partition']} " in partitions


@pytest.mark.train
def test_slurm_job_across_two_nodes_and_collect(lab: dict[str, Any], tmp_path: Path, horovod: None) -> None:
    artifacts = tmp_path / "runs"
    proc = _train_on_two(lab["inventory"], artifacts)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run(artifacts)
    script = (run / "train-2w.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --partition=gpu" in script
    _assert_two_hosts_trained_together(run)
    (output,) = run.glob("slurm-2w-*.out")

    # the same output file, read back as if the script had been submitted by hand
    collected = gpuready("report", "collect", str(output), "--artifacts", str(tmp_path / "collected"))
    assert collected.returncode == 0, collected.stdout + collected.stderr
    again = json.loads((_run(tmp_path / "collected") / "summary.json").read_text())
    first = json.loads((run / "summary.json").read_text())
    assert again["metrics"]["images_per_second_2w"] == first["metrics"]["images_per_second_2w"]
    assert "scaling on CPU, not GPUs (from the raw step times)" in collected.stdout  # read back as CPU too


def test_every_hint_lab_up_prints_runs_as_printed(lab: dict[str, Any], tmp_path: Path, horovod: None) -> None:
    ran = run_hints(lab["printed"], tmp_path, timeout=1200)
    assert [line.split(" -i ")[0] for line, _ in ran] == ["gpuready validate training", "gpuready validate gpu-node"]
    for line, done in ran:
        assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
    [trained] = tmp_path.glob("gpuready-runs/*validate-training/summary.json")
    assert json.loads(trained.read_text())["metrics"]["training"]["launcher"] == "slurm"


def test_slurm_bad_partition_is_reported(lab: dict[str, Any], tmp_path: Path) -> None:
    inventory = _inventory(lab, tmp_path / "inv", slurm_partition="nosuch")
    proc = _train_on_two(inventory, tmp_path / "runs")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((_run(tmp_path / "runs") / "summary.json").read_text())
    (check,) = summary["checks"]
    assert check["status"] == "failed" and "sbatch refused" in check["message"]
    assert "Invalid partition" in check["message"]


@pytest.mark.train
def test_slurm_crashing_worker_gives_job_state_and_output(lab: dict[str, Any], tmp_path: Path, horovod: None) -> None:
    proc = _train_on_two(lab["inventory"], tmp_path / "runs", "--data", "/nonexistent-tfrecords")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (check,) = json.loads((_run(tmp_path / "runs") / "summary.json").read_text())["checks"]
    message = check["message"]
    assert check["status"] == "failed" and message.startswith("2-worker run failed: job ")
    assert "state FAILED" in message and "0/2 workers reported" in message
    assert "nonexistent-tfrecords" in message  # the tail of the job's output names the cause


def test_slurm_drained_node_cancels_the_job(lab: dict[str, Any], tmp_path: Path) -> None:
    _scontrol(lab, "update", f"nodename={HOSTS[1]}", "state=drain", "reason=gpuready test")
    try:
        proc = _train_on_two(lab["inventory"], tmp_path / "runs")
    finally:
        _scontrol(lab, "update", f"nodename={HOSTS[1]}", "state=resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (check,) = json.loads((_run(tmp_path / "runs") / "summary.json").read_text())["checks"]
    assert "could not start" in check["message"] and "state CANCELLED" in check["message"], check["message"]


@pytest.mark.train
@pytest.mark.parametrize("runner", ["horovodrun", "mpirun"])
def test_ssh_launcher_across_two_hosts(lab: dict[str, Any], tmp_path: Path, runner: str, horovod: None) -> None:
    if runner == "mpirun":
        require(shutil.which("mpirun"), "mpirun (Debian: openmpi-bin; scripts/install-system-deps)")
    artifacts = tmp_path / "runs"
    proc = _train_on_two(lab["inventory"], artifacts, "--launcher", "ssh", "--ssh-runner", runner)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run(artifacts)
    assert (run / "workers-2.cmd").read_text().split()[0] == ("mpirun" if runner == "mpirun" else "ssh")
    _assert_two_hosts_trained_together(run)


def test_ssh_unreachable_host_stops_before_launch(lab: dict[str, Any], tmp_path: Path) -> None:
    inventory = _inventory(lab, tmp_path / "inv")
    hosts_file = inventory / "hosts.yml"
    hosts = yaml.safe_load(hosts_file.read_text())
    subnet = lab["subnet"].rsplit(".", 1)[0]
    first = next(iter(hosts["gpu_nodes"]["hosts"].values()))
    # an address on the lab's bridge where nothing listens, listed first: a host that is down
    hosts["gpu_nodes"]["hosts"] = {"down-99": {**first, "ansible_host": f"{subnet}.250"}, **hosts["gpu_nodes"]["hosts"]}
    hosts_file.write_text(yaml.safe_dump(hosts, sort_keys=False))
    proc = _train_on_two(inventory, tmp_path / "runs", "--launcher", "ssh")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "host down-99" in proc.stderr and f"{subnet}.250" in proc.stderr


def _assert_torch_ran_ddp_on_both_hosts(run: Path, proc: subprocess.CompletedProcess[str]) -> None:
    ranks = _assert_two_hosts_trained_together(run)
    assert {r["backend"] for r in ranks} == {"gloo"} and all(r["framework"] == "pytorch" for r in ranks)
    assert all(r["device"] == "CPU (1 threads)" for r in ranks)  # --cpu-threads reached the workers
    assert all(r["process_start_unix"] < r["first_step_unix"] for r in ranks)  # what the overhead benchmark reads
    training = json.loads((run / "summary.json").read_text())["metrics"]["training"]
    assert training["framework"] == "pytorch" and training["distribution"] == "ddp"
    # the same scaling table as for the local launcher, on the console and in training.md
    assert "images/s" in proc.stdout and "| 2 |" in (run / "training.md").read_text()


def test_pytorch_slurm_job_runs_srun_torchrun_across_two_nodes(
    lab: dict[str, Any], tmp_path: Path, torch: None
) -> None:
    artifacts = tmp_path / "runs"
    proc = _train_on_two(lab["inventory"], artifacts, "--framework", "pytorch", "--cpu-threads", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run(artifacts)
    (srun,) = [ln for ln in (run / "train-2w.sbatch").read_text().splitlines() if ln.startswith("srun ")]
    assert "-m torch.distributed.run" in srun and '--nnodes "$SLURM_NNODES"' in srun
    _assert_torch_ran_ddp_on_both_hosts(run, proc)


def _pytorch_over_ssh(
    lab: dict[str, Any], training: list[str], artifacts: Path, inventory: Path | None = None
) -> list[str]:
    """`validate training` with torchrun over ssh on the lab's two hosts, one CPU worker each."""
    return [
        *("validate", "training", "-i", str(inventory or lab["inventory"]), "--launcher", "ssh"),
        *("--framework", "pytorch"),
        *("--gpus", "2", "--cpu-threads", "1", *training, "--artifacts", str(artifacts)),
    ]


def test_pytorch_ssh_launcher_runs_torchrun_on_each_host(lab: dict[str, Any], tmp_path: Path, torch: None) -> None:
    artifacts = tmp_path / "runs"
    proc = gpuready(*_pytorch_over_ssh(lab, TINY, artifacts))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run(artifacts)
    commands = (run / "workers-2.cmd").read_text().splitlines()
    assert len(commands) == 2 and all(c.startswith("ssh ") and "torch.distributed.run" in c for c in commands)
    _assert_torch_ran_ddp_on_both_hosts(run, proc)


def test_pytorch_ssh_launcher_reaches_hosts_through_a_jump_host(
    lab: dict[str, Any], tmp_path: Path, torch: None
) -> None:
    # The hosts named by names only the lab's hosts resolve (their shared hosts file; not this machine's), behind
    # the first host as the jump host, as validate gpu-node is told of one: ssh from here reaches them through it
    # or not at all. The jump's own ssh reads only -F's file (OpenSSH passes it no -i), as on a site's bastion.
    inventory = _inventory(lab, tmp_path / "inv")
    hosts_file = inventory / "hosts.yml"
    hosts = yaml.safe_load(hosts_file.read_text())
    members = hosts["gpu_nodes"]["hosts"]
    jump = members[HOSTS[0]]["ansible_host"]
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host {jump}\n  IdentityFile {members[HOSTS[0]]['ansible_ssh_private_key_file']}\n  BatchMode yes\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    )
    for name in HOSTS:
        members[name].update(ansible_host=name, ansible_ssh_common_args=f"-F {config} -o ProxyJump=root@{jump}")
    hosts_file.write_text(yaml.safe_dump(hosts, sort_keys=False))
    require(
        subprocess.run(["getent", "hosts", HOSTS[1]], capture_output=True, check=False).returncode != 0,
        f"this machine resolves {HOSTS[1]}: the jump host would not be needed",
    )
    artifacts = tmp_path / "runs"
    proc = gpuready(*_pytorch_over_ssh(lab, TINY, artifacts, inventory))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _run(artifacts)
    commands = (run / "workers-2.cmd").read_text().splitlines()
    assert all(f"ProxyJump=root@{jump}" in c for c in commands) and len(commands) == 2
    _assert_torch_ran_ddp_on_both_hosts(run, proc)
    # Without the jump host, the same hosts are not reached: it is the jump that carried the run.
    for name in HOSTS:
        members[name]["ansible_ssh_common_args"] = ""
    hosts_file.write_text(yaml.safe_dump(hosts, sort_keys=False))
    direct = gpuready(*_pytorch_over_ssh(lab, TINY, tmp_path / "direct", inventory))
    assert direct.returncode == 3 and f"host {HOSTS[0]}" in direct.stderr, direct.stdout + direct.stderr


def test_ctrl_c_while_the_slurm_job_runs_cancels_it(lab: dict[str, Any], tmp_path: Path, horovod: None) -> None:
    long_run = [*TINY[:2], "--steps", "100000", *TINY[4:]]
    child = Child(
        ["validate", "training", "-i", str(lab["inventory"]), "--gpus", "2", *long_run, "--artifacts", str(tmp_path)],
        {},
    )
    deadline = time.monotonic() + 120
    while "RUNNING" not in _squeue(lab) and time.monotonic() < deadline:
        time.sleep(1)
    assert "RUNNING" in _squeue(lab), "the job never started"
    child.signal_and_wait(signal.SIGINT, limit=60)
    assert child.proc.returncode == 130, child.stderr
    deadline = time.monotonic() + 30
    while _squeue(lab) and time.monotonic() < deadline:
        time.sleep(1)
    assert not _squeue(lab), "the job is still in the queue after Ctrl-C"


def _squeue(lab: dict[str, Any]) -> str:
    done = subprocess.run(
        ["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, env={**os.environ, **_env(lab)}, check=True
    )
    return done.stdout.strip()


def _training_processes(steps: str) -> list[str]:
    """This machine's processes of one training run (the namespace hosts share its process table), found by
    the run's own --steps value in their command lines: torchrun and its workers on every host."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in args]
        if "gpuready.workloads.pytorch.train" in words and steps in words:
            found.append(f"{entry.name}: {' '.join(words).strip()}")
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cancel_while_ssh_torchrun_runs_stops_it_on_every_host(
    lab: dict[str, Any], tmp_path: Path, torch: None, sig: signal.Signals
) -> None:
    # A remote process started over ssh without a terminal outlives the killed local ssh: the launcher must end it.
    steps = str(100000 + os.getpid() % 50000)
    long_run = [*TINY[:2], "--steps", steps, *TINY[4:]]
    child = Child(_pytorch_over_ssh(lab, long_run, tmp_path), {})
    deadline = time.monotonic() + 180
    # torchrun and one worker on each host
    while len(running := _training_processes(steps)) < 4 and time.monotonic() < deadline:
        assert child.proc.poll() is None, child.stderr
        time.sleep(1)
    assert len(running) >= 4, f"the workers never started: {running}\n{child.stderr}"
    child.signal_and_wait(sig, limit=60)
    assert child.proc.returncode == 128 + sig, child.stderr
    deadline = time.monotonic() + 15
    while (left := _training_processes(steps)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, "still running on the hosts after the cancel:\n" + "\n".join(left)
