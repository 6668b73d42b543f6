"""The Kubernetes launcher's Kubeflow jobs against the lab's real kube-apiserver, which serves the CRDs their
owners publish (the mpi-operator's MPIJob v2beta1, the training-operator's TFJob and PyTorchJob v1).

No operator runs in the lab and kwok runs no containers: what is exercised is admission (the API server's
schema and strict field validation, RBAC for gpuready's user), the submission path of `validate training`,
and, with the pods an operator would make from the job's own templates, scheduling, kwok's pod lifecycle
and the garbage collector. kubectl is the independent client.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.lab import kubernetes as lab_kubernetes
from gpuready.workloads.launchers import Plan, kubernetes
from tests import training_sizes as sizes
from tests.integration.kubernetes.conftest import LabCluster, eventually
from tests.processes import Child, leftovers, new_mark

pytestmark = pytest.mark.slow
NAMESPACE = "gpuready-training"
PLAN = Plan(model="resnet50", batch_size=4, image_size=32, steps=3, warmup_steps=1)
TINY = sizes.TINY


def _job(kind: str, framework: str = "tensorflow", gpus_per_node: int = 1) -> dict[str, Any]:
    plan = replace(PLAN, framework=framework)
    return kubernetes.manifest(kind, plan, 2, gpus_per_node, "nvcr.io/nvidia/pytorch:24.01-py3", NAMESPACE)


def _dry_run(lab: LabCluster, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """kubectl's server-side dry run with strict field validation, as gpuready's least-privilege user."""
    return lab.kubectl.as_user(lab.state["kubeconfig"]).run(
        "create", "--dry-run=server", "--validate=strict", "-f", "-", "-o", "json", stdin=json.dumps(doc), check=False
    )


def test_the_lab_serves_the_owners_crds_the_launcher_validates_against(lab: LabCluster) -> None:
    crds = {c["metadata"]["name"]: c for c in lab.kubectl.json("get", "crd")["items"]}
    versions = {name: [v["name"] for v in crds[name]["spec"]["versions"] if v["served"]] for name in crds}
    assert versions["mpijobs.kubeflow.org"] == ["v2beta1"]
    assert versions["tfjobs.kubeflow.org"] == versions["pytorchjobs.kubeflow.org"] == ["v1"]
    # the launcher's offline copies are the very files the lab took from the owners' Go modules
    shipped = Path(kubernetes.__file__).parent / "crds"
    for module_copy in lab_kubernetes.training_crds():
        assert (shipped / module_copy.name).read_bytes() == module_copy.read_bytes(), module_copy
    for kind in ("MPIJob", "TFJob", "PyTorchJob"):
        served = crds[kubernetes.crd(kind)["metadata"]["name"]]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert served == kubernetes.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(
    ("kind", "framework"), [("mpijob", "tensorflow"), ("tfjob", "tensorflow"), ("pytorchjob", "pytorch")]
)
def test_rendered_jobs_are_admitted_by_the_api_server(lab: LabCluster, kind: str, framework: str) -> None:
    doc = _job(kind, framework)
    assert kubernetes.validate(doc) == []
    done = _dry_run(lab, doc)
    assert done.returncode == 0, done.stderr
    admitted = json.loads(done.stdout)
    # nothing pruned (the server adds the CRD's defaults, e.g. the MPIJob's sshAuthMountPath)
    assert admitted["apiVersion"] == doc["apiVersion"] and _kept(doc["spec"], admitted["spec"])
    # each replica's pod template passes the API server's own Pod validation as well
    replicas = next(v for k, v in doc["spec"].items() if k.endswith("ReplicaSpecs"))
    for role, replica in replicas.items():
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"probe-{role.lower()}", "namespace": NAMESPACE},
            "spec": replica["template"]["spec"],
        }
        done = lab.kubectl.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False)
        assert done.returncode == 0, f"{role}: {done.stderr}"


def _kept(sent: Any, admitted: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(admitted, dict) and all(k in admitted and _kept(v, admitted[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(admitted, list) and len(sent) == len(admitted) and all(map(_kept, sent, admitted))
    return sent == admitted


def _slots_as_text(spec: dict[str, Any]) -> None:
    spec["slotsPerWorker"] = "four"


def _nproc_misspelled(spec: dict[str, Any]) -> None:
    spec["nprocPerNodes"] = spec.pop("nprocPerNode")


def _image_pull_policy_number(spec: dict[str, Any]) -> None:
    spec["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 3


@pytest.mark.parametrize(
    ("kind", "framework", "edit", "server_says"),
    [
        ("mpijob", "tensorflow", _slots_as_text, "spec.slotsPerWorker"),
        ("pytorchjob", "pytorch", _nproc_misspelled, 'unknown field "spec.nprocPerNodes"'),
        ("tfjob", "tensorflow", _image_pull_policy_number, "imagePullPolicy"),
    ],
)
def test_one_wrong_field_is_refused_by_the_servers_schema_and_offline(
    lab: LabCluster, kind: str, framework: str, edit, server_says: str
) -> None:
    doc = _job(kind, framework)
    edit(doc["spec"])
    done = _dry_run(lab, doc)
    assert done.returncode != 0 and server_says in done.stderr, done.stderr
    assert kubernetes.validate(doc), "the offline check must refuse what the API server refuses"


def _inventory(lab: LabCluster, where: Path, **training: Any) -> Path:
    shutil.copytree(lab.inventory, where)
    path = where / "group_vars" / "all" / "gpuready.yml"
    doc = yaml.safe_load(path.read_text())
    doc["gpuready"]["training"].update(training)
    path.write_text(yaml.safe_dump(doc))
    return where


@pytest.mark.parametrize(
    ("framework", "kind", "plural"), [("tensorflow", "MPIJob", "mpijobs"), ("pytorch", "PyTorchJob", "pytorchjobs")]
)
def test_validate_training_submits_the_job_and_skips_without_an_operator(
    lab: LabCluster, tmp_path: Path, framework: str, kind: str, plural: str
) -> None:
    inventory = _inventory(lab, tmp_path / "inv", operator_wait_s=3)
    artifacts = tmp_path / "runs"
    _, out, err, summary = lab.run(
        "validate", "training", "--framework", framework, "--gpus", "2", *TINY, artifacts=artifacts, inventory=inventory
    )
    (check,) = summary["checks"]
    assert check["status"] == "skipped", out + err
    (run,) = list(artifacts.iterdir())
    (manifest,) = run.glob("*-2w.yaml")
    assert check["message"].startswith(f"{manifest.name} admitted by the cluster ({kind} {NAMESPACE}/")
    assert "no operator reported on it within 3s" in check["message"]
    # the API server's audit log: gpuready's user dry-ran, created and deleted the job
    audit = [json.loads(line) for line in (lab.root / "kubernetes" / "logs" / "audit.log").read_text().splitlines()]
    ours = [
        (e["verb"], "dryRun=All" in e["requestURI"])
        for e in audit
        if e["user"]["username"] == "gpuready" and e.get("objectRef", {}).get("resource") == plural
    ]
    assert ("create", True) in ours and ("create", False) in ours and ("delete", False) in ours, ours
    assert ours.index(("create", True)) < ours.index(("create", False))
    assert lab.kubectl.json("get", plural, "-n", NAMESPACE)["items"] == []


def test_pods_from_the_jobs_templates_are_scheduled_run_by_kwok_and_collected_with_the_job(lab: LabCluster) -> None:
    # What the training-operator would do for this PyTorchJob, done here with kubectl: one pod per replica,
    # from the job's own templates, owned by the job.
    doc = _job("pytorchjob", "pytorch", gpus_per_node=0)
    created = json.loads(lab.kubectl.run("create", "-f", "-", "-o", "json", stdin=json.dumps(doc)).stdout)
    name = doc["metadata"]["name"]
    owner = {
        "apiVersion": doc["apiVersion"],
        "kind": "PyTorchJob",
        "name": name,
        "uid": created["metadata"]["uid"],
        "controller": True,
    }
    pods = []
    for role, replica in doc["spec"]["pytorchReplicaSpecs"].items():
        for i in range(replica["replicas"]):
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{role.lower()}-{i}",
                        "namespace": NAMESPACE,
                        "ownerReferences": [owner],
                        "labels": {kubernetes.JOB_LABEL: name, "training.kubeflow.org/replica-type": role.lower()},
                    },
                    "spec": replica["template"]["spec"],
                }
            )
    lab.kubectl.run("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    selector = f"{kubernetes.JOB_LABEL}={name}"

    def running() -> list[dict[str, Any]]:
        items = lab.kubectl.json("get", "pods", "-n", NAMESPACE, "-l", selector)["items"]
        return items if len(items) == 2 and all(p["status"].get("phase") == "Running" for p in items) else []

    placed = eventually(running, timeout=60, what="the job's pods to be scheduled and run by kwok")
    assert all(p["spec"].get("nodeName") for p in placed)
    (command,) = {tuple(p["spec"]["containers"][0]["command"]) for p in placed}
    assert "torch.distributed.run" in command and "$(MASTER_ADDR)" in command
    lab.kubectl.run("delete", "pytorchjob", name, "-n", NAMESPACE)
    eventually(
        lambda: not lab.kubectl.json("get", "pods", "-n", NAMESPACE, "-l", selector)["items"],
        timeout=60,
        what="the garbage collector to delete the job's pods",
    )


def test_ctrl_c_while_the_job_runs_deletes_it_and_writes_what_finished(lab: LabCluster, tmp_path: Path) -> None:
    """Ctrl-C while validate training waits on its job: the job (and so its pods) does not outlive the run."""
    inventory = _inventory(lab, tmp_path / "inv", operator_wait_s=600)
    runs = tmp_path / "runs"
    env = new_mark()
    child = Child(
        [
            "validate",
            "training",
            "--framework",
            "pytorch",
            "--gpus",
            "2",
            *TINY,
            "-i",
            str(inventory),
            "--artifacts",
            str(runs),
        ],
        env,
    )
    try:
        eventually(
            lambda: lab.kubectl.json("get", "pytorchjobs", "-n", NAMESPACE)["items"], timeout=120, what="the job"
        )
        os.killpg(child.proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        child.proc.wait(timeout=60)
        child.reader.join(5)
    finally:
        if child.proc.poll() is None:
            os.killpg(child.proc.pid, signal.SIGKILL)
    assert child.proc.returncode == 130, child.stderr
    assert "Traceback" not in child.stderr
    assert lab.kubectl.json("get", "pytorchjobs", "-n", NAMESPACE)["items"] == []
    assert leftovers(env) == []
    (summary,) = runs.glob("*/summary.json")
    assert "Ctrl-C" in json.loads(summary.read_text())["aborted"]
