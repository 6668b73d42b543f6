"""Kubernetes launcher: an MPIJob (kubeflow.org/v2beta1, Horovod over MPI), a TFJob (kubeflow.org/v1,
MultiWorkerMirroredStrategy via TF_CONFIG) or, for PyTorch, a PyTorchJob (kubeflow.org/v1, torchrun in
every pod), validated offline, launched when the cluster has the CRD.

Offline validation: the job's own fields against the CRD's schema (transcribed below from the
mpi-operator and training-operator CRDs) and every pod template against Kubernetes' own
PodTemplate schema (kubernetes-validate). When the cluster is reachable, the served CRD's
openAPIV3Schema is checked too.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from gpuready.core.errors import BadInput, shorten
from gpuready.workloads.launchers import TRAIN_MODULE, Launch, Plan, parse_results, tail

log = logging.getLogger(__name__)

KINDS = {"mpijob": ("MPIJob", "kubeflow.org", "v2beta1", "mpijobs"), "tfjob": ("TFJob", "kubeflow.org", "v1", "tfjobs"),
         "pytorchjob": ("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs")}
#: the training-operator injects MASTER_ADDR, MASTER_PORT and RANK into the container of this name only
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT = 23456  # the training-operator's default pytorchjob-port
KUBERNETES_VERSION = "1.29.0"  # schema the pod templates are checked against (kubernetes-validate)
JOB_LABEL = "training.kubeflow.org/job-name"

_REPLICA = {
    "type": "object",
    "required": ["template"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never", "ExitCode"]},
        "template": {"type": "object"},
    },
    "additionalProperties": False,
}
_RUN_POLICY = {
    "type": "object",
    "properties": {
        "cleanPodPolicy": {"type": "string", "enum": ["None", "Running", "All"]},
        "ttlSecondsAfterFinished": {"type": "integer"},
        "activeDeadlineSeconds": {"type": "integer"},
        "backoffLimit": {"type": "integer"},
        "suspend": {"type": "boolean"},
    },
}
SPEC_SCHEMAS = {
    "MPIJob": {
        "type": "object",
        "required": ["mpiReplicaSpecs"],
        "properties": {
            "slotsPerWorker": {"type": "integer", "minimum": 1},
            "runPolicy": _RUN_POLICY,
            "mpiImplementation": {"type": "string", "enum": ["OpenMPI", "Intel", "MPICH"]},
            "launcherCreationPolicy": {"type": "string", "enum": ["AtStartup", "WaitForWorkersReady"]},
            "sshAuthMountPath": {"type": "string"},
            "mpiReplicaSpecs": {"type": "object", "required": ["Launcher"],
                                "properties": {"Launcher": _REPLICA, "Worker": _REPLICA},
                                "additionalProperties": False},
        },
        "additionalProperties": False,
    },
    "TFJob": {
        "type": "object",
        "required": ["tfReplicaSpecs"],
        "properties": {
            "runPolicy": _RUN_POLICY,
            "enableDynamicWorker": {"type": "boolean"},
            "successPolicy": {"type": "string"},
            "tfReplicaSpecs": {"type": "object", "propertyNames": {"enum": ["Chief", "PS", "Worker", "Evaluator",
                                                                            "Master"]},
                               "additionalProperties": _REPLICA},
        },
        "additionalProperties": False,
    },
    "PyTorchJob": {
        "type": "object",
        "required": ["pytorchReplicaSpecs"],
        "properties": {
            "runPolicy": _RUN_POLICY,
            "elasticPolicy": {"type": "object"},
            "nprocPerNode": {"type": "string"},
            "pytorchReplicaSpecs": {"type": "object", "propertyNames": {"enum": ["Master", "Worker"]},
                                    "additionalProperties": _REPLICA},
        },
        "additionalProperties": False,
    },
}


def _container(name: str, image: str, command: list[str], gpus: int, port: int | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image, "command": command,
                         "env": [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "1"}]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    if port:
        c["ports"] = [{"containerPort": port, "name": "tfjob-port"}]  # seed 002's TFJob port
    return c


def manifest(kind: str, plan: Plan, workers: int, gpus_per_node: int, image: str, namespace: str) -> dict[str, Any]:
    name = f"gpuready-{plan.model}-{workers}w"
    meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpuready"}}
    train = ["python", *TRAIN_MODULE, *plan.train_args()]
    if kind == "mpijob":
        slots = min(workers, max(1, gpus_per_node))
        mpirun = ["mpirun", "--map-by", "socket", "-np", str(workers), "-bind-to", "none",
                  "-x", "NCCL_DEBUG=WARN", *train]
        return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": meta, "spec": {
            "slotsPerWorker": slots, "mpiImplementation": "OpenMPI", "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": {"spec": {"containers": [_container("launcher", image, mpirun, 0)]}}},
                "Worker": {"replicas": math.ceil(workers / slots), "restartPolicy": "OnFailure",
                           "template": {"spec": {"containers": [_container("worker", image, ["sleep", "infinity"],
                                                                           slots if gpus_per_node else 0)]}}},
            }}}
    if kind == "pytorchjob" or plan.framework == "pytorch":
        return _pytorchjob(plan, workers, gpus_per_node, image, meta)
    # a TFJob hands each worker TF_CONFIG: that is MultiWorkerMirroredStrategy's cluster description
    train = ["python", *TRAIN_MODULE, *replace(plan, distribution="mwms").train_args()]
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": meta, "spec": {
        "runPolicy": {"cleanPodPolicy": "Running"},
        "tfReplicaSpecs": {"Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [_container("tensorflow", image, train, 1 if gpus_per_node else 0, port=2222)]}}}}}}


def _pytorchjob(plan: Plan, workers: int, gpus_per_node: int, image: str, meta: dict[str, Any]) -> dict[str, Any]:
    """One pod per node (a Master and Workers), each running torchrun with one worker per GPU.

    The operator sets MASTER_ADDR/MASTER_PORT (the Master pod) and RANK (the pod's index) in every pod;
    torchrun takes them as its static rendezvous and sets each worker's own RANK and WORLD_SIZE.
    """
    per_node = min(workers, max(1, gpus_per_node))
    pods = math.ceil(workers / per_node)
    if pods * per_node != workers:
        raise BadInput(f"{workers} workers do not fill pods of {per_node} GPUs: torchrun wants the same number "
                       "of workers in every pod (choose a multiple of the GPUs per node)")
    # $(VAR): Kubernetes expands the container's environment in command arguments
    options = ["--nnodes", str(pods), "--nproc-per-node", str(per_node), "--node-rank", "$(RANK)",
               "--master-addr", "$(MASTER_ADDR)", "--master-port", "$(MASTER_PORT)"]
    command = ["python", "-m", "torch.distributed.run", *options, *plan.module, *plan.train_args()]

    def replica(count: int) -> dict[str, Any]:
        container = _container(PYTORCH_CONTAINER, image, command, per_node if gpus_per_node else 0)
        container["ports"] = [{"containerPort": PYTORCH_PORT, "name": "pytorchjob-port"}]
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}

    specs = {"Master": replica(1)}
    if pods > 1:
        specs["Worker"] = replica(pods - 1)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta, "spec": {
        "nprocPerNode": str(per_node), "runPolicy": {"cleanPodPolicy": "Running"}, "pytorchReplicaSpecs": specs}}


def validate(doc: dict[str, Any], crd_schema: dict[str, Any] | None = None) -> list[str]:
    """Problems with a job manifest: its spec against the CRD schema, its pod templates against Kubernetes'."""
    import jsonschema
    import kubernetes_validate

    problems = []
    spec_schema = SPEC_SCHEMAS.get(doc.get("kind", ""))
    if spec_schema is None:
        return [f"unknown kind {doc.get('kind')!r}"]
    for schema, where in ((spec_schema, "spec"), (crd_schema, "served CRD")):
        if schema is None:
            continue
        target = doc["spec"] if where == "spec" else doc
        for error in jsonschema.Draft7Validator(_plain(schema)).iter_errors(target):
            problems.append(f"{where}: {'.'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}")
    replicas = doc["spec"].get("mpiReplicaSpecs") or doc["spec"].get("tfReplicaSpecs") or \
        doc["spec"].get("pytorchReplicaSpecs") or {}
    for role, replica in replicas.items():
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"{role.lower()}"},
                        "template": replica.get("template", {})}
        try:
            kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{role} pod template: {'.'.join(map(str, e.path))}: {e.message}")
    return problems


