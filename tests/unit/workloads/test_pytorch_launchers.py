"""The PyTorch path's launch files: torchrun locally and over ssh, `srun torchrun` under Slurm, a PyTorchJob."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gpuready.core.errors import BadInput
from gpuready.workloads.launchers import Plan, kubernetes, local, slurm, ssh

PLAN = Plan(model="densenet121", batch_size=64, mixed_precision=True, steps=20, framework="pytorch", distribution="ddp")


def test_worker_arguments_are_the_torch_entry_points() -> None:
    assert PLAN.module == ["-m", "gpuready.workloads.pytorch.train"]
    args = PLAN.train_args()
    assert "--mixed-precision" in args and "--distribution" not in args and "--xla" not in args
    # the entry point accepts exactly what the launchers pass
    from gpuready.workloads.pytorch import train as torch_train

    parsed = torch_train.parse_args(args)
    assert (parsed.batch_size, parsed.steps, parsed.mixed_precision) == (64, 20, True)


def test_local_launcher_runs_torchrun_one_process_per_worker() -> None:
    cmd = local.command(PLAN, 2)
    assert cmd[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    assert cmd[6:8] == ["-m", "gpuready.workloads.pytorch.train"]


def test_ssh_launcher_starts_one_torchrun_per_host_meeting_at_the_first(tmp_path: Path) -> None:
    hosts = [ssh.Host("gpu1", "10.10.0.11", 4, user="ops"), ssh.Host("gpu2", "10.10.0.12", 4, user="ops")]
    known = tmp_path / "known_hosts"
    commands = ssh.torchrun_commands(PLAN, 8, hosts, known, python="/opt/venv/bin/python")
    assert [c[0] for c in commands] == ["ssh", "ssh"]
    assert [c[-4] for c in commands] == ["10.10.0.11", "10.10.0.12"]
    assert all(c[c.index("User=ops") - 1] == "-o" for c in commands)
    assert f"UserKnownHostsFile={known}" in commands[0] and "BatchMode=yes" in commands[0]
    remote = shlex.split(commands[1][-1])
    assert remote[:3] == ["/opt/venv/bin/python", "-m", "torch.distributed.run"]
    options = dict(zip(remote[3:13:2], remote[4:13:2], strict=True))
    assert options == {
        "--nnodes": "2",
        "--nproc-per-node": "4",
        "--rdzv-backend": "c10d",
        "--rdzv-endpoint": "10.10.0.11:29400",
        "--rdzv-id": "gpuready-8w",
    }
    assert remote[13:15] == ["-m", "gpuready.workloads.pytorch.train"]
    assert len(ssh.torchrun_commands(PLAN, 2, hosts, known)) == 1
    with pytest.raises(BadInput, match="same number of workers"):
        ssh.torchrun_commands(PLAN, 6, hosts, known)


@pytest.mark.parametrize(("workers", "per_node", "nodes"), [(1, 4, 1), (4, 4, 1), (8, 4, 2)])
def test_sbatch_script_runs_srun_torchrun_per_node(tmp_path: Path, workers: int, per_node: int, nodes: int) -> None:
    text = slurm.script(PLAN, workers, per_node, tmp_path)
    assert slurm.validate(text) == []
    assert f"#SBATCH --nodes={nodes}" in text and f"#SBATCH --gres=gpu:{min(workers, per_node)}" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("srun ")]
    assert "--ntasks-per-node=1" in line and "-m torch.distributed.run" in line
    assert f"--nproc-per-node {min(workers, per_node)}" in line and '"$head:29400"' in line
    assert "mpirun" not in text


@pytest.mark.parametrize(("workers", "gpus", "pods"), [(1, 4, 1), (8, 4, 2), (2, 0, 2)])
def test_pytorchjob_validates_and_runs_torchrun_in_every_pod(workers: int, gpus: int, pods: int) -> None:
    doc = kubernetes.manifest("pytorchjob", PLAN, workers, gpus, "nvcr.io/nvidia/pytorch:24.01-py3", "training")
    assert kubernetes.validate(doc) == []
    specs = doc["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs.get("Worker", {}).get("replicas", 0) == pods - 1
    (container,) = specs["Master"]["template"]["spec"]["containers"]
    assert container["name"] == "pytorch"  # the operator injects MASTER_ADDR and RANK into this container only
    command = container["command"]
    assert command[command.index("--nnodes") + 1] == str(pods)
    assert command[command.index("--node-rank") + 1] == "$(RANK)"
    assert container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0) == (
        min(workers, gpus) if gpus else 0
    )
    assert doc["spec"]["nprocPerNode"] == str(workers // pods)


def test_pytorchjob_validator_catches_broken_jobs() -> None:
    doc = kubernetes.manifest("pytorchjob", PLAN, 8, 4, "img", "ns")
    doc["spec"]["pytorchReplicaSpecs"]["Chief"] = doc["spec"]["pytorchReplicaSpecs"].pop("Worker")
    assert kubernetes.validate(doc)
    with pytest.raises(BadInput, match="same number of workers"):
        kubernetes.manifest("pytorchjob", PLAN, 6, 4, "img", "ns")


def test_compare_names_the_framework_when_runs_differ_in_it() -> None:
    from gpuready.workloads.controller import compare

    older_tf = compare.Run("tf", Path("a"), {1: 100.0}, {"model": "densenet121"})  # before runs recorded it
    torch_run = compare.Run("torch", Path("b"), {1: 120.0}, {"model": "densenet121", "framework": "pytorch"})
    tf_run = compare.Run("tf2", Path("c"), {1: 90.0}, {"model": "densenet121", "framework": "tensorflow"})
    assert compare.setup_differences([older_tf, torch_run, tf_run]) == [
        "torch: framework 'pytorch' (first: 'tensorflow')"
    ]


def test_ssh_launch_marks_its_remote_processes(tmp_path: Path) -> None:
    hosts = [ssh.Host("gpu1", "10.10.0.11", 4), ssh.Host("gpu2", "10.10.0.12", 4)]
    mark = ssh.launch_mark()
    commands = ssh.torchrun_commands(PLAN, 8, hosts, tmp_path / "known_hosts", mark=mark)
    assert all(c[c.index("env") + 1 : -1] == ["PYTHONUNBUFFERED=1", mark] for c in commands)
    assert mark.startswith(f"{ssh.LAUNCH_VAR}=") and mark != ssh.launch_mark()


def test_the_stop_command_ends_the_launchs_processes_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run where the processes are (here), as the launcher runs it over ssh on each host."""
    import os
    import subprocess

    monkeypatch.setattr(ssh, "STOP_GRACE_S", 1)
    mark, other = ssh.launch_mark(), ssh.launch_mark()
    started = []
    for value, script in [
        (mark, "sleep 300"),
        (mark, "trap '' TERM; sleep 300"),  # deaf to SIGTERM: needs the SIGKILL after the grace
        (other, "sleep 300"),  # another launch's worker
    ]:
        name, _, token = value.partition("=")
        env = {**os.environ, name: token}
        # "ready" once the trap is set: a SIGTERM before it (a loaded machine's slow start) would end the shell
        started.append(
            subprocess.Popen(
                ["sh", "-c", f"{script.removesuffix('sleep 300')}echo ready; exec sleep 300"],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )
    try:
        assert [p.stdout.readline() for p in started] == ["ready\n"] * 3
        done = subprocess.run(["sh", "-c", ssh.stop_command(mark)], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert [p.wait(timeout=5) for p in started[:2]] == [-15, -9]
        assert started[2].poll() is None
    finally:
        for p in started:
            p.kill()
            p.wait()
