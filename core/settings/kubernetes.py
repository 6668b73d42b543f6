"""Kubernetes / OpenShift settings: labels, the device plugin, the validation pod."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuready.core.settings.base import Section


class DevicePlugin(Section):
    #: A pinned NVIDIA k8s-device-plugin release.
    version: str = "v0.17.0"
    #: Override for private registries; empty means nvcr.io/nvidia/k8s-device-plugin:<version>.
    image: str = ""
    namespace: str = "kube-system"
    rollout_timeout_s: int = Field(default=300, ge=1)


class Kubernetes(Section):
    flavour: Literal["kubernetes", "openshift"] = "kubernetes"
    #: kubeconfig path (``~`` expanded); empty: $KUBECONFIG, ~/.kube/config, then in-cluster.
    kubeconfig: str = ""
    context: str = ""
    verify_tls: bool = True
    #: The label put on GPU nodes (seed 002: openshift.com/gpu-accelerator=true).
    gpu_label: str = Field(default="openshift.com/gpu-accelerator=true", pattern=r"^[^=\s]+=[^=\s]*$")
    device_plugin: DevicePlugin = DevicePlugin()
    cuda_vector_add_image: str = "registry.k8s.io/cuda-vector-add:v0.1"
    #: Namespace the validation pods run in (seed 002 used a new project).
    validation_namespace: str = "gpuready-validation"
    pod_timeout_s: int = Field(default=300, ge=1)
