"""vcsim for the vSphere tests: built once per version (cached in the user's cache dir), started per module.

vcsim is VMware's own simulator (govmomi), so sessions, the property collector, tasks,
VM reconfiguration and power are the real protocol over a real socket, with TLS and a
checked password. What stock vcsim lacks -- GPUs on the hosts' PCI bus and a PCI
passthrough system -- our main.go adds from the device list beside it (core/lab/vcsim/);
a real host's passthrough behaviour beyond that (reboots, IOMMU groups) is not simulated.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require

PASSWORD = "vc-Test-pw-4711"


@pytest.fixture(scope="session")
def vcsim_binary() -> Path:
    from gpuready.core.errors import Unreachable
    from gpuready.lab.vsphere import build_vcsim

    require(shutil.which("go"), "Go is not installed (scripts/install-system-deps: golang-go)")
    require(Path("/usr/share/gocode/src/github.com/vmware/govmomi/simulator").is_dir(),
            "govmomi sources missing (scripts/install-system-deps: golang-github-vmware-govmomi-dev)")
    try:
        return build_vcsim()
    except Unreachable as e:
        pytest.fail(str(e))


@dataclass
class Vcsim:
    port: int
    cert: Path
    folder: Path

    def inventory(self, name: str = "inv", *, ca_file: str | None = None, port: int | None = None,
                  extra_hosts: tuple[str, ...] = (), **vsphere: Any) -> Path:
        """A site inventory for this vcsim (the lab's layout); ``vsphere`` keys replace settings."""
        from gpuready.lab.vsphere import lab_inventory

        folder = self.folder / name
        hosts, settings = lab_inventory(port or self.port, 2, ca_file=str(self.cert) if ca_file is None else ca_file)
        hosts["esxi_hosts"]["hosts"].update(dict.fromkeys(extra_hosts))
        settings["vsphere"].update(vsphere)
        (folder / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
        (folder / "hosts.yml").write_text(yaml.safe_dump(hosts))
        (folder / "group_vars" / "all" / "gpuready.yml").write_text(yaml.safe_dump({"gpuready": settings}))
        return folder

    def connect(self) -> Any:
        """Plain pyvmomi, not our helper: what the tests read back is independent of our code."""
        import ssl

        from pyVim.connect import SmartConnect

        context = ssl.create_default_context(cafile=str(self.cert))
        return SmartConnect(host="127.0.0.1", port=self.port, user="administrator@vsphere.local", pwd=PASSWORD,
                            sslContext=context)


@pytest.fixture(scope="module")
def vcsim(vcsim_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vcsim]:
    yield from start_vcsim(vcsim_binary, tmp_path_factory.mktemp("vcsim"))


def start_vcsim(binary: Path, folder: Path, extra: tuple[str, ...] = ()) -> Iterator[Vcsim]:
    """vcsim on a free loopback port, TLS with a certificate made here, the password checked."""
    from gpuready.lab import wait_for_port
    from gpuready.lab.vsphere import free_port, make_certificate, vcsim_argv, write_password

    cert, key = make_certificate(folder)
    password_file = write_password(folder, PASSWORD)
    port = free_port()
    log = (folder / "vcsim.log").open("w")
    process = subprocess.Popen(vcsim_argv(binary, port, password_file=password_file, cert=cert, key=key, extra=extra),
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port("127.0.0.1", port, timeout=30)
        yield Vcsim(port=port, cert=cert, folder=folder)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def env() -> dict[str, str]:
    """The environment a user of the simulated site has: the vCenter password exported."""
    return {"GPUREADY_VCENTER_PASSWORD": PASSWORD}
