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
            {"gpuready": {"node_classes": {"v100": {"gpu_model": "x", "gpu_count": 1}}, "driver": {"branch": "550"}}}
        )
    )
    (inv / "group_vars" / "all" / "site.yml").write_text(yaml.safe_dump({"a": "group_vars all", "e": "group_vars all"}))
    (inv / "group_vars" / "rack_a" / "rack.yml").write_text(
        yaml.safe_dump({"c": "group_vars rack_a", "e": "group_vars rack_a"})
    )
    (inv / "host_vars" / "gpu01.yml").write_text(yaml.safe_dump({"d": "host_vars gpu01", "f": 1}))
    return inv


@pytest.mark.parametrize("source", ["layered", *sorted(p.name for p in (ROOT / "inventories").iterdir() if p.is_dir())])
def test_host_vars_equal_ansibles_variable_manager(source: str, tmp_path: Path) -> None:
    from ansible.vars.manager import VariableManager

    path = _layered(tmp_path) if source == "layered" else ROOT / "inventories" / source
    inv = inventory.load(path)
    oracle = VariableManager(loader=inv._manager._loader, inventory=inv._manager)
    for host in inv.host_groups:
        theirs = oracle.get_vars(host=inv._manager.get_host(host), include_hostvars=False)
        ours = inv.host_vars(host)
        expected = {k: v for k, v in theirs.items() if k not in MAGIC}
        assert {k: v for k, v in ours.items() if k not in MAGIC} == expected, host
