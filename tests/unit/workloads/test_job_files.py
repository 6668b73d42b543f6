"""The sbatch script, MPIJob and TFJob gpuready writes are valid, and the validators catch broken ones."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gpuready.workloads.launchers import Plan, kubernetes, slurm, ssh

PLAN = Plan(model="resnet50", batch_size=256, mixed_precision=True, xla=True, steps=100)


@pytest.mark.parametrize(("workers", "per_node", "nodes"), [(1, 4, 1), (4, 4, 1), (8, 4, 2), (3, 2, 2)])
def test_sbatch_script_is_valid_and_one_task_per_gpu(tmp_path: Path, workers: int, per_node: int, nodes: int) -> None:
    text = slurm.script(PLAN, workers, per_node, tmp_path, partition="gpu")
    assert slurm.validate(text) == []
    assert f"#SBATCH --nodes={nodes}" in text and f"#SBATCH --ntasks={workers}" in text
    assert f"#SBATCH --gres=gpu:{min(workers, per_node)}" in text
    assert "mpirun --map-by socket" in text and "--mixed-precision --xla" in text


def test_sbatch_validator_catches_typos_and_bad_counts(tmp_path: Path) -> None:
    text = slurm.script(PLAN, 8, 4, tmp_path)
    assert slurm.validate(text.replace("--ntasks=8", "--ntasks=9"))
    assert slurm.validate(text.replace("--gres=gpu:4", "--gres=gpu:2"))
    assert slurm.validate(text.replace("--exclusive", "--exclusiv"))
    assert slurm.validate(text + "if then\n")


def test_slurm_launcher_writes_the_script_when_sbatch_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch)\
        -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without Slurm's tools
    launch = slurm.launch(PLAN, 8, tmp_path, 4)
    assert "not submitted (no sbatch here)" in launch.written_only
    assert slurm.validate((tmp_path / "train-8w.sbatch").read_text()) == []


@pytest.mark.parametrize("kind", ["mpijob", "tfjob"])
@pytest.mark.parametrize("workers", [1, 8])
def test_job_manifests_validate(kind: str, workers: int) -> None:
    doc = kubernetes.manifest(kind, PLAN, workers, 4, "nvcr.io/nvidia/tensorflow:24.01-tf2-py3", "training")
    assert kubernetes.validate(doc) == []
    yaml.safe_load(yaml.safe_dump(doc))
    if kind == "mpijob":
        assert doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == (1 if workers == 1 else 2)
        assert doc["spec"]["slotsPerWorker"] == min(workers, 4)
    else:
        (container,) = doc["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert container["command"][container["command"].index("--distribution") + 1] == "mwms"


def test_manifest_validator_catches_broken_jobs() -> None:
    good = kubernetes.manifest("mpijob", PLAN, 8, 4, "img", "ns")
    bad_spec = copy.deepcopy(good)
    bad_spec["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    assert any("restartPolicy" in p for p in kubernetes.validate(bad_spec))
    bad_pod = copy.deepcopy(good)
    bad_pod["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3
    assert any("Launcher pod template" in p for p in kubernetes.validate(bad_pod))
    bad_tf = kubernetes.manifest("tfjob", PLAN, 2, 1, "img", "ns")
    bad_tf["spec"]["tfReplicaSpecs"]["Workers"] = bad_tf["spec"]["tfReplicaSpecs"].pop("Worker")
    assert kubernetes.validate(bad_tf)


def test_ssh_fills_whole_hosts_one_worker_per_gpu() -> None:
    hosts = [("10.10.0.11", 4), ("10.10.0.12", 4)]
    assert ssh.host_slots(hosts, 6) == [("10.10.0.11", 4), ("10.10.0.12", 2)]
    cmd = ssh.command(PLAN, 8, hosts, "mpirun")
    assert cmd[:6] == ["mpirun", "--map-by", "socket", "-np", "8", "-H"] and cmd[6] == "10.10.0.11:4,10.10.0.12:4"
    assert ssh.command(PLAN, 2, hosts, "horovodrun")[:6] == ["horovodrun", "-np", "2", "-H", "10.10.0.11:2", "--gloo"]
