"""vcsim for the vSphere tests: built once per govmomi release (cached in the user's cache dir), started per module.

vcsim is VMware's own simulator (govmomi), so sessions, the property collector, tasks,
VM reconfiguration and power are the real protocol over a real socket, with TLS and a
checked password. What stock vcsim lacks -- GPUs on the hosts' PCI bus and a PCI
passthrough system -- our main.go adds from the device list (lab/gomod/govmomi/vcsim/);
a real host's passthrough behaviour beyond that (reboots, IOMMU groups) is not simulated.
What the tests read back goes through VMware's govc from the same release, not gpuready's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ModuleTmp, require

PASSWORD = "vc-Test-pw-4711"


@pytest.fixture(scope="session")
def vcsim_binary() -> Path:
    from gpuready.core.errors import Unreachable
    from gpuready.lab.gobuild import GO_FALLBACK
    from gpuready.lab.vsphere import build_vcsim

    require(shutil.which("go") or GO_FALLBACK.exists(), "Go is not installed (https://go.dev/dl/)")
    try:
        return build_vcsim()
    except Unreachable as e:
        pytest.fail(str(e))


@dataclass
class Vcsim:
    port: int
    cert: Path
    folder: Path
    #: VMware's govc, from the same govmomi build as vcsim.
    govc_binary: Path
    #: The vcsim process (to stop and continue it: a vCenter that hangs).
    pid: int = 0

    def run_govc(self, *args: str) -> str:
        """``govc ARGS`` against this vcsim, its output; no session is kept between calls."""
        env = {
            **os.environ,
            "GOVC_URL": f"https://127.0.0.1:{self.port}/sdk",
            "GOVC_USERNAME": "administrator@vsphere.local",
            "GOVC_PASSWORD": PASSWORD,
            "GOVC_TLS_CA_CERTS": str(self.cert),
            "GOVC_PERSIST_SESSION": "false",
            "GOVMOMI_HOME": str(self.folder / "govmomi-home"),
        }
        done = subprocess.run(
            [str(self.govc_binary), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, f"govc {' '.join(args)}: {done.stderr}"
        return done.stdout

    def govc(self, command: str, *args: str) -> Any:
        """``govc COMMAND -json ARGS``, parsed."""
        return json.loads(self.run_govc(command, "-json", *args))

    def collect(self, path: str, *properties: str) -> dict[str, Any]:
        """Properties of one managed object (govc object.collect), by name."""
        return {c["name"]: c["val"] for c in self.govc("object.collect", path, *properties)}

    def find(self, kind: str) -> list[str]:
        """Inventory paths of every host (``h``) or VM (``m``)."""
        return self.run_govc("find", "/", "-type", kind).split()

    def ats(self) -> dict[str, Any]:
        """Each host's VMkernel.Boot.atsSupport, by host name."""
        return {
            path.rsplit("/", 1)[-1]: self.govc("host.option.ls", "-host", path, "VMkernel.Boot.atsSupport")[0]["value"]
            for path in self.find("h")
        }

    def inventory(
        self,
        name: str = "inv",
        *,
        ca_file: str | None = None,
        port: int | None = None,
        extra_hosts: tuple[str, ...] = (),
        **vsphere: Any,
    ) -> Path:
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
        return SmartConnect(
            host="127.0.0.1", port=self.port, user="administrator@vsphere.local", pwd=PASSWORD, sslContext=context
        )


@pytest.fixture(scope="module")
def vcsim(vcsim_binary: Path, module_tmp: ModuleTmp) -> Iterator[Vcsim]:
    yield from start_vcsim(vcsim_binary, module_tmp("vcsim"))


def start_vcsim(binary: Path, folder: Path, extra: tuple[str, ...] = ()) -> Iterator[Vcsim]:
    """vcsim on a free loopback port, TLS with a certificate made here, the password checked."""
    from gpuready.lab import wait_for_port
    from gpuready.lab.vsphere import build_govc, free_port, make_certificate, vcsim_argv, write_password

    cert, key = make_certificate(folder)
    password_file = write_password(folder, PASSWORD)
    port = free_port()
    log = (folder / "vcsim.log").open("w")
    process = subprocess.Popen(
        vcsim_argv(binary, port, password_file=password_file, cert=cert, key=key, extra=extra),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port("127.0.0.1", port, timeout=30)
        yield Vcsim(port=port, cert=cert, folder=folder, govc_binary=build_govc(), pid=process.pid)
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


def provision(inventory: str | Path, artifacts: Path, env: dict[str, str], *flags: str) -> Any:
    """`gpuready provision cluster --tags vsphere FLAGS` against an inventory of the simulated site."""
    from tests.conftest import gpuready

    args = ["provision", "cluster", "-i", str(inventory), "--tags", "vsphere", *flags]
    return gpuready(*args, "--artifacts", str(artifacts), env=env)


def password_in_vault(inventory: Path, tmp_path: Path) -> dict[str, str]:
    """Put the vCenter password in the inventory as an Ansible Vault string (ansible-vault encrypt_string, into
    group_vars/vcenter/vault.yml); the environment of a run that reads it from there, not from the environment."""
    vault_password = tmp_path / "vault-password"
    vault_password.write_text("a-vault-password")
    vault = str(Path(sys.executable).parent / "ansible-vault")
    encrypted = subprocess.run(
        [vault, "encrypt_string", "--vault-password-file", str(vault_password), PASSWORD, "--name", "vcenter_password"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    (inventory / "group_vars" / "vcenter").mkdir(parents=True)
    (inventory / "group_vars" / "vcenter" / "vault.yml").write_text(encrypted)
    return {"GPUREADY_VCENTER_PASSWORD": "", "ANSIBLE_VAULT_PASSWORD_FILE": str(vault_password)}
