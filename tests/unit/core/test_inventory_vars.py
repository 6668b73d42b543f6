"""Host variables as gpuready merges them equal Ansible's own VariableManager, on shipped and made-up inventories."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.core import inventory
from tests.conftest import ROOT

MAGIC = {
    "inventory_hostname",
    "inventory_hostname_short",
    "group_names",
    "groups",
    "omit",
    "playbook_dir",
    "ansible_playbook_python",
    "ansible_config_file",
    "ansible_version",
    "inventory_dir",
    "inventory_file",
    "ansible_check_mode",
    "ansible_diff_mode",
    "ansible_forks",
    "ansible_inventory_sources",
    "ansible_skip_tags",
    "ansible_run_tags",
    "ansible_verbosity",
    "ansible_search_path",
    "hostvars",
    "environment",
    "role_names",
    "ansible_dependent_role_names",
    "ansible_play_role_names",
    "ansible_role_names",
    "ansible_facts",
}


def _layered(tmp: Path) -> Path:
    """Every layer sets the same variables, so the winner of each shows the precedence."""
    inv = tmp / "inv"
    (inv / "group_vars" / "all").mkdir(parents=True)
    (inv / "group_vars" / "rack_a").mkdir()
    (inv / "host_vars").mkdir()
    (inv / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "vars": {"a": "inventory all", "b": "inventory all", "c": "inventory all", "d": "inventory all"}
                },
                "gpu_nodes": {
                    "vars": {"b": "inventory gpu_nodes"},
                    "children": {
                        "rack_a": {
                            "vars": {"c": "inventory rack_a"},
                            "hosts": {"gpu01": {"d": "inventory host", "gpuready_node_class": "v100"}, "gpu02": None},
                        }
                    },
                },
            }
        )
    )
    (inv / "group_vars" / "all" / "gpuready.yml").write_text(
        yaml.safe_dump(
            {"gpuready": {"node_classes": {"v100": {"gpu_model": "x", "gpu_count": 1}}, "driver": {"branch": "580"}}}
        )
    )
    (inv / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump({"a": "group_vars all", "e": "group_vars all"}))
    (inv / "group_vars" / "rack_a" / "rack.yml").write_text(
        yaml.safe_dump({"c": "group_vars rack_a", "e": "group_vars rack_a"})
    )
    (inv / "host_vars" / "gpu01.yml").write_text(yaml.safe_dump({"d": "host_vars gpu01", "f": 1}))
    return inv


#: YAML as people write it by hand: anchors and aliases, merge keys, YAML 1.1 booleans, a timestamp, numbers,
#: a section given as a string, host ranges and a port in the host name.
HANDWRITTEN = """\
gpu_nodes:
  vars:
    common: &common
      ansible_user: root
      tuned: {profile: throughput-performance, cores: [0, 1, 2]}
    enabled: yes
    legacy: off
    since: 2024-01-31
    ratio: 0.75
    octal: 0o17
    empty:
  children:
    rack_a:
      hosts:
        gpu[01:03]:
          <<: *common
          gpuready_node_class: v100
        gpu04:2222: *common
        "gpu05":
          tuned: ~
    rack_b:
      hosts: gpu06
"""


def _handwritten(tmp: Path) -> Path:
    inv = _layered(tmp)
    (inv / "hosts.yml").write_text(HANDWRITTEN)
    (inv / "host_vars" / "gpu01.yml").unlink()
    return inv


@pytest.mark.parametrize(
    "source", ["layered", "handwritten", *sorted(p.name for p in (ROOT / "inventories").iterdir() if p.is_dir())]
)
def test_host_vars_equal_ansibles_variable_manager(source: str, tmp_path: Path) -> None:
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    made = {"layered": _layered, "handwritten": _handwritten}
    path = made[source](tmp_path) if source in made else ROOT / "inventories" / source
    inv = inventory.load(path)
    # The oracle is Ansible alone: its own loader parses the files, its own manager merges.
    stock = InventoryManager(loader=DataLoader(), sources=[str(inventory.hosts_file(path))])
    oracle = VariableManager(loader=stock._loader, inventory=stock)
    assert sorted(h.name for h in stock.get_hosts()) == sorted(inv.host_groups)
    for host in inv.host_groups:
        theirs = oracle.get_vars(host=stock.get_host(host), include_hostvars=False)
        ours = inv.host_vars(host)
        expected = {k: v for k, v in theirs.items() if k not in MAGIC}
        assert {k: v for k, v in ours.items() if k not in MAGIC} == expected, host
