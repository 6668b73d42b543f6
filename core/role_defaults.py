"""Facts the roles own, read from the roles' defaults: the one place each is written.

A fact the roles apply and Python also needs (the settings schema's defaults, the checks that read
back what a role did, the vSphere plan) is a value in ``roles/<role>/defaults/main.yml`` of the
gpuready.gpu collection, or of its ``common`` role when several roles apply it (they depend on that role);
Python reads it from there instead of keeping a copy that could drift. Such a value is plain or a template
of other such values, never of the inventory's settings.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from gpuready.core.errors import Unreachable

COLLECTION = "gpuready.gpu."


@cache
def _read(role: str, part: str) -> dict[str, Any]:
    import yaml

    from gpuready.core.collection import collection_dir

    path = collection_dir() / "roles" / role / part / "main.yml"
    if part == "meta" and not path.is_file():
        return {}
    try:
        # libyaml where present: every command reads these at start-up, and the pure-Python parser is ~8x slower
        return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except (OSError, yaml.YAMLError) as e:
        raise Unreachable(f"{path}: {e}; reinstall gpuready") from e


def role_defaults(role: str) -> dict[str, Any]:
    """A role's defaults as written (templates unrendered), over those of the roles it depends on, as Ansible
    merges them."""
    merged: dict[str, Any] = {}
    for dependency in _read(role, "meta").get("dependencies") or []:
        name = dependency["role"] if isinstance(dependency, dict) else dependency
        merged.update(role_defaults(name.removeprefix(COLLECTION)))
    return {**merged, **_read(role, "defaults")}


def role_default(role: str, name: str) -> Any:
    """One default of a role that its defaults alone decide: plain, or a template of other such defaults
    (never of the inventory's settings)."""
    defaults = role_defaults(role)
    if name not in defaults or defaults[name] is None:
        raise Unreachable(f"the {role} role has no plain default {name}; reinstall gpuready")
    return _render(role, name, defaults[name])


def _render(role: str, name: str, value: Any) -> Any:
    if isinstance(value, list):
        return [_render(role, name, v) for v in value]
    if isinstance(value, dict):
        return {k: _render(role, name, v) for k, v in value.items()}
    if not (isinstance(value, str) and "{{" in value):
        return value
    import jinja2
    import jinja2.meta

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    used = jinja2.meta.find_undeclared_variables(env.parse(value))
    defaults = role_defaults(role)
    if not used <= defaults.keys():
        raise Unreachable(f"the {role} role has no plain default {name}; reinstall gpuready")
    try:
        return env.from_string(value).render({v: role_default(role, v) for v in used})
    except jinja2.TemplateError as e:
        raise Unreachable(f"the {role} role has no plain default {name} ({e}); reinstall gpuready") from e


def nvidia_vendor_id() -> int:
    """NVIDIA's PCI vendor id, as the preflight role looks for it in sysfs."""
    return int(str(role_default("preflight", "preflight_nvidia_vendor_id")), 16)


def device_plugin_release() -> str:
    """The pinned NVIDIA k8s-device-plugin release."""
    return str(role_default("nvidia_device_plugin", "nvidia_device_plugin_release"))


def runtime_class_name() -> str:
    """The RuntimeClass of the NVIDIA runtime that the device plugin and GPU pods name in runtimeclass mode."""
    return str(role_default("nvidia_device_plugin", "nvidia_device_plugin_runtime_class_name"))


def device_plugin_pod_selector() -> str:
    """The label selector of the device plugin's pods, as a Kubernetes label selector string."""
    labels = role_default("nvidia_device_plugin", "nvidia_device_plugin_pod_labels")
    return ",".join(f"{k}={v}" for k, v in labels.items())


def gpu_label() -> str:
    """The label put on GPU nodes when the inventory names none (key=value)."""
    return str(role_default("common", "common_gpu_label"))


def device_plugin_namespace(flavour: str) -> str:
    """The device plugin's namespace when the inventory names none: a project of its own on OpenShift."""
    name = "common_device_plugin_openshift_namespace" if flavour == "openshift" else "common_device_plugin_namespace"
    return str(role_default("common", name))


def device_plugin_service_account() -> str:
    """The service account the device plugin runs as (bound to its SCC on OpenShift)."""
    return str(role_default("common", "common_device_plugin_service_account"))


def device_plugin_scc() -> str:
    """The SecurityContextConstraints the openshift_gpu_scc role makes for the device plugin."""
    return str(role_default("openshift_gpu_scc", "openshift_gpu_scc_name"))


def kubelet_device_plugins_dir() -> str:
    """The kubelet's folder where device plugins serve their sockets."""
    return str(role_default("common", "common_kubelet_device_plugins_dir"))


def selinux_device_booleans() -> list[str]:
    """container-selinux booleans that let containers open the GPU devices; the role turns on the first the
    node's policy has."""
    return list(role_default("gpu_selinux", "gpu_selinux_device_booleans"))


def gpu_extra_labels() -> dict[str, str]:
    """Labels put on GPU nodes beside the GPU label when the inventory names none."""
    return dict(role_default("gpu_node_labels", "gpu_node_labels_default_extra"))


def selinux_file_contexts() -> list[dict[str, str]]:
    """The file contexts the gpu_selinux role adds: {path (glob), target (regex), setype}."""
    return list(role_default("gpu_selinux", "gpu_selinux_file_contexts"))


def selinux_policy_labels() -> list[dict[str, str]]:
    """Labels the SELinux policy itself gives NVIDIA files, which the role leaves to it: {path (glob), setype}."""
    return list(role_default("gpu_selinux", "gpu_selinux_policy_labels"))


def runtime_configs() -> dict[str, str]:
    """Where the container-toolkit role configures each runtime: the drop-in when it has one, else the main file."""
    configs = role_default("nvidia_container_toolkit", "nvidia_container_toolkit_configs")
    dropins = role_default("nvidia_container_toolkit", "nvidia_container_toolkit_dropins")
    return {runtime: dropins.get(runtime) or path for runtime, path in configs.items()}


def fabric_mtu() -> int:
    """The MTU a node class's fabric ports get when the class names none (0: left as the link has it)."""
    return int(role_default("fabric", "fabric_default_mtu"))
