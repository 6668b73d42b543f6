"""Kubernetes launcher: an MPIJob (kubeflow.org/v2beta1, Horovod over MPI), a TFJob (kubeflow.org/v1,
MultiWorkerMirroredStrategy via TF_CONFIG) or, for PyTorch, a PyTorchJob (kubeflow.org/v1, torchrun in
every pod), validated offline, then admitted by the cluster and submitted when one is configured.

Offline validation: the whole job against the openAPIV3Schema of the CRD its owner publishes (crds/:
the mpi-operator's MPIJob, the training-operator's TFJob and PyTorchJob, verbatim), with unknown fields
refused as the API server's strict field validation does; the replica rules the operators check in
their controllers and webhooks (OPERATOR_RULES); every pod template against Kubernetes' own
PodTemplate schema (kubernetes-validate). With a cluster: a server-side dry run (strict field
validation) first, then the job; when no operator acts on it, it is deleted and the run is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.resources
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

KINDS = {
    "mpijob": ("MPIJob", "kubeflow.org", "v2beta1", "mpijobs"),
    "tfjob": ("TFJob", "kubeflow.org", "v1", "tfjobs"),
    "pytorchjob": ("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs"),
}
#: the training-operator injects MASTER_ADDR, MASTER_PORT and RANK into the container of this name only
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT = 23456  # the training-operator's default pytorchjob-port
KUBERNETES_VERSION = "1.29.0"  # schema the pod templates are checked against (kubernetes-validate)
JOB_LABEL = "training.kubeflow.org/job-name"
#: how long a submitted job may wait for an operator to report on it (its first status condition)
OPERATOR_WAIT_S = 60
#: What the operators refuse beyond their CRD's schema (the CRDs allow any replica name and restart policy):
#: mpi-operator v0.6.0 pkg/apis/kubeflow/validation/validation.go; training-operator v1.8.1
#: pkg/webhooks/pytorch/pytorchjob_webhook.go, pkg/webhooks/tensorflow/tfjob_webhook.go and the replica
#: types of pkg/apis/kubeflow.org/v1/tensorflow_types.go.
OPERATOR_RULES: dict[str, dict[str, Any]] = {
    "MPIJob": {
        "replicas": "mpiReplicaSpecs",
        "types": ("Launcher", "Worker"),
        "required": ("Launcher",),
        "restart": ("Never", "OnFailure"),
    },
    "TFJob": {
        "replicas": "tfReplicaSpecs",
        "types": ("Chief", "PS", "Worker", "Evaluator", "Master"),
        "container": "tensorflow",
    },
    "PyTorchJob": {
        "replicas": "pytorchReplicaSpecs",
        "types": ("Master", "Worker"),
        "container": PYTORCH_CONTAINER,
        "single": ("Master",),
    },
}


@functools.cache
def crd(kind: str) -> dict[str, Any]:
    """The CRD of ``kind`` (MPIJob, TFJob, PyTorchJob) as its owner publishes it (crds/SOURCES.md)."""
    plural = next(v[3] for v in KINDS.values() if v[0] == kind)
    text = importlib.resources.files("gpuready.workloads.launchers") / "crds" / f"kubeflow.org_{plural}.yaml"
    document: dict[str, Any] = yaml.safe_load(text.read_text())
    return document


def crd_schema(kind: str, version: str) -> dict[str, Any] | None:
    for served in crd(kind)["spec"]["versions"]:
        if served["name"] == version:
            schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    return None


def _container(name: str, image: str, command: list[str], gpus: int, port: int | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "env": [{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "1"}],
    }
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    if port:
        c["ports"] = [{"containerPort": port, "name": "tfjob-port"}]  # the Dell/Red Hat TFJobs paper's TFJob port
    return c


def manifest(kind: str, plan: Plan, workers: int, gpus_per_node: int, image: str, namespace: str) -> dict[str, Any]:
    name = f"gpuready-{plan.model}-{workers}w"
    meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "gpuready"}}
    train = ["python", *TRAIN_MODULE, *plan.train_args()]
    if kind == "mpijob":
        slots = min(workers, max(1, gpus_per_node))
        mpirun = [
            "mpirun",
            "--map-by",
            "socket",
            "-np",
            str(workers),
            "-bind-to",
            "none",
            "-x",
            "NCCL_DEBUG=WARN",
            *train,
        ]
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": meta,
            "spec": {
                "slotsPerWorker": slots,
                "mpiImplementation": "OpenMPI",
                "runPolicy": {"cleanPodPolicy": "Running"},
                "mpiReplicaSpecs": {
                    "Launcher": {
                        "replicas": 1,
                        "restartPolicy": "OnFailure",
                        "template": {"spec": {"containers": [_container("launcher", image, mpirun, 0)]}},
                    },
                    "Worker": {
                        "replicas": math.ceil(workers / slots),
                        "restartPolicy": "OnFailure",
                        "template": {
                            "spec": {
                                "containers": [
                                    _container("worker", image, ["sleep", "infinity"], slots if gpus_per_node else 0)
                                ]
                            }
                        },
                    },
                },
            },
        }
    if kind == "pytorchjob" or plan.framework == "pytorch":
        return _pytorchjob(plan, workers, gpus_per_node, image, meta)
    # a TFJob hands each worker TF_CONFIG: that is MultiWorkerMirroredStrategy's cluster description
    train = ["python", *TRAIN_MODULE, *replace(plan, distribution="mwms").train_args()]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": meta,
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": workers,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "containers": [_container("tensorflow", image, train, 1 if gpus_per_node else 0, port=2222)]
                        }
                    },
                }
            },
        },
    }


def _pytorchjob(plan: Plan, workers: int, gpus_per_node: int, image: str, meta: dict[str, Any]) -> dict[str, Any]:
    """One pod per node (a Master and Workers), each running torchrun with one worker per GPU.

    The operator sets MASTER_ADDR/MASTER_PORT (the Master pod) and RANK (the pod's index) in every pod;
    torchrun takes them as its static rendezvous and sets each worker's own RANK and WORLD_SIZE.
    """
    per_node = min(workers, max(1, gpus_per_node))
    pods = math.ceil(workers / per_node)
    if pods * per_node != workers:
        raise BadInput(
            f"{workers} workers do not fill pods of {per_node} GPUs: torchrun wants the same number "
            "of workers in every pod (choose a multiple of the GPUs per node)"
        )
    # $(VAR): Kubernetes expands the container's environment in command arguments
    options = [
        "--nnodes",
        str(pods),
        "--nproc-per-node",
        str(per_node),
        "--node-rank",
        "$(RANK)",
        "--master-addr",
        "$(MASTER_ADDR)",
        "--master-port",
        "$(MASTER_PORT)",
    ]
    command = ["python", "-m", "torch.distributed.run", *options, *plan.module, *plan.train_args()]

    def replica(count: int) -> dict[str, Any]:
        container = _container(PYTORCH_CONTAINER, image, command, per_node if gpus_per_node else 0)
        container["ports"] = [{"containerPort": PYTORCH_PORT, "name": "pytorchjob-port"}]
        return {"replicas": count, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}

    specs = {"Master": replica(1)}
    if pods > 1:
        specs["Worker"] = replica(pods - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": meta,
        "spec": {
            "nprocPerNode": str(per_node),
            "runPolicy": {"cleanPodPolicy": "Running"},
            "pytorchReplicaSpecs": specs,
        },
    }


def validate(doc: dict[str, Any]) -> list[str]:
    """Problems with a job manifest: against its owner's CRD, the operator's rules, and Kubernetes' pod schema."""
    import jsonschema
    import kubernetes_validate

    kind = doc.get("kind", "")
    if kind not in OPERATOR_RULES:
        return [f"unknown kind {kind!r}"]
    version = str(doc.get("apiVersion", "")).rpartition("/")[2]
    schema = crd_schema(kind, version)
    if schema is None:
        return [f"the {kind} CRD does not serve {doc.get('apiVersion')}"]
    problems = [
        f"{kind} CRD: {'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in jsonschema.Draft7Validator(strict_schema(schema)).iter_errors(doc)
    ]
    rules = OPERATOR_RULES[kind]
    replicas = doc.get("spec", {}).get(rules["replicas"]) or {}
    where = f"{kind} operator: spec.{rules['replicas']}"
    problems += [
        f"{where}: {role!r} is not one of {', '.join(rules['types'])}"
        for role in replicas
        if role not in rules["types"]
    ]
    problems += [f"{where}: {role} is required" for role in rules.get("required", ()) if role not in replicas]
    for role, replica in replicas.items():
        if not isinstance(replica, dict):
            continue
        if "restart" in rules and replica.get("restartPolicy") not in rules["restart"]:
            problems.append(
                f"{where}.{role}.restartPolicy: {replica.get('restartPolicy')!r} is not one of "
                f"{', '.join(rules['restart'])}"
            )
        if role in rules.get("single", ()) and replica.get("replicas") != 1:
            problems.append(f"{where}.{role}.replicas: must be 1")
        names = [c.get("name") for c in replica.get("template", {}).get("spec", {}).get("containers", [])]
        if "container" in rules and rules["container"] not in names:
            problems.append(f"{where}.{role}: needs a container named {rules['container']}")
        pod_template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"{role.lower()}"},
            "template": replica.get("template", {}),
        }
        try:
            kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{role} pod template: {'.'.join(map(str, e.path))}: {e.message}")
    return problems


