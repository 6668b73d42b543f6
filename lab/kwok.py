"""kwok's configuration for the lab: GPU nodes, pod lifecycles (Stages) and pod logs.

kwok (sigs.k8s.io/kwok) plays the kubelet of each lab node: it marks nodes Ready, moves pods through
their phases as its Stages say, and serves their logs to the API server from files. The lab uses
kwok's own "fast" pod stages unchanged (copied from the kwok module at build time) and adds:

- GPU pods that run to completion (restartPolicy Never/OnFailure) Succeed after a second, except on
  nodes whose profile carries a GPU fault: there they fail as the Dell/Red Hat TFJobs paper saw them fail, or hang.
- The NVIDIA device plugin's pod crash-loops on nodes where the plugin cannot see the GPUs.

Logs carry the Dell/Red Hat TFJobs paper's text: ClusterLogs give every plugin and cuda-vector-add container the healthy
log; on faulty nodes the lab's device manager (kube_devices) points kwok at the failure log instead, and a node-checks
pod at its node's verdict, letting the pod end only once that is done.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from gpuready.core import role_defaults

#: Faults a lab GPU node can carry, and what a real node shows for each (the Dell/Red Hat TFJobs paper).
FAULTS = {
    "plugin-not-ready": "the device plugin cannot load NVML and crash-loops; no GPUs are advertised",
    "allocatable-zero": "the plugin registers but reports its GPUs unhealthy: allocatable nvidia.com/gpu 0",
    "vector-add-fails": "GPU pods fail: no CUDA-capable device is detected",
    "permission-denied": "GPU pods cannot start: /dev/nvidiactl permission denied (SELinux labels)",
    "vector-add-hangs": "GPU pods start and never finish",
}
GPU = "nvidia.com/gpu"
#: Nodes kwok manages carry this annotation (kwok's own convention).
MANAGED = "kwok.x-k8s.io/node=fake"
#: The device plugin pods' labels, as the nvidia_device_plugin role's DaemonSet gives them.
PLUGIN_LABEL = dict(role_defaults.role_default("nvidia_device_plugin", "nvidia_device_plugin_pod_labels"))
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
VECTOR_ADD_CONTAINER = "cuda-vector-add"
#: validate gpu-node --through kubernetes: its pods' container and label, and the folder (under the logs) of the
#: node verdicts they print, one <node>.log each, in the CRI log format.
NODE_CHECKS_CONTAINER = "node-checks"
NODE_CHECKS_LABEL = {"gpuready.io/test": "node-checks"}
NODE_VERDICTS = "node-verdicts"
#: kube_devices' mark on a node-checks pod whose log it has pointed ("pointed"), or found none to point ("none"):
#: the pod ends only then, as a real container's output is written before the container ends.
LOG_HANDLED = "gpuready.io/lab-log"
# The Dell/Red Hat TFJobs paper: what the device plugin logs when it starts, and what cuda-vector-add prints.
PLUGIN_LOG = [
    "Loading NVML",
    "Fetching devices.",
    "Starting FS watcher.",
    "Starting OS watcher.",
    "Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock",
    "Registered device plugin with Kubelet",
]
PLUGIN_FAIL_LOG = [
    "Loading NVML",
    "Failed to initialize NVML: could not load NVML library.",
    "If this is a GPU node, did you set the docker default runtime to `nvidia`?",
    "Shutdown of NVML returned: <nil>",
]
VECTOR_ADD_LOG = [
    "[Vector addition of 50000 elements]",
    "Copy input data from the host memory to the CUDA device",
    "CUDA kernel launch with 196 blocks of 256 threads",
    "Copy output data from the CUDA device to the host memory",
    "Test PASSED",
    "Done",
]
VECTOR_ADD_FAIL_LOG = [
    "[Vector addition of 50000 elements]",
    "Failed to allocate device vector A (error code no CUDA-capable device is detected)!",
]
PERMISSION_DENIED = (
    "failed to create containerd task: OCI runtime create failed: nvidia-container-cli: "
    "initialization error: open failed: /dev/nvidiactl: permission denied: unknown"
)
#: Upstream files copied into the kwok cache entry: its fast pod stages and the Logs CRD.
UPSTREAM = {
    "kustomize/stage/pod/fast/pod-ready.yaml": "stages/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml": "stages/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml": "stages/pod-delete.yaml",
    "kustomize/crd/bases/kwok.x-k8s.io_logs.yaml": "crds/kwok.x-k8s.io_logs.yaml",
}
STAGES_DIR = "stages"


def copy_upstream(module: Path, cache: Path) -> None:
    for source, target in UPSTREAM.items():
        (cache / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(module / source, cache / target)


def node(spec: dict[str, Any], profile: dict[str, Any] | None) -> dict[str, Any]:
    """A kwok node; a GPU node carries its profile as annotations and the usual GPU taint."""
    name = spec["name"]
    annotations = {"kwok.x-k8s.io/node": "fake", "gpuready.io/simulated": "true"}
    body: dict[str, Any] = {"spec": {}}
    if profile:
        annotations["gpuready.io/simulated-gpus"] = f"{profile['count']}x{profile['product']}"
        if spec["fault"]:
            annotations["gpuready.io/simulated-fault"] = spec["fault"]
        # GPU nodes carry the usual taint, so only pods that tolerate it land there.
        body["spec"]["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    capacity = {"cpu": "40", "memory": "394863916Ki", "pods": "250", "ephemeral-storage": "936986972Ki"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": annotations,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/worker": "",
                "type": "kwok",
            },
        },
        **body,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
        },
    }


def write_logs(folder: Path) -> dict[str, Path]:
    """The log files kwok serves, in the CRI log format the kubelet reads."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, lines in (
        ("plugin", PLUGIN_LOG),
        ("plugin-fail", PLUGIN_FAIL_LOG),
        ("vector-add", VECTOR_ADD_LOG),
        ("vector-add-fail", VECTOR_ADD_FAIL_LOG),
    ):
        path = folder / f"{name}.log"
        path.write_text(cri_log(lines))
        files[name] = path
    (folder / NODE_VERDICTS).mkdir(exist_ok=True)
    return files


