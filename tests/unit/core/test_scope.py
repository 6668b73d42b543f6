"""An option that chooses part of a run never widens it: empty lists and patterns that match every host are
refused, one line and exit 2, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import gpuready, provision_cluster
from tests.playbooks import site
from tests.unit.core.test_bad_inputs import make_inventory

LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
TWO_HOSTS = {"gpu_nodes": {"hosts": {n: LOCAL for n in ("gpu01", "bob")}}}


def marking_playbooks(tmp_path: Path) -> tuple[Path, Path]:
    """A site.yml whose one play (tag ``gpu``) leaves a file per host it ran on: what a run reached."""
    marks = tmp_path / "reached"
    marks.mkdir()
    play = {
        "name": "Mark | Leave a mark",
        "hosts": "all",
        "gather_facts": False,
        "tags": ["gpu"],
        "tasks": [
            {
                "name": "Mark | Touch",
                "ansible.builtin.file": {"path": f"{marks}/{{{{ inventory_hostname }}}}", "state": "touch"},
            }
        ],
    }
    return site(tmp_path, play), marks


def one_line(done: object, expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


@pytest.mark.parametrize("tags", ["", ",", " , "])
def test_provision_with_empty_tags_is_refused_and_runs_nothing(tags: str, tmp_path: Path, artifacts: Path) -> None:
    playbooks, marks = marking_playbooks(tmp_path)
    inv = make_inventory(tmp_path, hosts=TWO_HOSTS)
    done = provision_cluster(inv, artifacts, "--tags", tags, env={"GPUREADY_PLAYBOOKS": str(playbooks)})
    one_line(done, "--tags")
    assert "names nothing" in done.stderr
    assert list(marks.iterdir()) == []


@pytest.mark.parametrize("only", ["", ",", ", ,"])
def test_gpu_node_with_empty_only_is_refused(only: str, tmp_path: Path, artifacts: Path) -> None:
    inv = make_inventory(tmp_path)
    done = gpuready("validate", "gpu-node", "-i", str(inv), "--artifacts", str(artifacts), "--only", only)
    one_line(done, "--only")
    assert "names nothing" in done.stderr
    assert list(artifacts.iterdir()) == []


@pytest.mark.parametrize("pattern", ["~^(a|e)", "~al", "a*", "*l*", "gpu01,~^a", "a?l"])
def test_a_limit_that_matches_the_group_all_is_refused(pattern: str, tmp_path: Path, artifacts: Path) -> None:
    playbooks, marks = marking_playbooks(tmp_path)
    inv = make_inventory(tmp_path, hosts=TWO_HOSTS)
    done = provision_cluster(inv, artifacts, "--limit", pattern, env={"GPUREADY_PLAYBOOKS": str(playbooks)})
    one_line(done, "also matches the group 'all'")
    assert list(marks.iterdir()) == []


@pytest.mark.parametrize(
    ("pattern", "chosen"),
    [("~^b", ["bob"]), ("gpu0*", ["gpu01"]), ("all:!bob", ["gpu01"]), ("*", ["bob", "gpu01"]), ("!~^a", [])],
)
def test_a_limit_that_names_hosts_chooses_those(pattern: str, chosen: list[str], tmp_path: Path) -> None:
    """What the refusal lets through: patterns anchored to host or group names, 'all' and '*' themselves, and
    exclusions (one that leaves no host is refused for that reason, not for matching 'all')."""
    from gpuready.core.errors import BadInput
    from gpuready.core.inventory import load

    inventory = load(make_inventory(tmp_path, hosts=TWO_HOSTS))
    if chosen:
        assert sorted(inventory.limit(pattern)) == chosen
    else:
        with pytest.raises(BadInput, match="matches no host"):
            inventory.limit(pattern)