def _plain(schema: Any) -> Any:
    """A CRD's openAPIV3Schema as plain JSON Schema: Kubernetes' x- extensions dropped."""
    if isinstance(schema, dict):
        return {k: _plain(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
    if isinstance(schema, list):
        return [_plain(v) for v in schema]
    return schema


def launch(plan: Plan, workers: int, folder: Path, *, kind: str, gpus_per_node: int, image: str, namespace: str,
           kubeconfig: str = "", context: str = "") -> Launch:
    doc = manifest(kind, plan, workers, gpus_per_node, image, namespace)
    path = folder / f"{kind}-{workers}w.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    problems = validate(doc)
    if problems:
        raise BadInput(f"{path}: " + "; ".join(problems[:3]))
    api = _connect(kubeconfig, context)
    if isinstance(api, str):
        return Launch(workers, written_only=f"{path.name} written and validated, not launched: {api}")
    crd_schema = _served_schema(api, kind)
    if isinstance(crd_schema, str):
        return Launch(workers, written_only=f"{path.name} written and validated, not launched: {crd_schema}")
    problems = validate(doc, crd_schema)
    if problems:
        raise BadInput(f"{path} against the cluster's CRD: " + "; ".join(problems[:3]))
    return _run(api, doc, plan, workers, folder)


def _connect(kubeconfig: str, context: str) -> Any:
    from kubernetes import client, config

    try:
        if kubeconfig or context:
            config.load_kube_config(config_file=str(Path(kubeconfig).expanduser()) if kubeconfig else None,
                                    context=context or None)
        else:
            try:
                config.load_kube_config()
            except config.ConfigException:
                config.load_incluster_config()
    except (config.ConfigException, OSError) as e:
        return f"no cluster configured ({shorten(e, 120)})"
    return client.ApiClient()


def _served_schema(api: Any, kind: str) -> dict[str, Any] | str:
    from kubernetes import client
    from urllib3.exceptions import HTTPError

    kind_name, group, version, plural = KINDS[kind]
    try:
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(f"{plural}.{group}")
    except client.ApiException as e:
        if e.status == 404:
            return f"the {kind_name} CRD ({plural}.{group}) is not installed"
        return f"reading the {kind_name} CRD failed: {e.status} {shorten(e.body, 120)}"
    except HTTPError as e:
        return f"cluster unreachable ({shorten(e, 120)})"
    for served in crd.spec.versions:
        if served.name == version and served.schema and served.schema.open_api_v3_schema:
            return api.sanitize_for_serialization(served.schema.open_api_v3_schema)
    return f"the {kind_name} CRD does not serve {version}"


def _run(api: Any, doc: dict[str, Any], plan: Plan, workers: int, folder: Path) -> Launch:
    from kubernetes import client

    kind_name, group, version, plural = next(v for v in KINDS.values() if v[0] == doc["kind"])
    name, namespace = doc["metadata"]["name"], doc["metadata"]["namespace"]
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    try:  # a finished job of the same name from an earlier run would block the new one
        custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        time.sleep(5)
    except client.ApiException as e:
        if e.status != 404:
            raise
    custom.create_namespaced_custom_object(group, version, namespace, plural, doc)
    deadline, state = time.monotonic() + plan.timeout_s + 600, ""
    while time.monotonic() < deadline:
        conditions = (custom.get_namespaced_custom_object(group, version, namespace, plural, name)
                      .get("status", {}).get("conditions") or [])
        done = [c["type"] for c in conditions if c.get("status") == "True" and c["type"] in ("Succeeded", "Failed")]
        if done:
            state = done[0]
            break
        time.sleep(5)
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={name}").items
    text = "".join(core.read_namespaced_pod_log(p.metadata.name, namespace) for p in pods)
    log_path = folder / f"workers-{workers}.log"
    log_path.write_text(text)
    result = Launch(workers, parse_results(text), log_path)
    if state != "Succeeded" or len(result.results) != workers:
        result.problem = f"{kind_name} {name}: {state or 'not finished'}, {len(result.results)}/{workers} " \
                         f"reported: {tail(text)}"
    return result