def cri_log(lines: list[str]) -> str:
    """Lines of a container's output as the kubelet stores them (the CRI log format kwok serves)."""
    return "".join(f"2024-05-14T09:12:{i % 60:02d}.000000000Z stdout F {line}\n" for i, line in enumerate(lines))


def _running_and_ready() -> list[dict[str, Any]]:
    return [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        {"key": '.status.conditions.[] | select( .type == "Ready" ) | .status', "operator": "In", "values": ["True"]},
    ]


def _gpu_run_to_completion() -> list[dict[str, Any]]:
    return [
        {"key": f'.spec.containers.[].resources.limits["{GPU}"]', "operator": "Exists"},
        {"key": ".spec.restartPolicy", "operator": "In", "values": ["Never", "OnFailure"]},
    ]


def _terminated(reason: str, code: int, phase: str, message: str = "") -> str:
    detail = f"      message: {json.dumps(message)}\n" if message else ""
    return (
        "{{ $now := Now }}\ncontainerStatuses:\n{{ range .spec.containers }}\n"
        "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: false\n  restartCount: 0\n"
        "  started: false\n  state:\n    terminated:\n"
        f"      exitCode: {code}\n      reason: {reason}\n{detail}"
        "      finishedAt: {{ $now | Quote }}\n      startedAt: {{ $now | Quote }}\n{{ end }}\n"
        f"phase: {phase}\n"
    )


def _stage(
    name: str,
    match: list[dict[str, Any]],
    template: str,
    event: tuple[str, str, str] | None = None,
    labels: dict[str, str] | None = None,
    delay_ms: int = 1000,
) -> dict[str, Any]:
    selector: dict[str, Any] = {"matchExpressions": match}
    if labels:
        selector["matchLabels"] = labels
    next_: dict[str, Any] = {"statusTemplate": template}
    if event:
        next_["event"] = {"type": event[0], "reason": event[1], "message": event[2]}
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": selector,
            "delay": {"durationMilliseconds": delay_ms},
            "next": next_,
        },
    }


