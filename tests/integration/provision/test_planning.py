"""Check-mode planning for every distribution we cannot boot here, from recorded facts.

Each host is this machine reached locally, but its facts come from a recording of a real
release (tests/fixtures/facts), put into Ansible's own jsonfile fact cache so the plays'
smart gathering uses them instead of gathering. The roles run in plan-only mode: they work out
and report the repository, package names, module stream and handlers, and change nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuready.core.runner import run_playbook
from tests.conftest import ROOT

FACTS = ROOT / "tests" / "fixtures" / "facts"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
HANDLERS = [
    "Driver | Rebuild the initramfs",
    "Driver | Restart nvidia-persistenced",
    "Driver | Wait for nvidia-persistenced",
]
SEED_RULES = [
    {"path": "/dev/nvidia*", "target": "/dev/nvidia.*", "setype": "xserver_misc_device_t"},
    {"path": "/usr/bin/nvidia-*", "target": "/usr/bin/nvidia-.*", "setype": "xserver_exec_t"},
    {"path": "/var/lib/kubelet/*/*", "target": "/var/lib/kubelet/.*/.*", "setype": "container_file_t"},
]
# host: (branch, version) pinned for it, then what the plan must say.
EXPECTED: dict[str, dict[str, Any]] = {
    "rhel-7": {
        "pin": ("418", "418.40.04"),
        "repo": f"{CUDA}/rhel7/x86_64/",
        "stream": "",
        "packages": [
            "nvidia-driver-branch-418-418.40.04",
            "kmod-nvidia-latest-dkms-418.40.04",
            "nvidia-persistenced-418.40.04",
        ],
        "headers": ["kernel-devel-3.10.0-1160.el7.x86_64", "kernel-headers-3.10.0-1160.el7.x86_64", "dkms"],
        "initramfs": "dracut --force --regenerate-all",
        "epel": True,
    },
    "centos-7": {
        "pin": ("430", "430.26"),
        "repo": f"{CUDA}/rhel7/x86_64/",
        "stream": "",
        "packages": ["nvidia-driver-branch-430-430.26", "kmod-nvidia-latest-dkms-430.26", "nvidia-persistenced-430.26"],
        "headers": ["kernel-devel-3.10.0-957.el7.x86_64", "kernel-headers-3.10.0-957.el7.x86_64", "dkms"],
        "initramfs": "dracut --force --regenerate-all",
        "epel": True,
    },
    "rhel-8": {
        "pin": ("470", "470.82.01"),
        "repo": f"{CUDA}/rhel8/x86_64/",
        "stream": "nvidia-driver:470-dkms",
        "packages": ["@nvidia-driver:470-dkms", "nvidia-driver-470.82.01"],
        "headers": ["kernel-devel-4.18.0-553.el8_10.x86_64", "kernel-headers-4.18.0-553.el8_10.x86_64"],
        "initramfs": "dracut --force --regenerate-all",
        "epel": True,
    },
    "rhel-9": {
        "pin": ("550", ""),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:550-dkms",
        "packages": ["@nvidia-driver:550-dkms"],
        "headers": ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-headers-5.14.0-427.13.1.el9_4.x86_64"],
        "initramfs": "dracut --force --regenerate-all",
        "epel": True,
    },
    "rocky-9": {
        "pin": ("535", "535.183.01"),
        "repo": f"{CUDA}/rhel9/x86_64/",
        "stream": "nvidia-driver:535-dkms",
        "packages": ["@nvidia-driver:535-dkms", "nvidia-driver-535.183.01"],
        "headers": ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-headers-5.14.0-427.13.1.el9_4.x86_64"],
        "initramfs": "dracut --force --regenerate-all",
        "epel": True,
    },
    "ubuntu-20.04": {
        "pin": ("470", "470.82.01"),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-470-server=470.82.01-*", "nvidia-utils-470-server=470.82.01-*"],
        "headers": ["linux-headers-5.4.0-190-generic"],
        "initramfs": "update-initramfs -u -k all",
        "epel": False,
    },
    "ubuntu-22.04": {
        "pin": ("535", ""),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-535-server", "nvidia-utils-535-server"],
        "headers": ["linux-headers-5.15.0-119-generic"],
        "initramfs": "update-initramfs -u -k all",
        "epel": False,
    },
    "ubuntu-24.04": {
        "pin": ("550", "550.90.07"),
        "repo": "",
        "stream": "",
        "packages": ["nvidia-driver-550-server=550.90.07-*", "nvidia-utils-550-server=550.90.07-*"],
        "headers": ["linux-headers-6.8.0-41-generic"],
        "initramfs": "update-initramfs -u -k all",
        "epel": False,
    },
}


def _fact_cache(folder: Path, hosts: dict[str, str]) -> Path:
    """Ansible's own jsonfile cache, written through its plugin so the format is the installed Ansible's."""
    from ansible.plugins.loader import cache_loader

    cache = cache_loader.get("jsonfile", _uri=str(folder), _timeout=0)
    for host, record in hosts.items():
        facts = json.loads((FACTS / f"{record}.json").read_text())["ansible_facts"]
        cache.set(host, {f"ansible_{k}": v for k, v in facts.items()} | {"_ansible_facts_gathered": True})
    return folder


def _inventory(folder: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    settings = {
        "node_classes": {"recorded": {"gpu_count": 0}},
        "driver": {"branch": "550"},
        "container_runtime": "containerd",
    }
    common = {
        "ansible_connection": "local",
        "nvidia_driver_plan_only": True,
        "nvidia_driver_wanted": True,
        "gpu_selinux_plan_only": True,
    }
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": hosts, "vars": common}}))
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    return folder


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("planning")
    hosts = {
        name: {"nvidia_driver_branch": pin[0], "nvidia_driver_version": pin[1]}
        for name, pin in ((n, e["pin"]) for n, e in EXPECTED.items())
    }
    hosts["debian-11"] = {}
    hosts["ubuntu-24.04-old-branch"] = {"nvidia_driver_branch": "418"}
    records = {name: name for name in EXPECTED} | {"debian-11": "debian-11", "ubuntu-24.04-old-branch": "ubuntu-24.04"}
    cache = _fact_cache(tmp / "facts", records)
    return run_playbook(
        "site.yml",
        _inventory(tmp / "inventory", hosts),
        tmp / "runs",
        check=True,
        tags=["driver", "selinux"],
        fact_cache=cache,
    )


@pytest.mark.parametrize("host", sorted(EXPECTED))
def test_driver_plan_per_distribution(planned: Any, host: str) -> None:
    result = planned.hosts[host]
    assert result.failures == 0 and not result.unreachable, result.failed_tasks
    assert result.changed == 0
    checks = {c.id: c for c in result.checks}
    plan = json.loads(checks["driver.plan"].evidence)
    want = EXPECTED[host]
    assert plan["repo"] == want["repo"]
    assert plan["repo_key"] == (f"{want['repo']}D42D0685.pub" if want["repo"] else "")
    assert plan["module_stream"] == want["stream"]
    assert plan["packages"] == want["packages"]
    assert plan["headers"] == want["headers"]
    assert plan["initramfs_command"] == want["initramfs"]
    assert plan["epel"] is want["epel"]
    assert plan["handlers"] == HANDLERS
    assert "(plan only: nothing changed)" in checks["driver.plan"].message


@pytest.mark.parametrize("host", sorted(EXPECTED))
def test_selinux_plan_follows_the_recorded_mode(planned: Any, host: str) -> None:
    finding = next(c for c in planned.hosts[host].checks if c.id == "selinux.file_contexts")
    if host.startswith("ubuntu"):
        assert (finding.status, finding.message) == ("skipped", "SELinux disabled: nothing changed")
    else:
        assert finding.status == "passed"
        assert json.loads(finding.evidence) == SEED_RULES


def test_an_unsupported_distribution_fails_only_that_host(planned: Any) -> None:
    result = planned.hosts["debian-11"]
    [(task, message)] = result.failed_tasks
    assert task == "Driver | Refuse an unsupported distribution"
    assert "nvidia_driver: Debian 11.11 is not supported" in message
    assert all(planned.hosts[h].failures == 0 for h in EXPECTED)  # the other hosts went on


def test_a_branch_the_distribution_lacks_fails_only_that_host(planned: Any) -> None:
    [(task, message)] = planned.hosts["ubuntu-24.04-old-branch"].failed_tasks
    assert task == "Driver | Refuse a branch the distribution does not have"
    assert "driver branch 418 does not exist for Ubuntu 24" in message