def strict_schema(schema: Any) -> Any:
    """A CRD's openAPIV3Schema as JSON Schema that, like the API server's strict field validation, refuses
    fields the schema does not name (unless it says x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    plain = {
        k: strict_schema(v)
        for k, v in schema.items()
        if not k.startswith("x-kubernetes") and k not in ("description", "default", "properties")
    }
    if isinstance(schema.get("properties"), dict):
        plain["properties"] = {name: strict_schema(v) for name, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            plain["additionalProperties"] = False
    return plain


def launch(
    plan: Plan,
    workers: int,
    folder: Path,
    *,
    kind: str,
    gpus_per_node: int,
    image: str,
    namespace: str,
    kubeconfig: str = "",
    context: str = "",
    operator_wait_s: float = OPERATOR_WAIT_S,
) -> Launch:
    doc = manifest(kind, plan, workers, gpus_per_node, image, namespace)
    path = folder / f"{kind}-{workers}w.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    problems = validate(doc)
    if problems:
        raise BadInput(f"{path}: " + "; ".join(problems[:3]))
    api = _connect(kubeconfig, context)
    if isinstance(api, str):
        return Launch(workers, written_only=f"{path.name} written and validated, not launched: {api}")
    served = _served(api, kind)
    if served:
        return Launch(workers, written_only=f"{path.name} written and validated, not launched: {served}")
    refused = admit(api, doc)
    if refused:
        return Launch(workers, problem=f"the cluster refused {path.name}: {refused}")
    return _run(api, doc, plan, workers, folder, path, operator_wait_s)


def _connect(kubeconfig: str, context: str) -> Any:
    from kubernetes import client, config

    try:
        if kubeconfig or context:
            config.load_kube_config(
                config_file=str(Path(kubeconfig).expanduser()) if kubeconfig else None, context=context or None
            )
        else:
            try:
                config.load_kube_config()
            except config.ConfigException:
                config.load_incluster_config()
    except (config.ConfigException, OSError) as e:
        return f"no cluster configured ({shorten(e, 120)})"
    return client.ApiClient()


def _served(api: Any, kind: str) -> str:
    """Why the cluster cannot take ``kind`` (its CRD missing, or not at our version); "" when it can."""
    from kubernetes import client
    from urllib3.exceptions import HTTPError

    kind_name, group, version, plural = KINDS[kind]
    try:
        found = client.ApiextensionsV1Api(api).read_custom_resource_definition(f"{plural}.{group}")
    except client.ApiException as e:
        if e.status == 404:
            return f"the {kind_name} CRD ({plural}.{group}) is not installed"
        return f"reading the {kind_name} CRD failed: {e.status} {shorten(e.body, 120)}"
    except HTTPError as e:
        return f"cluster unreachable ({shorten(e, 120)})"
    if not any(v.name == version and v.served for v in found.spec.versions):
        return f"the {kind_name} CRD does not serve {group}/{version}"
    return ""


def _api_error(e: Any) -> str:
    import json

    try:
        body = json.loads(e.body)
    except (TypeError, ValueError):
        return f"{e.status} {shorten(e.body, 300)}"
    return f"{e.status} {shorten(body.get('message', e.body), 300)}"


def admit(api: Any, doc: dict[str, Any]) -> str:
    """The API server's verdict on ``doc`` (a server-side dry run with strict field validation): "" if admitted."""
    from kubernetes import client

    _, group, version, plural = next(v for v in KINDS.values() if v[0] == doc["kind"])
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            group, version, doc["metadata"]["namespace"], plural, doc, dry_run="All", field_validation="Strict"
        )
    except client.ApiException as e:
        return _api_error(e)
    return ""


