"""A host range is counted before Ansible expands it: one past the limit is one line, exit 2, under a memory cap."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.unit.core.test_bad_inputs import make_inventory

#: Address space for the command: several times what an inventory check of a few hosts needs (Python, Ansible,
#: pydantic), far below the ten gigabytes a hundred million host names take.
MEMORY_CAP = 3 * 2**30


def capped(*args: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    return subprocess.run(
        [sys.executable, "-m", "gpuready.core.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        preexec_fn=limit,
    )


def test_a_range_of_a_hundred_million_hosts_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    inv = make_inventory(tmp_path, hosts="gpu_nodes:\n  hosts:\n    gpu[00000000:99999999]:\n")
    done = capped("inventory", "check", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "gpuready: error: inv/hosts.yml: host range 'gpu[00000000:99999999]' expands to 100,000,000 hosts; "
        "at most 100,000 hosts may come from ranges (list more in hosts.yml, or split the inventory)"
    ]


def test_ranges_are_counted_together_across_groups(tmp_path: Path) -> None:
    half = 100_000 // 2 + 1  # the documented limit (docs/inventories.md)
    hosts = {
        "gpu_nodes": {
            "hosts": {f"a[1:{half}]": None},
            "children": {"rack2": {"hosts": {f"b[a:z]-[1:{half // 26 + 1}]": None}}},
        }
    }
    inv = make_inventory(tmp_path, hosts=yaml.safe_dump(hosts))
    done = capped("inventory", "check", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "from ranges in all" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["gpu[01:64]", "r[a:c]-n[1:8:2]", "n[0:9:3]", "x[:4]", "z[X:Z]", "q[1:3]-[b:d:2]"])
def test_the_count_is_what_ansible_expands_to(name: str) -> None:
    from ansible.plugins.inventory import detect_range, expand_hostname_range

    from gpuready.core.inventory import _range_size

    names = [name]
    while any(detect_range(n) for n in names):
        names = [m for n in names for m in (expand_hostname_range(n) if detect_range(n) else [n])]
    assert _range_size(name) == len(names)
