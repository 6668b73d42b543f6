"""``validate gpu-node --through kubernetes``: the node catalogue in one pod per GPU node, read back from its log.

For clusters whose nodes gpuready cannot log in to. Each pod is pinned to its node (by node affinity on the
node's name, as the DaemonSet controller pins its pods, so the scheduler still admits it), runs the same
node-local entry as Slurm's health check (``gpuready validate this-node``) with the node's name from the
downward API, and prints the node verdict on stdout; gpuready reads the pod's log, checks the verdict's schema
and reports its checks as those of the node, in the same run folder as over SSH. A pod that does not run, or
whose log is not a node verdict, is an error for its node (the checks could not run), never a failure.

The pod is privileged (the checks read the kernel log and the GPUs' device files as the node's own tools do),
in the host's PID namespace (so the checks know they run in a container), and takes no ``nvidia.com/gpu``: the
NVIDIA runtime mounts every GPU and the driver's tools through NVIDIA_VISIBLE_DEVICES (NVIDIA Container Toolkit,
"Specialized Configurations with Docker"), so it holds none a workload is waiting for. The RBAC is validate
cluster's (pods and pods/log in the validation namespace, kube_rbac.yaml); on OpenShift the namespace's default
service account needs the SCC of kube_node_checks_openshift.yaml (docs/fleet.md).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from gpuready.core.platforms.node_condition import taint_key
from gpuready.core.results import Check
from gpuready.core.verdict import Verdict

if TYPE_CHECKING:
    from gpuready.core.command import Context
    from gpuready.core.platforms.kube import Kube
    from gpuready.core.settings import Kubernetes

CONTAINER = "node-checks"
#: The label the pods carry (beside the run's): what kind of gpuready test pod it is.
TEST_LABEL = "gpuready.io/test"
CHECK_ID = "kubernetes.node_checks_pod"
GPU_TAINT = "nvidia.com/gpu"


def node_checks_pod(node: str, image: str, run: str, check_set: str, budget_s: float) -> dict[str, Any]:
    """The pod that runs the node catalogue on ``node`` once and prints its node verdict."""
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "node-checks-",
            "labels": {TEST_LABEL: CONTAINER, "gpuready.io/run": run, "app.kubernetes.io/managed-by": "gpuready"},
        },
        "spec": {
            "restartPolicy": "Never",
            # The host's PID namespace, as the DaemonSet's: PID 1 is the host's init, so the checks can tell that
            # their mount namespace (their /dev, their /etc) is not the host's and leave what only the host's
            # files show unjudged (checks/commands.py, CONTAINER_COMMAND); containerd and CRI-O leave no marker.
            "hostPID": True,
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [by_name]}}
            },
            # The GPU taint, and gpuready's own: a node tainted by an earlier failure must be checkable again.
            "tolerations": [
                {"key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule"},
                {"key": taint_key(), "operator": "Exists", "effect": "NoSchedule"},
            ],
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image,
                    "command": [
                        "gpuready",
                        "validate",
                        "this-node",
                        "--set",
                        check_set,
                        "--budget",
                        f"{budget_s:g}",
                        "--node-name",
                        "$(NODE_NAME)",
                        "--verdict",
                        "-",
                    ],
                    "env": [
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                    ],
                    "securityContext": {"privileged": True},
                }
            ],
        },
    }


def run(
    ctx: Context, client: Kube, settings: Kubernetes, hosts: list[str], check_set: str, timeout_s: float
) -> list[Check]:
    """A node-checks pod on every host at once; each host's checks from its pod's node verdict."""
    from gpuready.validate.cluster import pods_per_node

    def build(host: str, run_id: str) -> dict[str, Any]:
        return node_checks_pod(host, settings.node_checks_image, run_id, check_set, timeout_s)

    def judge(ended: tuple[str, Any], events: dict[str, list[Any]] | None = None) -> list[Check]:
        return checks_of(client, ended)

    where = f"{client.server}, one pod each in namespace {settings.validation_namespace}"
    ctx.note(f"validate gpu-node: {len(hosts)} node(s) through {where} — artifacts in {ctx.run_dir}")
    # The pod gets the budget for the checks, and the time to be scheduled, pull its image and start.
    return pods_per_node(
        client,
        settings,
        hosts,
        build,
        judge,
        lambda: None,
        what="a node-checks pod",
        timeout_s=timeout_s + settings.pod_timeout_s,
    )


def verdict_in(log: str) -> Any:
    """The node verdict a pod printed. Its log holds the container's stdout and stderr together (the kubelet
    keeps both), so the JSON object is read from the first line that opens one, whatever was logged around it."""
    decoder = json.JSONDecoder()
    for opening in re.finditer(r"^\{", log, re.MULTILINE):
        try:
            return decoder.raw_decode(log, opening.start())[0]
        except ValueError:
            continue
    raise ValueError("no JSON object in the log")


def checks_of(client: Kube, ended: tuple[str, Any]) -> list[Check]:
    """The checks of one node from its ended pod: the node verdict it printed, else why there is none."""
    from gpuready.core.errors import BadInput
    from gpuready.validate.cluster import _container_states, _log, _why_pending
    from gpuready.validate.node import node_verdict

    host, pod = ended
    v = Verdict(CHECK_ID, host, "see the pod's events and log: `kubectl -n NAMESPACE describe pod` and `logs`")
    name, phase = pod.metadata.name, pod.status.phase
    if phase not in ("Succeeded", "Failed"):
        return [v.errored(f"{name} still {phase}: {_why_pending(pod)}; the checks did not run")]
    log = _log(client, pod)
    try:
        data = node_verdict.parse(verdict_in(log), f"the log of pod {name}")
    except ValueError:
        return [v.errored(f"{name} {phase}: {_container_states(pod)}; its log is not a node verdict", log[-2000:])]
    except BadInput as e:
        return [v.errored(f"{name} {phase}: {e}", log[-2000:])]
    if data["host"] != host:  # another node's verdict must never stand for this one
        return [v.errored(f"{name} ran on {host} but printed the verdict of {data['host']!r}", log[-2000:])]
    checks = node_verdict.checks(data)
    return [*checks, v.passed(f"{name}: node verdict {data['status']} ({len(checks)} checks, set {data['set']})")]