def _run(
    api: Any, doc: dict[str, Any], plan: Plan, workers: int, folder: Path, path: Path, operator_wait_s: float
) -> Launch:
    from kubernetes import client

    kind_name, group, version, plural = next(v for v in KINDS.values() if v[0] == doc["kind"])
    name, namespace = doc["metadata"]["name"], doc["metadata"]["namespace"]
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def delete() -> None:
        try:
            custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        except client.ApiException as e:
            if e.status != 404:
                raise

    delete()  # a finished job of the same name from an earlier run would block the new one
    for _ in range(30):
        try:
            custom.create_namespaced_custom_object(group, version, namespace, plural, doc)
            break
        except client.ApiException as e:
            if e.status != 409:  # 409: the old one is still being deleted
                return Launch(workers, problem=f"the cluster refused {path.name}: {_api_error(e)}")
            time.sleep(1)
    try:
        started = time.monotonic()
        deadline, state, acted = started + plan.timeout_s + 600, "", False
        while time.monotonic() < deadline:
            job: Any = custom.get_namespaced_custom_object(group, version, namespace, plural, name)
            conditions = job.get("status", {}).get("conditions") or []
            acted = acted or bool(conditions)
            done = [c["type"] for c in conditions if c.get("status") == "True" and c["type"] in ("Succeeded", "Failed")]
            if done:
                state = done[0]
                break
            if not acted and time.monotonic() - started > operator_wait_s:
                delete()
                return Launch(
                    workers,
                    written_only=(
                        f"{path.name} admitted by the cluster ({kind_name} {namespace}/{name} created), not run: "
                        f"no operator reported on it within {operator_wait_s:.0f}s (is the {_operator(kind_name)} "
                        "running?); deleted again"
                    ),
                )
            time.sleep(2)
    except BaseException:
        # Ctrl-C, SIGTERM or a lost API while waiting: the job must not outlive the run (an operator would go on
        # running its workers); the pods are the job's and the garbage collector takes them with it.
        with contextlib.suppress(Exception):
            delete()
        raise
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={name}").items
    text = "".join(
        core.read_namespaced_pod_log(p.metadata.name, namespace) for p in pods if p.metadata and p.metadata.name
    )
    log_path = folder / f"workers-{workers}.log"
    log_path.write_text(text)
    result = Launch(workers, parse_results(text), log_path)
    if state != "Succeeded" or len(result.results) != workers:
        result.problem = (
            f"{kind_name} {name}: {state or 'not finished'}, {len(result.results)}/{workers} reported: {tail(text)}"
        )
    return result


def _operator(kind_name: str) -> str:
    return "mpi-operator" if kind_name == "MPIJob" else "training-operator"
