"""The sbatch script, MPIJob and TFJob gpuready writes are valid, and the validators catch broken ones."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core import inventory
from gpuready.core.errors import BadInput, Unreachable
from gpuready.core.inventory import Inventory, connection
from gpuready.core.inventory.connection import connection_spec
from gpuready.workloads.launchers import Plan, horovodrun, kubernetes, slurm, ssh, targets
from tests.conftest import ROOT, require
from tests.doc_samples import owned_block

PLAN = Plan(model="resnet50", batch_size=256, mixed_precision=True, compile="on", steps=100)


@pytest.mark.parametrize(("workers", "per_node", "nodes"), [(1, 4, 1), (4, 4, 1), (8, 4, 2), (3, 2, 2)])
def test_sbatch_script_is_valid_and_one_task_per_gpu(tmp_path: Path, workers: int, per_node: int, nodes: int) -> None:
    text = slurm.script(PLAN, workers, per_node, tmp_path, partition="gpu")
    assert slurm.validate(text) == []
    assert f"#SBATCH --nodes={nodes}" in text and f"#SBATCH --ntasks={workers}" in text
    assert f"#SBATCH --gres=gpu:{min(workers, per_node)}" in text
    assert "mpirun --map-by socket" in text and "--mixed-precision --compile on" in text
    # the command that runs: srun's tasks get Horovod's Gloo rendezvous from gpuready.workloads.launchers.rendezvous
    (run,) = [ln for ln in text.splitlines() if ln and not ln.startswith("#") and "rendezvous" in ln]
    assert " -m gpuready.workloads.launchers.rendezvous srun -- " in run
    assert "-m gpuready.workloads.tensorflow.train" in run


def test_sbatch_tasks_per_node_spreads_workers_over_hosts(tmp_path: Path) -> None:
    text = slurm.script(PLAN, 2, 4, tmp_path, tasks_per_node=1)
    assert slurm.validate(text) == []
    assert "#SBATCH --nodes=2" in text and "#SBATCH --ntasks-per-node=1" in text and "--gres=gpu:1" in text


def test_sbatch_validator_catches_typos_and_bad_counts(tmp_path: Path) -> None:
    text = slurm.script(PLAN, 8, 4, tmp_path)
    assert slurm.validate(text.replace("--ntasks=8", "--ntasks=9"))
    assert slurm.validate(text.replace("--gres=gpu:4", "--gres=gpu:2"))
    assert slurm.validate(text.replace("--exclusive", "--exclusiv"))
    assert slurm.validate(text + "if then\n")


def test_slurm_launcher_writes_the_script_when_sbatch_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


@pytest.mark.parametrize(
    ("kind", "edit", "expected"),
    [
        # a misspelled field: the CRD does not name it (the API server's strict field validation refuses it)
        ("mpijob", lambda s: s.update(slotsPerWorkers=s.pop("slotsPerWorker")), "MPIJob CRD: spec: Additional"),
        # a field of the wrong type, deep in the pod template the CRD embeds
        ("tfjob", lambda s: s["tfReplicaSpecs"]["Worker"].update(replicas="two"), "TFJob CRD: spec.tfReplicaSpecs"),
        ("pytorchjob", lambda s: s.update(nprocPerNode=4), "PyTorchJob CRD: spec.nprocPerNode: 4 is not of type"),
    ],
)
def test_the_owners_crd_schema_refuses_one_wrong_field(kind: str, edit, expected: str) -> None:
    doc = kubernetes.manifest(kind, PLAN, 8, 4, "img", "ns")
    assert kubernetes.validate(doc) == []
    edit(doc["spec"])
    assert any(p.startswith(expected) for p in kubernetes.validate(doc)), kubernetes.validate(doc)


def test_crds_are_the_owners_files_unchanged() -> None:
    folder = Path(kubernetes.__file__).parent / "crds"
    sources = (folder / "SOURCES.md").read_text()
    for plural, owner in (
        ("mpijobs", "mpi-operator@v0.6.0"),
        ("tfjobs", "training-operator@v1.8.1"),
        ("pytorchjobs", "training-operator@v1.8.1"),
    ):
        name = f"kubeflow.org_{plural}.yaml"
        row = next(line for line in sources.splitlines() if line.startswith(f"| `{name}`"))
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert owner in row and f"sha256 {digest[:8]}...{digest[-5:]}" in row
    served = {kubernetes.crd(k)["spec"]["versions"][0]["name"] for k in ("MPIJob", "TFJob", "PyTorchJob")}
    assert served == {"v2beta1", "v1"}


def test_ssh_fills_whole_hosts_one_worker_per_gpu(tmp_path: Path) -> None:
    a, b = ssh.Host("c4140-01", "10.10.0.11", 4, "root", "/k"), ssh.Host("c4140-02", "10.10.0.12", 4, "root", "/k")
    assert ssh.host_slots([a, b], 6) == [(a, 4), (b, 2)]
    with pytest.raises(BadInput, match="9 workers need 9 slots"):
        ssh.host_slots([a, b], 9)
    cmd = ssh.command(PLAN, 8, [a, b], "mpirun", tmp_path / "known_hosts")
    cmd = [c for c in cmd if c != "--allow-run-as-root"]
    assert cmd[:6] == ["mpirun", "--map-by", "socket", "-np", "8", "-H"] and cmd[6] == "10.10.0.11:4,10.10.0.12:4"
    assert cmd[cmd.index("--") - 2 : cmd.index("--")] == ["gpuready.workloads.launchers.rendezvous", "worker"]


def horovodrun_found() -> bool:
    try:
        return bool(horovodrun())
    except Unreachable:
        return False


def test_ssh_horovodrun_runs_on_the_first_host_with_the_inventorys_key(tmp_path: Path) -> None:
    require(horovodrun_found(), "horovodrun (train extra: make .venv/.stamp-train)")
    a, b = ssh.Host("c4140-01", "10.10.0.11", 4, "root", "/k"), ssh.Host("c4140-02", "10.10.0.12", 4, "root", "/k")
    remote = ssh.command(PLAN, 2, [a, b], "horovodrun", tmp_path / "known_hosts", interface="eth0")
    assert remote[0] == "ssh" and remote[remote.index("env") - 1] == "10.10.0.11" and "User=root" in remote
    assert remote[remote.index("-i") + 1] == "/k"
    assert " -np 2 -H 10.10.0.11:2 --gloo " in remote[-1] and "--network-interfaces eth0" in remote[-1]


def test_failed_job_message_names_the_workers_error_before_sruns_noise() -> None:
    out = (
        "Traceback (most recent call last):\n"
        "FileNotFoundError: no train-*.tfrecord files in /data (convert the data first)\n"
        "srun: error: node-b: task 1: Exited with exit code 1\n"
        "slurmstepd-node-a: error: *** STEP 2.0 ON node-a CANCELLED AT 2026-11-23T11:51:18 ***\n"
        "srun: error: node-a: task 0: Terminated\n"
    )
    assert slurm.job_tail(out) == (
        "Traceback (most recent call last): | FileNotFoundError: no train-*.tfrecord "
        "files in /data (convert the data first) | srun: error: node-b: task 1: Exited "
        "with exit code 1"
    )


def test_without_a_cluster_the_mpijobs_are_written_validated_and_skipped(tmp_path: Path) -> None:
    # The docs' Kubernetes launcher sample is this run, from an empty folder with no kubeconfig to load.
    sample = owned_block(ROOT / "docs" / "training.md")
    assert sample.commands[0] == "export KUBECONFIG=no-kubeconfig"
    done = sample.run(tmp_path)
    assert [d.returncode for d in done] == [0] * len(done), [d.stdout for d in done]
    (run,) = list((tmp_path / "gpuready-runs").iterdir())
    for workers in (1, 4):
        job = yaml.safe_load((run / f"mpijob-{workers}w.yaml").read_text())
        assert job["kind"] == "MPIJob" and kubernetes.validate(job) == []
    sample.assert_printed(done)


def jump_host_inventory(tmp_path: Path, ssh_args: str) -> tuple[Inventory, Any]:
    """Dell's C4140 example inventory, its GPU hosts behind a jump host as Ansible is told of one."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "baremetal-c4140", inv)
    hosts = yaml.safe_load((inv / "hosts.yml").read_text())
    hosts["gpu_nodes"]["vars"].update(ansible_user="ops", ansible_port=2222, ansible_ssh_common_args=ssh_args)
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    loaded = inventory.load(inv)
    settings = loaded.settings.training.model_copy(update={"launcher": "ssh", "ssh_runner": "mpirun"})
    return loaded, settings


