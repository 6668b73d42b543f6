"""A refusal names the next step: the inventory meant, the hosts there are, and says the cause once."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.conftest import ROOT, gpuready


def test_a_mistyped_inventory_names_the_closest_one_and_a_missing_one_how_to_get_the_examples(tmp_path: Path) -> None:
    done = gpuready("inventory", "check", "-i", "inventories/locl")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "gpuready: error: inventories/locl: inventory not found (did you mean inventories/local?)\n"
    done = gpuready("inventory", "check", "-i", "inventories/local", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "gpuready: error: inventories/local: inventory not found"
        " (gpuready inventory init writes the example inventories into ./inventories)\n"
    )


def test_a_limit_that_matches_no_host_lists_the_groups_hosts_and_the_closest(tmp_path: Path) -> None:
    inventory = tmp_path / "site"
    shutil.copytree(ROOT / "inventories" / "local", inventory)
    hosts = [f"gn{i:02d}" for i in range(1, 8)]
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "gpu_nodes": {
                    "hosts": {h: {"ansible_connection": "local", "gpuready_node_class": "this-machine"} for h in hosts}
                }
            }
        )
    )
    done = gpuready("validate", "gpu-node", "-i", str(inventory), "--limit", "gn1", "--artifacts", str(tmp_path / "r"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.rstrip().endswith(
        "matches no host of group 'gpu_nodes' in " + str(inventory) + " (its hosts: gn01, gn02, gn03, gn04, gn05"
        " and 2 more; did you mean gn01?)"
    ), done.stderr


def test_a_missing_kubeconfig_is_said_once(tmp_path: Path) -> None:
    # The inventory names ~/.kube/config; a home without one.
    missing = tmp_path / ".kube" / "config"
    done = gpuready(
        "validate",
        "cluster",
        "-i",
        "inventories/openshift-311",
        "--artifacts",
        str(tmp_path / "runs"),
        env={"HOME": str(tmp_path)},
    )
    assert done.returncode == 3, done.stdout + done.stderr
    said = f"kubeconfig {missing} not found"
    assert (done.stdout + done.stderr).count(said) == 1, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"gpuready: error: {said}")
    assert "validate cluster: ERROR" in done.stdout
    # The run's record keeps why it stopped, for `report show` later.
    shown = gpuready("report", "show", "--artifacts", str(tmp_path / "runs"))
    assert f"aborted: {said}" in " ".join(shown.stdout.split()), shown.stdout
