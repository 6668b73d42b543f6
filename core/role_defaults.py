"""Facts the roles own, read from the roles' defaults: the one place each is written.

A fact the roles apply and Python also needs (the settings schema's defaults, the checks that read
back what a role did, the vSphere plan) is a plain value in ``roles/<role>/defaults/main.yml`` of the
gpuready.gpu collection; Python reads it from there instead of keeping a copy that could drift.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuready.core.errors import Unreachable


@cache
def role_defaults(role: str) -> dict[str, Any]:
    """A role's defaults as written (templates unrendered)."""
    import yaml

    from gpuready.core.runner import collection_dir

    path = collection_dir() / "roles" / role / "defaults" / "main.yml"
    try:
        return yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise Unreachable(f"{path}: {e}; reinstall gpuready") from e


def role_default(role: str, name: str) -> Any:
    """One plain (untemplated) default of a role."""
    value = role_defaults(role).get(name)
    if value is None or (isinstance(value, str) and "{{" in value):
        raise Unreachable(f"the {role} role has no plain default {name}; reinstall gpuready")
    return value


def nvidia_vendor_id() -> int:
    """NVIDIA's PCI vendor id, as the preflight role looks for it in sysfs."""
    return int(str(role_default("preflight", "preflight_nvidia_vendor_id")), 16)


def device_plugin_release() -> str:
    """The pinned NVIDIA k8s-device-plugin release."""
    return str(role_default("nvidia_device_plugin", "nvidia_device_plugin_release"))


def device_plugin_pod_selector() -> str:
    """The label selector of the device plugin's pods, as a Kubernetes label selector string."""
    labels = role_default("nvidia_device_plugin", "nvidia_device_plugin_pod_labels")
    return ",".join(f"{k}={v}" for k, v in labels.items())


def gpu_label() -> str:
    """The label put on GPU nodes when the inventory names none (key=value)."""
    return str(role_default("gpu_node_labels", "gpu_node_labels_default_label"))


def gpu_extra_labels() -> dict[str, str]:
    """Labels put on GPU nodes beside the GPU label when the inventory names none."""
    return dict(role_default("gpu_node_labels", "gpu_node_labels_default_extra"))


def selinux_file_contexts() -> list[dict[str, str]]:
    """The file contexts the gpu_selinux role adds: {path (glob), target (regex), setype}."""
    return list(role_default("gpu_selinux", "gpu_selinux_file_contexts"))


def runtime_configs() -> dict[str, str]:
    """Where the container-toolkit role configures each runtime: the drop-in when it has one, else the main file."""
    configs = role_default("nvidia_container_toolkit", "nvidia_container_toolkit_configs")
    dropins = role_default("nvidia_container_toolkit", "nvidia_container_toolkit_dropins")
    return {runtime: dropins.get(runtime) or path for runtime, path in configs.items()}


def fabric_mtu() -> int:
    """The MTU a node class's fabric ports get when the class names none (0: left as the link has it)."""
    return int(role_default("fabric", "fabric_default_mtu"))
