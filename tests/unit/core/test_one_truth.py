"""Facts the roles own are written once, in the roles' defaults; the rest of the product reads them.

A copy that reappears elsewhere in shipped code (settings schema, checks, vSphere plan, role tasks and
templates) fails here, named with its file and line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuready.core import role_defaults

ROOT = Path(__file__).resolve().parents[3]
#: Shipped code that must not repeat a role's fact. The lab (lab/, not listed) simulates hosts and
#: is not the product.
SHIPPED = ("core", "validate", "provision", "workloads", "playbooks")
ROLE_DEFAULTS = "playbooks/roles/{}/defaults/main.yml"
COMMON = ROLE_DEFAULTS.format("common")
#: Each fact's pattern and the one role defaults file that writes it; every other shipped file (another role's
#: defaults too) reads it from there.
FACTS = {
    "device-plugin release": (r"v0\.20\.0", ROLE_DEFAULTS.format("nvidia_device_plugin")),
    "device-plugin pod label": (r"nvidia-device-plugin-ds", ROLE_DEFAULTS.format("nvidia_device_plugin")),
    "GPU node label": (r"openshift\.com/gpu-accelerator", COMMON),
    "extra GPU node label": (r"nvidia\.com/gpu\.present", ROLE_DEFAULTS.format("gpu_node_labels")),
    "SELinux types": (r"xserver_misc_device_t|xserver_exec_t|container_file_t", ROLE_DEFAULTS.format("gpu_selinux")),
    "SELinux device booleans": (r"container_use_\w*devices", ROLE_DEFAULTS.format("gpu_selinux")),
    "NVIDIA vendor id": (r"0x10de|-d 10de:", ROLE_DEFAULTS.format("preflight")),
    "runtime configuration paths": (
        r"/etc/containerd/config\.toml|/etc/crio/crio\.conf|/etc/docker/daemon\.json|99-nvidia",
        ROLE_DEFAULTS.format("nvidia_container_toolkit"),
    ),
    "kubelet's device-plugins folder": (r"/var/lib/kubelet/device-plugins", COMMON),
    # The bare name: not part of a longer name (nvidia-device-plugin-ds), a path or a file name.
    "device plugin's name, service account and OpenShift project": (
        r"(?<![\w/.-])nvidia-device-plugin(?![\w.-])",
        COMMON,
    ),
    "device plugin's SCC": (r"gpuready-nvidia-device-plugin", ROLE_DEFAULTS.format("openshift_gpu_scc")),
}
#: Kubernetes manifests a user applies by hand cannot read the roles' defaults: their copies are checked equal
#: (test_the_rbac_manifest_names_the_roles_namespaces) instead.
MANIFESTS = (
    "core/platforms/kube_rbac.yaml",
    # test_node_checks_manifests.py checks their GPU label and taint against the roles' defaults.
    "core/platforms/kube_node_checks.yaml",
    "core/platforms/kube_node_checks_taint.yaml",
    "core/platforms/kube_node_checks_openshift.yaml",
)


def shipped_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", *SHIPPED], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split() if name not in MANIFESTS]


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_a_roles_fact_is_written_once_in_one_roles_defaults(fact: str) -> None:
    pattern, owner = FACTS[fact]
    regex = re.compile(pattern, re.IGNORECASE)
    assert regex.search((ROOT / owner).read_text()), f"{fact} is not in {owner}"
    copies = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in shipped_files()
        if path.is_file() and path != ROOT / owner
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if regex.search(line)
    ]
    assert not copies, f"{fact} is written in {owner} and repeated here:\n" + "\n".join(copies)


def test_the_roles_that_use_the_common_facts_depend_on_the_common_role() -> None:
    """A playbook that uses one of these roles alone still gets the facts (Ansible loads a dependency's defaults)."""
    users = {
        path.parent.parent.name
        for path in (ROOT / "playbooks" / "roles").glob("*/[dt]*/*")
        if path.is_file() and "common_" in path.read_text() and path.parent.parent.name != "common"
    }
    assert users >= {"nvidia_device_plugin", "gpu_selinux", "gpu_node_labels", "openshift_gpu_scc"}
    for role in users:
        meta = yaml.safe_load((ROOT / "playbooks" / "roles" / role / "meta" / "main.yml").read_text())
        assert {"role": "gpuready.gpu.common"} in meta["dependencies"], role


def test_the_rbac_manifest_names_the_roles_namespaces() -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "core" / "platforms" / "kube_rbac.yaml").read_text()) if d]
    projects = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    assert role_defaults.device_plugin_namespace("openshift") in projects
    namespaces = {d["metadata"].get("namespace") for d in docs if d["kind"] in ("Role", "RoleBinding")}
    assert {role_defaults.device_plugin_namespace(f) for f in ("kubernetes", "openshift")} <= namespaces


def test_the_fact_is_in_the_role_defaults_and_python_reads_it_from_there() -> None:
    from gpuready.core.settings import Kubernetes
    from gpuready.validate import cluster
    from gpuready.validate.node import checks

    kubernetes = Kubernetes()
    assert kubernetes.device_plugin.version == role_defaults.device_plugin_release() == "v0.20.0"
    assert kubernetes.gpu_label == role_defaults.gpu_label()
    assert role_defaults.nvidia_vendor_id() == 0x10DE
    assert checks.LSPCI_COMMAND.startswith("lspci -n -d 10de: 2>/dev/null || ")
    assert '[ "$v" = 0x10de ]' in checks.LSPCI_COMMAND  # the sysfs fallback matches the same vendor
    contexts = {c["path"]: c["setype"] for c in role_defaults.selinux_file_contexts()}
    policy = {c["path"]: c["setype"] for c in role_defaults.selinux_policy_labels()}
    assert {p: t for p, t in (policy | contexts).items() if "nvidia" in p} == checks.SELINUX_LABELS
    assert checks.SELINUX_LABELS["/dev/nvidia*"] == "xserver_misc_device_t"
    assert all(f"{p} must be {t}" in cluster.SELINUX_REMEDY for p, t in (policy | contexts).items())
    assert cluster.PLUGIN_SELECTOR == "name=nvidia-device-plugin-ds"
    assert all(b in cluster.SELINUX_REMEDY for b in role_defaults.selinux_device_booleans())
    assert checks.DEVICE_PLUGIN_SOCKET.startswith(role_defaults.kubelet_device_plugins_dir() + "/")
    assert {c["path"] for c in role_defaults.selinux_file_contexts()} >= {role_defaults.kubelet_device_plugins_dir()}
    assert Kubernetes(flavour="openshift").device_plugin.namespace == role_defaults.device_plugin_namespace("openshift")
    assert kubernetes.device_plugin.namespace == role_defaults.device_plugin_namespace("kubernetes")
    # The checks read the file the container-toolkit role writes (NVIDIA's nvidia-ctk drop-in for CRI-O).
    assert checks.RUNTIME_CONFIG["crio"][0] == role_defaults.runtime_configs()["crio"]


def test_a_templated_default_is_refused_as_a_fact() -> None:
    from gpuready.core.errors import Unreachable

    with pytest.raises(Unreachable, match="no plain default"):
        role_defaults.role_default("nvidia_device_plugin", "nvidia_device_plugin_version")
