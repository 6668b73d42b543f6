"""Kubernetes / OpenShift settings: labels, the device plugin, the validation pod."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gpuready.core import role_defaults
from gpuready.core.settings.base import Int, Real, Section

#: Red Hat, OpenShift 4 "Managing security context constraints", Role-based access to SCCs: an SCC cannot be
#: assigned to pods in these default namespaces, which "should not be used for running pods or services".
OPENSHIFT_DEFAULT_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "openshift-node",
    "openshift-infra",
    "openshift",
)


class DevicePlugin(Section):
    #: A pinned NVIDIA k8s-device-plugin release; the default is the nvidia_device_plugin role's.
    version: str = Field(default_factory=role_defaults.device_plugin_release, pattern=r"^v\d+\.\d+\.\d+$")
    #: Override for private registries; empty means nvcr.io/nvidia/k8s-device-plugin:<version>.
    image: str = ""
    #: Namespace of the DaemonSet; the default is the common role's. On OpenShift the default is a project of its
    #: own (the common role's too): SCCs do not apply to pods in OpenShift's default namespaces.
    namespace: str = Field(default_factory=lambda: role_defaults.device_plugin_namespace("kubernetes"))
    #: How long to wait for the plugin to be ready on every labelled node.
    rollout_timeout_s: Int = Field(default=300, ge=1)
    #: How MIG devices are advertised (k8s-device-plugin README, MIG_STRATEGY): none, single or mixed.
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    #: How devices reach containers (README, DEVICE_LIST_STRATEGY); the cdi-* strategies need CDI in the runtime,
    #: which the container-toolkit role then enables and generates the CDI specification for.
    device_list_strategy: Literal["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"] = "envvar"
    #: CUDA time-slicing (README, "Shared Access to GPUs"): each GPU is advertised this many times; 0 or 1 is off.
    time_slicing_replicas: Int = Field(default=0, ge=0, le=64)
    #: How long to wait, after the rollout, for every GPU node to advertise its class's nvidia.com/gpu count.
    advertise_timeout_s: Int = Field(default=300, ge=1)
    #: Deploy GPU Feature Discovery from the plugin's image (the chart's gfd.enabled): it writes the labels
    #: nvidia.com/gpu.product, .count, .memory and more, which Node Feature Discovery (not deployed by gpuready)
    #: puts on the GPU nodes.
    feature_discovery: bool = False


class Kubernetes(Section):
    #: openshift adds the SecurityContextConstraints the device plugin needs.
    flavour: Literal["kubernetes", "openshift"] = "kubernetes"
    #: How GPU pods get the NVIDIA runtime: ``default`` makes it the runtime's default (NVIDIA's k8s-device-plugin
    #: README recommends it); ``runtimeclass`` adds a RuntimeClass ``nvidia`` that the plugin and GPU pods name.
    nvidia_runtime: Literal["default", "runtimeclass"] = "default"
    #: kubeconfig path (``~`` expanded); empty: $KUBECONFIG, ~/.kube/config, then in-cluster.
    kubeconfig: str = ""
    #: kubeconfig context; empty: the current context.
    context: str = ""
    #: Verify the API server's TLS certificate (set false only for labs).
    verify_tls: bool = True
    #: The label put on GPU nodes; the default is the common role's (the gpu_node_labels and device-plugin roles').
    gpu_label: str = Field(default_factory=role_defaults.gpu_label, pattern=r"^[^=\s]+=[^=\s]*$")
    device_plugin: DevicePlugin = DevicePlugin()
    #: The validation pod's image: NVIDIA's CUDA vectorAdd sample (the Dell/Red Hat TFJobs paper's cuda-vector-add
    #: test), the Ubuntu 22.04 build of CUDA 12.5.0 that runs on x86_64 and on arm64 GPU nodes (GH200, GB200);
    #: mirror it for private registries.
    cuda_vector_add_image: str = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"
    #: The image of gpuready's node checks (built from the Containerfile of docs/fleet.md) that
    #: ``validate gpu-node --through kubernetes`` runs on each GPU node.
    node_checks_image: str = "localhost/gpuready-node-checks:0.1.0"
    #: Namespace the validation pods run in (the Dell/Red Hat TFJobs paper used a new project); created when missing.
    validation_namespace: str = "gpuready-validation"
    #: How long a cuda-vector-add pod may take to finish.
    pod_timeout_s: Int = Field(default=300, ge=1)
    #: Labels put on GPU nodes beside ``gpu_label`` (never on nodes without GPUs).
    extra_gpu_labels: dict[str, str] = Field(default_factory=role_defaults.gpu_extra_labels)
    #: Server-side apply field manager: gpuready owns exactly the fields it applied, so --remove
    #: takes away only what gpuready added.
    field_manager: str = Field(default="gpuready", pattern=r"^[a-z0-9][a-z0-9.-]{0,100}$")
    #: Seconds between looks at a rollout or a pod while waiting.
    poll_interval_s: Real = Field(default=2, gt=0, le=60)
    #: Attempts for API calls answered 429 or 5xx (with exponential backoff) before giving up.
    api_retries: Int = Field(default=5, ge=1, le=20)

    @model_validator(mode="before")
    @classmethod
    def _openshift_project(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("flavour") != "openshift":
            return data
        plugin = data.get("device_plugin")
        if isinstance(plugin, DevicePlugin):
            plugin = plugin.model_dump(exclude_unset=True)
        plugin = dict(plugin or {})
        own = role_defaults.device_plugin_namespace("openshift")
        namespace = plugin.setdefault("namespace", own)
        if namespace in OPENSHIFT_DEFAULT_NAMESPACES:
            raise ValueError(
                f"device_plugin.namespace {namespace} is one of OpenShift's default namespaces, where no SCC can be "
                f"assigned to pods: use a project of its own (e.g. {own})"
            )
        return {**data, "device_plugin": plugin}
