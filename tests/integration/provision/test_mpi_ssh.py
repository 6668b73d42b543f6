"""mpi_ssh applied for real to two Debian 12 roots: one key pair shared, authorised, host keys known, then removed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ModuleTmp, gpuready, require
from tests.integration.provision import debian_root as dr

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def nodes(module_tmp: ModuleTmp) -> tuple[dict[str, Path], Path]:
    ok, why = dr.prerequisites()
    require(ok, why)
    tmp = module_tmp("mpi")
    repo = dr.build_repo(tmp / "standin")
    roots = {name: dr.fresh_root(tmp / name, repo) for name in ("gpu01", "gpu02")}
    for root in roots.values():
        # What openssh-server's installation does on a real node: make the host keys.
        subprocess.run(["chroot", str(root), "ssh-keygen", "-A"], check=True, capture_output=True)
    inventory = dr.write_inventory(tmp / "inventory", roots, settings={"training": {"launcher": "ssh"}})
    return roots, inventory


def _run(inventory: Path, runs: Path, *args: str) -> tuple[Any, dict[str, Any]]:
    done = gpuready("provision", "cluster", "-i", str(inventory), "--artifacts", str(runs), "--tags", "mpi_ssh", *args)
    [summary] = runs.glob("*/summary.json")
    return done, json.loads(summary.read_text())


def test_one_key_pair_is_shared_authorised_and_host_keys_are_known(nodes: Any, tmp_path: Path) -> None:
    roots, inventory = nodes
    done, summary = _run(inventory, tmp_path / "first")
    assert done.returncode == 0, done.stdout + done.stderr
    private = {name: (root / "root/.ssh/id_ed25519_gpuready").read_text() for name, root in roots.items()}
    assert len(set(private.values())) == 1
    public = (roots["gpu01"] / "root/.ssh/id_ed25519_gpuready.pub").read_text().strip()
    for name, root in roots.items():
        assert public in (root / "root/.ssh/authorized_keys").read_text()
        assert oct((root / "root/.ssh/id_ed25519_gpuready").stat().st_mode & 0o777) == "0o600"
        known = (root / "etc/ssh/ssh_known_hosts").read_text()
        for other, other_root in roots.items():
            host_key = " ".join((other_root / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()[:2])
            assert f"{other} {host_key}" in known, (name, other)
        assert "IdentityFile /root/.ssh/id_ed25519_gpuready" in (root / "root/.ssh/config").read_text()
    # The private key must not reach the artifacts.
    secret = next(iter(private.values())).splitlines()[1]
    for path in (tmp_path / "first").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path

    again, summary = _run(inventory, tmp_path / "second")
    assert again.returncode == 0 and summary["metrics"]["changed"] == 0, summary["metrics"]

    removed, summary = _run(inventory, tmp_path / "removed", "--remove")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    for root in roots.values():
        assert not (root / "root/.ssh/id_ed25519_gpuready").exists()
        assert public not in (root / "root/.ssh/authorized_keys").read_text()
        assert "gpu01" not in (root / "etc/ssh/ssh_known_hosts").read_text()
