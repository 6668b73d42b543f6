"""IMEX on GB200/GB300 NVL compute trays (node class nvlink_domain): the driver role's own task that names the IMEX
domain's nodes, run by Ansible over an inventory of two racks, and its finding template rendered by Ansible's
templating engine. NVIDIA IMEX guide ("Getting Started with IMEX"): the package registers the systemd service
nvidia-imex, which aborts against a loaded driver of another version; IMEX_NODE_CONFIG_FILE (default
/etc/nvidia-imex/nodes_config.cfg) lists the IP addresses of the domain's nodes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from gpuready.core.results import PENDING
from gpuready.core.runner import ansible_environment
from tests.conftest import ROOT
from tests.unit.provision.local_play import BIN
from tests.unit.provision.test_reboot_pending import render

TASKS = ROOT / "playbooks" / "roles" / "nvidia_driver" / "tasks" / "imex.yml"
COMPARE = "Driver | Compare IMEX and driver versions"
WRITE = "{{ {'peers': nvidia_driver_imex_peers, 'imex': nvidia_driver_imex_installed} | to_json }}"


def imex(**overrides: Any) -> dict[str, str]:
    """driver.imex on a tray of rack r1 (3 nodes) after 580.173.02 and nvidia-imex-580 580.173.02 were installed."""
    variables = {
        "nvidia_driver_plan": {
            "version_package": "nvidia-driver",
            "imex": {"package": "nvidia-imex-580", "packages": ["nvidia-imex-580"], "service": "nvidia-imex"},
        },
        "nvidia_driver_imex_installed": "580.173.02",
        "nvidia_driver_installed": "580.173.02",
        "nvidia_driver_imex_peers": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
        "nvidia_driver_imex_nodes_config": "/etc/nvidia-imex/nodes_config.cfg",
        "gpuready_nvlink_domain": "r1",
        "nvidia_driver_manage_services": True,
        "nvidia_driver_reboot_pending": False,
        "nvidia_driver_module_refused": False,
        "ansible_check_mode": False,
    }
    return render("nvidia_driver", "imex.yml.j2", **(variables | overrides))


def test_imex_running_at_the_driver_version_passes_and_leaves_the_domain_to_validate() -> None:
    finding = imex()
    assert finding["status"] == "passed"
    assert "topology.nvlink_domain" in finding["message"]
    assert "/etc/nvidia-imex/nodes_config.cfg: 3 nodes of r1" in finding["evidence"]


def test_imex_waiting_for_the_new_driver_is_pending() -> None:
    finding = imex(nvidia_driver_reboot_pending=True)
    assert finding["status"] == PENDING
    assert "topology.nvlink_domain passes once nvidia-imex is active" in finding["remedy"]


def test_imex_of_another_version_fails_naming_both() -> None:
    finding = imex(nvidia_driver_imex_installed="570.172.08")
    assert finding["status"] == "failed"
    assert finding["message"] == (
        "IMEX 570.172.08 does not match driver 580.173.02: the node cannot join its NVLink domain"
    )


def test_check_mode_says_what_it_would_install() -> None:
    finding = imex(nvidia_driver_imex_installed="", ansible_check_mode=True)
    assert (finding["status"], finding["message"]) == (
        "skipped",
        "check mode: would install nvidia-imex-580 and enable nvidia-imex",
    )


def test_each_tray_names_the_nodes_of_its_own_rack(tmp_path: Path) -> None:
    """Two racks in one inventory: each host's nodes_config lists its own rack's addresses, sorted, and a host
    without gpuready_nvlink_domain gets none (its file is left as it is)."""
    [task] = [
        t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == "Driver | Compare IMEX and driver versions"
    ]
    hosts = {
        "r1-b": {"ansible_host": "10.0.0.2", "gpuready_nvlink_domain": "r1"},
        "r1-a": {"ansible_host": "10.0.0.1", "gpuready_nvlink_domain": "r1"},
        "r2-a": {"ansible_host": "10.0.1.1", "gpuready_nvlink_domain": "r2"},
        "lone": {"ansible_host": "10.0.2.1"},
    }
    common = {"ansible_connection": "local", "ansible_python_interpreter": str(BIN / "python")}
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts, "vars": common}}))
    out = tmp_path / "peers"
    out.mkdir()
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "vars": {
                "nvidia_driver_plan": {"imex": {"package": "nvidia-imex-580"}},
                "nvidia_driver_installed_packages": {"nvidia-imex-580": [{"version": "580.173.02-1"}]},
            },
            "tasks": [
                task,
                {
                    "name": "Test | Write each host's peers",
                    "delegate_to": "localhost",
                    "ansible.builtin.copy": {
                        "content": WRITE,
                        "dest": f"{out}/{{{{ inventory_hostname }}}}.json",
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**ansible_environment(tmp_path), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    got = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert got == {
        "r1-a": {"peers": ["10.0.0.1", "10.0.0.2"], "imex": "580.173.02"},
        "r1-b": {"peers": ["10.0.0.1", "10.0.0.2"], "imex": "580.173.02"},
        "r2-a": {"peers": ["10.0.1.1"], "imex": "580.173.02"},
        "lone": {"peers": [], "imex": "580.173.02"},
    }
