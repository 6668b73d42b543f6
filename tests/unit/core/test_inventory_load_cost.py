"""Loading a big inventory does per-host work only: no deep copy of the hosts file, no cycle collector passes.

Speed itself is measured by benchmarks/inventory_scale.py (BENCHMARKS.md); these tests count the work that
made 10,000 hosts slow, so they fail whatever the machine's load when that work comes back.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Mapping
from pathlib import Path
from unittest import mock

import pytest
import yaml

from gpuready.core import inventory
from gpuready.core.errors import BadInput

HOSTS = 400


def _inventory(tmp: Path, hosts: int = HOSTS) -> Path:
    inv = tmp / "inv"
    (inv / "group_vars" / "all").mkdir(parents=True)
    racks: dict[str, dict] = {}
    for i in range(hosts):
        racks.setdefault(f"rack{i // 40:03d}", {"hosts": {}})["hosts"][f"gpu{i:05d}"] = {
            "ansible_host": f"10.0.{i // 256}.{i % 256}",
            "gpuready_node_class": "hgx-h100" if i % 2 else "c4140-v100",
            "labels": {"rack": f"r{i // 40}", "slots": [1, 2, 3]},
        }
    (inv / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"children": racks}}))
    settings = {
        "node_classes": {
            "c4140-v100": {"gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 4},
            "hgx-h100": {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8},
        },
        "driver": {"branch": "580"},
    }
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
    return inv


def test_the_hosts_file_is_parsed_once_and_not_deep_copied(tmp_path: Path) -> None:
    """gpuready parses hosts.yml itself (to refuse what Ansible would choke on) and hands that to Ansible's
    inventory plugin: Ansible neither parses it again nor deep-copies it (at 10,000 hosts each cost as much as
    gpuready's own parse)."""
    from ansible.parsing.dataloader import DataLoader

    inv = _inventory(tmp_path)
    real_copy, real_load = copy.deepcopy, DataLoader.load
    with (
        mock.patch("copy.deepcopy", side_effect=real_copy) as deepcopy,
        mock.patch.object(DataLoader, "load", autospec=True, side_effect=real_load) as ansible_parse,
    ):
        loaded = inventory.load(inv)
    assert len(loaded.hosts("gpu_nodes")) == HOSTS
    parsed = [call.kwargs.get("file_name") or call.args[2] for call in ansible_parse.call_args_list]
    assert str(inv / "hosts.yml") not in parsed, "Ansible parsed hosts.yml again"
    copied = [call.args[0] for call in deepcopy.call_args_list]
    assert not [c for c in copied if isinstance(c, Mapping) and "gpu_nodes" in c], "the hosts file was deep-copied"
    # Nothing was lost on the way: each host has its own nested values, as written.
    assert loaded.host_vars("gpu00007")["labels"] == {"rack": "r0", "slots": [1, 2, 3]}
    assert loaded.host_vars("gpu00007")["labels"] is not loaded.host_vars("gpu00008")["labels"]


def test_the_cycle_collector_is_paused_while_loading_and_back_after(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, hosts=4)
    seen: list[bool] = []
    real = inventory._ansible_inventory

    def spy(*args: object) -> object:
        seen.append(gc.isenabled())
        return real(*args)

    with mock.patch.object(inventory, "_ansible_inventory", spy):
        inventory.load(inv)
        assert seen == [False]
        assert gc.isenabled()
        (inv / "hosts.yml").write_text("gpu_nodes: [unclosed\n")
        with pytest.raises(BadInput):
            inventory.load(inv)
        assert gc.isenabled()
