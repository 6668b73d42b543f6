"""Lab component ``vsphere``: a simulated vCenter (VMware's vcsim) with GPU hosts and VMs.

vcsim (gpuready's main.go around govmomi's simulator, gomod/govmomi/vcsim/) and VMware's govc
(the independent client the tests read back with) are built from the ``github.com/vmware/govmomi``
module at :data:`GOVMOMI_VERSION`, once, into the user's cache dir (:mod:`gpuready.lab.gobuild`).
vcsim serves HTTPS with a certificate made here and checks the password, which is written to
``<lab>/vsphere/password`` (mode 0600) and never to the inventory:

    export GPUREADY_VCENTER_PASSWORD=$(cat gpuready-lab/vsphere/password)

Each simulated ESXi host carries four simulated A100 PCIe 40GB GPUs (two NVLink pairs) from the
device list in vcsim/r750xa-4xa100-pci.json (where it comes from is in the file), and two VMs.
The tests use the same functions.
"""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import socket
from importlib.resources import files
from pathlib import Path
from typing import Any

from gpuready.core.errors import BadInput, Unreachable
from gpuready.lab import Component, Lab, stop_pids, wait_for_port
from gpuready.lab.gobuild import GoBuild
from gpuready.lab.pki import alternative_names, write_private

#: The GPUs every simulated host gets (see the file's "source" for where the values come from).
DEVICE_LIST = Path(str(files("gpuready.lab") / "vcsim" / "r750xa-4xa100-pci.json"))
USER = "administrator@vsphere.local"
PASSWORD_ENV = "GPUREADY_VCENTER_PASSWORD"
#: The govmomi release (github.com/vmware/govmomi tags); gomod/govmomi/go.mod pins the same one.
GOVMOMI_VERSION = "v0.52.0"
GOVMOMI = GoBuild(
    name="govmomi",
    version=GOVMOMI_VERSION,
    wrapper="govmomi",
    commands={"vcsim": "gpuready.local/lab/govmomi/vcsim", "govc": "gpuready.local/lab/govmomi/govc"},
    # What govmomi's release build sets, so `govc version` names the release.
    ldflags=f"-X github.com/vmware/govmomi/cli/flags.BuildVersion={GOVMOMI_VERSION}",
)


def build_vcsim() -> Path:
    """gpuready's vcsim, built once per govmomi release and main.go (cached); returns the binary."""
    GOVMOMI.ensure()
    return GOVMOMI.binary("vcsim")


def build_govc() -> Path:
    """VMware's govc from the same govmomi release (cached); returns the binary."""
    GOVMOMI.ensure()
    return GOVMOMI.binary("govc")


def make_certificate(folder: Path, names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> tuple[Path, Path]:
    """A self-signed certificate for the simulator, valid for ``names``: (cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuready simulated vCenter")])
    now = _dt.datetime.now(_dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=30))
        .add_extension(alternative_names(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / "vcsim-cert.pem", folder / "vcsim-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(
        key_file,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    return cert_file, key_file


def write_password(folder: Path, password: str | None = None) -> Path:
    """The simulator's password in a file only its owner reads."""
    path = folder / "password"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password or secrets.token_urlsafe(18))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vcsim_argv(
    binary: Path,
    port: int,
    *,
    hosts: int = 2,
    vms: int = 2,
    password_file: Path | None = None,
    cert: Path | None = None,
    key: Path | None = None,
    gpus: Path | None = DEVICE_LIST,
    extra: tuple[str, ...] = (),
) -> list[str]:
    argv = [str(binary), "-listen", f"127.0.0.1:{port}", "-hosts", str(hosts), "-vms", str(vms), "-user", USER, *extra]
    if password_file:
        argv += ["-password-file", str(password_file)]
    if cert and key:
        argv += ["-cert", str(cert), "-key", str(key)]
    if gpus:
        argv += ["-gpus", str(gpus)]
    return argv


def host_names(hosts: int) -> list[str]:
    """vcsim's names for standalone hosts and their VMs."""
    return [f"DC0_H{i}" for i in range(hosts)]