def gpu_stages(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_fault: dict[str, list[str]] = {f: [] for f in FAULTS}
    for n in nodes:
        if n["fault"]:
            by_fault[n["fault"]].append(n["name"])
    pod_faults = by_fault["vector-add-fails"] + by_fault["permission-denied"] + by_fault["vector-add-hangs"]

    def on(names: list[str]) -> list[dict[str, Any]]:
        return [{"key": ".spec.nodeName", "operator": "In", "values": names}]

    stages = [
        # validate gpu-node --through kubernetes: the node checks' pod ends once its log is there; what it printed
        # is its node's verdict file (kube_devices points kwok's Logs at it, then marks the pod).
        _stage(
            "gpuready-node-checks-pod-complete",
            [
                *_running_and_ready(),
                {"key": ".spec.restartPolicy", "operator": "In", "values": ["Never"]},
                {"key": f'.metadata.annotations["{LOG_HANDLED}"]', "operator": "Exists"},
            ],
            _terminated("Completed", 0, "Succeeded"),
            labels=NODE_CHECKS_LABEL,
        ),
        _stage(
            "gpuready-gpu-pod-complete",
            [
                *_running_and_ready(),
                *_gpu_run_to_completion(),
                {"key": ".spec.nodeName", "operator": "NotIn", "values": pod_faults or ["-"]},
            ],
            _terminated("Completed", 0, "Succeeded"),
        ),
    ]
    if by_fault["vector-add-fails"]:
        stages.append(
            _stage(
                "gpuready-gpu-pod-fails",
                [*_running_and_ready(), *_gpu_run_to_completion(), *on(by_fault["vector-add-fails"])],
                _terminated("Error", 1, "Failed"),
            )
        )
    if by_fault["permission-denied"]:
        stages.append(
            _stage(
                "gpuready-gpu-pod-permission-denied",
                [*_running_and_ready(), *_gpu_run_to_completion(), *on(by_fault["permission-denied"])],
                _terminated("StartError", 128, "Failed", PERMISSION_DENIED),
                event=("Warning", "Failed", f"Error: {PERMISSION_DENIED}"),
            )
        )
    if by_fault["plugin-not-ready"]:
        crash = (
            "{{ $now := Now }}\nconditions:\n"
            "- {lastTransitionTime: {{ $now | Quote }}, status: 'True', type: Initialized}\n"
            "- {lastTransitionTime: {{ $now | Quote }}, status: 'False', type: Ready, reason: ContainersNotReady}\n"
            "- {lastTransitionTime: {{ $now | Quote }}, status: 'False', type: ContainersReady}\n"
            "containerStatuses:\n{{ range .spec.containers }}\n"
            "- image: {{ .image | Quote }}\n  name: {{ .name | Quote }}\n  ready: false\n  restartCount: 5\n"
            "  started: false\n  lastState:\n    terminated: {exitCode: 1, reason: Error, "
            "finishedAt: {{ $now | Quote }}, startedAt: {{ $now | Quote }}}\n"
            "  state:\n    waiting:\n      reason: CrashLoopBackOff\n"
            "      message: back-off 5m0s restarting failed container\n{{ end }}\nphase: Running\n"
        )
        stages.append(
            _stage(
                "gpuready-device-plugin-crashloop",
                [*_running_and_ready(), *on(by_fault["plugin-not-ready"])],
                crash,
                event=("Warning", "BackOff", "Back-off restarting failed container"),
                labels=PLUGIN_LABEL,
                delay_ms=200,
            )
        )
    return stages


def configuration(nodes: list[dict[str, Any]], logs: dict[str, Path], kwok_home: Path) -> list[dict[str, Any]]:
    """kwok's --config documents: upstream's fast pod stages, the GPU stages, the healthy logs."""
    upstream = [yaml.safe_load(p.read_text()) for p in sorted((kwok_home / STAGES_DIR).glob("*.yaml"))]
    cluster_logs = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "gpuready-lab-healthy"},
        "spec": {
            "logs": [
                {"containers": [PLUGIN_CONTAINER], "logsFile": str(logs["plugin"])},
                {"containers": [VECTOR_ADD_CONTAINER], "logsFile": str(logs["vector-add"])},
            ]
        },
    }
    # kwok's defaults renew 4 node leases and play 4 node or pod stages at a time: too few to keep 1000
    # leases fresh on a busy machine, and a queue when 1000 test pods start and complete at once.
    parallel = max(4, len(nodes) // 25)
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "nodeLeaseParallelism": parallel,
            "nodePlayStageParallelism": parallel,
            "podPlayStageParallelism": parallel,
        },
    }
    return [options, *upstream, *gpu_stages(nodes), cluster_logs]
