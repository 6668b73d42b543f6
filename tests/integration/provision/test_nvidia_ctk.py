"""The container-toolkit role around NVIDIA's real nvidia-ctk, editing real runtime configuration files.

nvidia-ctk is built from github.com/NVIDIA/nvidia-container-toolkit (a pinned release, cached by version).
The role's own configure and remove tasks run with plain Ansible on files in a test root: containerd's
documented version 2 and version 3 configurations, CRI-O and Docker. What the runtime must end up with is
what NVIDIA's Container Toolkit guide says `nvidia-ctk runtime configure` does: an `nvidia` runtime whose
binary is nvidia-container-runtime, made the default with --set-as-default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, require
from tests.integration.provision import nvidia_ctk

pytestmark = pytest.mark.slow

RUNTIMES = ROOT / "tests" / "fixtures" / "runtimes"
NVIDIA_RUNTIME = "/usr/bin/nvidia-container-runtime"  # NVIDIA Container Toolkit guide: the runtime nvidia-ctk adds
CONTAINERD_V2 = ("plugins", "io.containerd.grpc.v1.cri", "containerd")
CONTAINERD_V3 = ("plugins", "io.containerd.cri.v1.runtime", "containerd")


@pytest.fixture(scope="module")
def ctk() -> Path:
    ok, why = nvidia_ctk.prerequisites()
    require(ok, why)
    return nvidia_ctk.build()


def _play(root: Path, runtime: str, tasks_from: str, *, default: bool) -> dict[str, Any]:
    """Run one of the role's task files on this machine with every path inside ``root``."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "nvidia_container_toolkit_runtime": runtime,
                "nvidia_container_toolkit_configs": {
                    "containerd": f"{root}/etc/containerd/config.toml",
                    "crio": f"{root}/etc/crio/crio.conf",
                    "docker": f"{root}/etc/docker/daemon.json",
                },
                "nvidia_container_toolkit_dropins": {
                    "containerd": f"{root}/etc/containerd/conf.d/99-nvidia.toml",
                    "crio": f"{root}/etc/crio/crio.conf.d/99-nvidia.toml",
                    "docker": "",
                },
                "nvidia_container_toolkit_ctk": str(nvidia_ctk.build()),
                "nvidia_container_toolkit_set_as_default": default,
                "nvidia_container_toolkit_enable_cdi": False,
                "nvidia_container_toolkit_manage_services": False,
                "nvidia_container_toolkit_findings": [],
                "nvidia_container_toolkit_runtime_binaries": {runtime: "sh"},
                "gpuready": {"node_classes": {"gpu": {"gpu_count": 1}}},
            },
            # configure.yml works from what runtime.yml read (the runtime's binary and configuration files),
            # as in the role; this machine need not have the runtime installed, so its shell stands in.
            "tasks": [
                {
                    "name": f"Run the role's {name}",
                    "ansible.builtin.include_role": {"name": "nvidia_container_toolkit", "tasks_from": name},
                }
                for name in (["runtime.yml"] if tasks_from == "configure.yml" else []) + [tasks_from]
            ],
        }
    ]
    book = root.parent / f"play-{tasks_from}"
    book.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {
        **os.environ,
        "ANSIBLE_ROLES_PATH": str(ROOT / "playbooks" / "roles"),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            *("-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", str(book)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return json.loads(done.stdout)["stats"]["localhost"]


def _dig(doc: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        doc = doc[key]
    return doc


CASES = {
    "containerd-v2": ("containerd", "containerd-v2.toml"),
    "containerd-v3": ("containerd", "containerd-v3.toml"),
    "containerd-fresh": ("containerd", None),
    "crio-fresh": ("crio", None),
    "docker-fresh": ("docker", None),
    "docker-user": ("docker", "user"),
}
CONFIGS = {"containerd": "etc/containerd/config.toml", "crio": "etc/crio/crio.conf", "docker": "etc/docker/daemon.json"}
DOCKER_USER = {"log-driver": "json-file", "log-opts": {"max-size": "10m"}}


def _seed(root: Path, runtime: str, fixture: str | None) -> Path | None:
    path = root / CONFIGS[runtime]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fixture == "user":
        path.write_text(json.dumps(DOCKER_USER, indent=2) + "\n")
    elif fixture:
        path.write_bytes((RUNTIMES / fixture).read_bytes())
    else:
        return None
    return path


def _effective(root: Path, runtime: str) -> dict[str, Any]:
    """The nvidia runtime and the default runtime as the container runtime would read them."""
    if runtime == "docker":
        doc = json.loads((root / "etc/docker/daemon.json").read_text())
        return {"path": doc["runtimes"]["nvidia"]["path"], "default": doc.get("default-runtime")}
    if runtime == "crio":
        doc = tomllib.loads((root / "etc/crio/crio.conf.d/99-nvidia.toml").read_text())
        crio = doc["crio"]["runtime"]
        return {"path": crio["runtimes"]["nvidia"]["runtime_path"], "default": crio.get("default_runtime")}
    main = tomllib.loads((root / "etc/containerd/config.toml").read_text())
    dropin_path = root / "etc/containerd/conf.d/99-nvidia.toml"
    assert f"{root}/etc/containerd/conf.d/*.toml" in main.get("imports", []), "containerd would not read the drop-in"
    dropin = tomllib.loads(dropin_path.read_text())
    section = CONTAINERD_V3 if dropin.get("version") == 3 else CONTAINERD_V2
    cri = _dig(dropin, *section)
    return {"path": cri["runtimes"]["nvidia"]["options"]["BinaryName"], "default": cri.get("default_runtime_name")}


# Every runtime with nvidia as its default (NVIDIA's recommendation); two also as a RuntimeClass handler only.
RUNS = [(case, True) for case in sorted(CASES)] + [("containerd-v2", False), ("crio-fresh", False)]


@pytest.mark.parametrize(("case", "default"), RUNS, ids=[f"{c}-{'default' if d else 'runtimeclass'}" for c, d in RUNS])
def test_nvidia_ctk_configures_the_runtime_once_and_remove_restores_it(
    ctk: Path, tmp_path: Path, case: str, default: bool
) -> None:
    runtime, fixture = CASES[case]
    root = tmp_path / "root"
    config = _seed(root, runtime, fixture)
    original = config.read_bytes() if config else None
    before_default = None
    if config and runtime == "containerd":
        doc = tomllib.loads(original.decode())
        section = CONTAINERD_V3 if doc["version"] == 3 else CONTAINERD_V2
        before_default = _dig(doc, *section).get("default_runtime_name")

    first = _play(root, runtime, "configure.yml", default=default)
    assert first["changed"] > 0
    got = _effective(root, runtime)
    assert got["path"].endswith("nvidia-container-runtime") and NVIDIA_RUNTIME.endswith(Path(got["path"]).name)
    if default:
        assert got["default"] == "nvidia"
    else:
        # Offered as a handler only: the runtime's own default stays (pods choose nvidia by RuntimeClass).
        assert got["default"] in (before_default, None, "runc")
    if config:
        assert Path(f"{config}.gpuready-backup").read_bytes() == original

    second = _play(root, runtime, "configure.yml", default=default)
    assert second["changed"] == 0, "a second run changed the runtime configuration"

    _play(root, runtime, "remove.yml", default=default)
    if config:
        assert config.read_bytes() == original
    leftovers = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert leftovers == ([str(config.relative_to(root))] if config else [])