def lab_inventory(
    port: int, hosts: int, ca_file: str = "", verify_tls: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hosts.yml, gpuready settings) for the simulated site: per host, VM0 gets the first NVLink pair,
    VM1 the second pair on even hosts and one GPU on odd ones (Dell's vSphere study's mix of 2- and 1-GPU VMs)."""
    import json

    pairs = [tuple(p) for p in json.loads(DEVICE_LIST.read_text())["nvlink_pairs"]]
    names = host_names(hosts)
    gpu_vms = []
    for i, host in enumerate(names):
        gpu_vms.append({"name": f"{host}_VM0", "esxi_host": host, "gpus": list(pairs[0])})
        gpu_vms.append(
            {"name": f"{host}_VM1", "esxi_host": host, "gpus": list(pairs[1]) if i % 2 == 0 else [pairs[1][0]]}
        )
    inventory = {
        "vcenter": {"hosts": {"vcsim": {"ansible_host": "127.0.0.1", "ansible_connection": "local"}}},
        "esxi_hosts": {"hosts": dict.fromkeys(names)},
    }
    settings = {
        "node_classes": {
            "vm-a100-x2": {
                "gpu_model": "NVIDIA A100-PCIE-40GB",
                "gpu_count": 2,
                "gpu_memory_gib": 40,
                "p2p_pairs": [[0, 1]],
            }
        },
        "driver": {"branch": "580"},
        "vsphere": {
            "port": port,
            "user": USER,
            "password_env": PASSWORD_ENV,
            "verify_tls": verify_tls,
            "ca_file": ca_file,
            "allow_power_off": False,
            "max_gpus_per_vm": 2,
            "nvlink_pairs": {h: [list(p) for p in pairs] for h in names},
            "gpu_vms": gpu_vms,
        },
    }
    return inventory, settings


def _wait_until_serving(pid: int, log: Path, timeout: float = 60) -> None:
    """Until vcsim says it listens: a port that answers may be someone else's (the port was taken)."""
    import time

    deadline = time.monotonic() + timeout
    while "vcsim listening on" not in log.read_text(errors="replace"):
        try:
            exited = os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            exited = True
        if exited:
            raise Unreachable(f"lab vsphere: vcsim stopped at start (port taken?); see {log}")
        if time.monotonic() > deadline:
            raise Unreachable(f"lab vsphere: vcsim did not start in {timeout:.0f}s; see {log}")
        time.sleep(0.1)


class VsphereLab(Component):
    name = "vsphere"
    description = "simulated vCenter (vcsim): ESXi hosts with simulated A100 PCIe GPUs in NVLink pairs, and VMs"

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        known = {"port", "hosts", "vms"}
        if set(options) - known:
            raise BadInput(
                f"lab vsphere: unknown option(s) {', '.join(sorted(set(options) - known))} "
                f"(known: {', '.join(sorted(known))})"
            )
        try:
            port = int(options.get("port") or free_port())
            hosts = int(options.get("hosts", 2))
            vms = int(options.get("vms", 2))
        except ValueError as e:
            raise BadInput(f"lab vsphere: port, hosts and vms are numbers ({e})") from e
        if hosts < 1 or vms < 2:
            raise BadInput("lab vsphere: at least 1 host and 2 VMs per host")
        folder = lab.component_dir(self.name)
        binary = build_vcsim()
        cert, key = make_certificate(folder)
        password_file = write_password(folder)
        pid = lab.spawn(
            self.name, vcsim_argv(binary, port, hosts=hosts, vms=vms, password_file=password_file, cert=cert, key=key)
        )
        try:
            _wait_until_serving(pid, folder / f"{self.name}.log")
            wait_for_port("127.0.0.1", port, timeout=30)
        except Unreachable:
            stop_pids([pid])
            raise
        # The inventory trusts exactly the lab's certificate: TLS is verified in the lab as on a real site.
        inventory, settings = lab_inventory(port, hosts, ca_file=os.path.relpath(cert, lab.inventory_dir(self.name)))
        path = lab.write_inventory(self.name, inventory, settings)
        return {
            "pids": [pid],
            "inventory": str(path),
            "url": f"https://127.0.0.1:{port}/sdk",
            "password_file": str(password_file),
        }

    def build(self) -> list[Path]:
        return [GOVMOMI.ensure()]

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        inventory = state.get("inventory", "?")
        return [
            f"# vCenter {state.get('url')}, user {USER}; the password is in {state.get('password_file')}:",
            f'export {PASSWORD_ENV}="$(cat {state.get("password_file")})"',
            f"gpuready provision cluster -i {inventory} --tags vsphere --check --diff   # what would change",
            f"gpuready provision cluster -i {inventory} --tags vsphere --allow-power-off   # the lab's VMs run",
            f"gpuready validate vsphere -i {inventory}",
        ]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        line = super().status(lab, state)
        if line.startswith("running"):
            line += f"; {state.get('url')}; password: export {PASSWORD_ENV}=$(cat {state.get('password_file')})"
        return line
