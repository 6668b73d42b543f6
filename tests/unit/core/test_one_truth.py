"""Facts the roles own are written once, in the roles' defaults; the rest of the product reads them.

A copy that reappears elsewhere in shipped code (settings schema, checks, vSphere plan, role tasks and
templates) fails here, named with its file and line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gpuready.core import role_defaults

ROOT = Path(__file__).resolve().parents[3]
#: Shipped code that must not repeat a role's fact. The lab (core/lab) simulates hosts and is not the product.
SHIPPED = ("core", "validate", "provision", "workloads", "playbooks")
FACTS = {
    "device-plugin release": r"v0\.17\.1",
    "device-plugin pod label": r"nvidia-device-plugin-ds",
    "GPU node label": r"openshift\.com/gpu-accelerator",
    "extra GPU node label": r"nvidia\.com/gpu\.present",
    "SELinux types": r"xserver_misc_device_t|xserver_exec_t|container_file_t",
    "NVIDIA vendor id": r"0x10de|-d 10de:",
    "runtime configuration paths": (
        r"/etc/containerd/config\.toml|/etc/crio/crio\.conf|/etc/docker/daemon\.json|99-nvidia"
    ),
}


def shipped_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", *SHIPPED], cwd=ROOT, capture_output=True, text=True, check=True)
    return [
        ROOT / name
        for name in listed.stdout.split()
        if not name.startswith("core/lab/") and not re.fullmatch(r"playbooks/roles/[^/]+/defaults/main\.yml", name)
    ]


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_a_roles_fact_is_written_only_in_role_defaults(fact: str) -> None:
    pattern = re.compile(FACTS[fact], re.IGNORECASE)
    copies = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in shipped_files()
        if path.is_file()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not copies, f"{fact} is repeated outside the roles' defaults:\n" + "\n".join(copies)


def test_the_fact_is_in_the_role_defaults_and_python_reads_it_from_there() -> None:
    from gpuready.core.settings import Kubernetes
    from gpuready.validate import cluster
    from gpuready.validate.node import checks

    kubernetes = Kubernetes()
    assert kubernetes.device_plugin.version == role_defaults.device_plugin_release() == "v0.17.1"
    assert kubernetes.gpu_label == role_defaults.gpu_label()
    assert role_defaults.nvidia_vendor_id() == 0x10DE
    assert checks.LSPCI_COMMAND == "lspci -n -d 10de:"
    contexts = {c["path"]: c["setype"] for c in role_defaults.selinux_file_contexts()}
    assert {p: t for p, t in contexts.items() if "nvidia" in p} == checks.SELINUX_LABELS
    assert all(f"{p} must be {t}" in cluster.SELINUX_REMEDY for p, t in contexts.items())
    assert cluster.PLUGIN_SELECTOR == "name=nvidia-device-plugin-ds"
    # The checks read the file the container-toolkit role writes (NVIDIA's nvidia-ctk drop-in for CRI-O).
    assert checks.RUNTIME_CONFIG["crio"][0] == role_defaults.runtime_configs()["crio"]


def test_a_templated_default_is_refused_as_a_fact() -> None:
    from gpuready.core.errors import Unreachable

    with pytest.raises(Unreachable, match="no plain default"):
        role_defaults.role_default("nvidia_device_plugin", "nvidia_device_plugin_version")