def test_ssh_launcher_reaches_hosts_through_the_jump_host_gpu_node_uses(tmp_path: Path) -> None:
    # The same inventory gives validate gpu-node and every ssh command line of the launcher the same way in:
    # the jump host, user and port, each host by its ansible_host.
    loaded, settings = jump_host_inventory(tmp_path, "-o ProxyJump=jump@bastion.example:2200")
    launch = targets.launcher_for(loaded, settings, targets.target_for(loaded, settings, None), None)
    hosts = launch.keywords["hosts"]
    assert [(h.name, h.address, h.port, h.user) for h in hosts] == [
        ("c4140-01", "10.10.0.11", 2222, "ops"),
        ("c4140-02", "10.10.0.12", 2222, "ops"),
    ]
    known = tmp_path / "known_hosts"
    node_side = connection.command_line(connection_spec("c4140-02", loaded.host_vars("c4140-02")), 10, "true")
    way_in = ["-o", "ProxyJump=jump@bastion.example:2200", "-o", "User=ops", "-o", "Port=2222"]

    def reaches(argv: list[str]) -> bool:
        return all(pair in itertools.pairwise(argv) for pair in itertools.pairwise(way_in))

    assert reaches(node_side)
    for cmd in ssh.torchrun_commands(PLAN, 8, hosts, known):
        assert cmd[0] == "ssh" and reaches(cmd) and cmd[cmd.index("env") - 1] in ("10.10.0.11", "10.10.0.12")
    # mpirun's own ssh to each host: one plm_rsh_args string for all of them, split at blanks by OpenMPI
    mpirun = ssh.command(PLAN, 8, hosts, "mpirun", known)
    assert reaches(mpirun[mpirun.index("plm_rsh_args") + 1].split(" "))
    remote = ssh.command(PLAN, 2, hosts, "horovodrun", known, interface="eth0") if horovodrun_found() else []
    if remote:  # horovodrun starts on the first host, reached through the jump host
        assert remote[0] == "ssh" and reaches(remote) and remote[remote.index("env") - 1] == "10.10.0.11"
    # Without the jump host, none of them would name it: the test sees the inventory, not a constant.
    plain, _ = jump_host_inventory(tmp_path / "plain", "")
    plain_hosts = targets.launcher_for(plain, settings, targets.target_for(plain, settings, None), None)
    assert not any("ProxyJump" in a for a in ssh.torchrun_commands(PLAN, 8, plain_hosts.keywords["hosts"], known)[0])


def test_mpirun_refuses_a_jump_command_it_cannot_carry(tmp_path: Path) -> None:
    # A ProxyCommand with blanks reaches the torchrun ssh whole, but not mpirun's blank-split plm_rsh_args.
    loaded, settings = jump_host_inventory(tmp_path, "-o ProxyCommand='ssh -W %h:%p bastion'")
    hosts = targets.launcher_for(loaded, settings, targets.target_for(loaded, settings, None), None).keywords["hosts"]
    assert "ProxyCommand=ssh -W %h:%p bastion" in ssh.torchrun_commands(PLAN, 8, hosts, tmp_path / "k")[0]
    with pytest.raises(BadInput, match="has a blank, which mpirun's plm_rsh_args cannot carry"):
        ssh.command(PLAN, 8, hosts, "mpirun", tmp_path / "k")
    mixed = [hosts[0], dataclasses.replace(hosts[1], port=22)]
    with pytest.raises(BadInput, match="hosts c4140-01 and c4140-02 are reached with different ssh settings"):
        ssh.mpirun_rsh_args([(h, 4) for h in mixed], tmp_path / "k")
