"""The one pyvmomi connection helper: every read and write of vCenter/ESXi goes through here.

Why it exists:
- pyvmomi's ``SmartConnect`` silently skips certificate verification for localhost,
  127.0.0.1 and ::1 unless it is handed an SSL context, so we always hand it one, verifying
  by default: a lab on loopback is then checked exactly like a real vCenter.
- vSphere tasks are polled with backoff up to a deadline, not forever.
- pyvmomi faults and socket/TLS errors become our one-line errors, once, here
  (bad credentials, refused connections, untrusted certificates: :class:`Unreachable`).

pyvmomi is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gpuready.core import redact
from gpuready.core.errors import BadInput, GpureadyError, Unreachable, shorten
from gpuready.core.role_defaults import nvidia_vendor_id

log = logging.getLogger(__name__)

#: The ESXi advanced option behind Address Translation Services (a kernel boot option).
ATS_OPTION = "VMkernel.Boot.atsSupport"


@dataclass(frozen=True)
class Target:
    """Where and how to log in. ``password`` is registered with redact when the target is made."""

    host: str
    port: int = 443
    user: str = ""
    password: str = ""
    verify_tls: bool = True
    #: A PEM bundle to trust instead of the system's (an internal CA, the lab's own certificate).
    ca_file: str = ""
    #: Per HTTP request (connect and read); long operations are tasks, polled by :func:`wait_for_task`.
    timeout_s: float = 60.0

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def password_from_env(variable: str) -> str:
    """The vCenter password from the environment (never from the inventory); registered as a secret."""
    value = os.environ.get(variable, "")
    if not value:
        raise BadInput(
            f"the vCenter password is not set: export {variable}=... (or put vcenter_password in "
            "Ansible Vault for provisioning)"
        )
    redact.register(value)
    return value


def ssl_context(verify: bool, ca_file: str = "") -> ssl.SSLContext:
    """Always a context: verifying (system CAs, or ``ca_file``) unless the user said insecure."""
    if not verify:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    try:
        return ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as e:
        raise BadInput(f"vsphere.ca_file {ca_file!r}: cannot load: {e}") from e


@contextmanager
def connect(target: Target) -> Iterator[Any]:
    """A logged-in ``vim.ServiceInstance``; logs out on exit."""
    si = open_session(target)
    answering = True
    try:
        yield si
    except (TimeoutError, ConnectionError) as e:
        answering = False
        raise Unreachable(
            f"vCenter {target.where} stopped answering ({shorten(e) or type(e).__name__}; each request may take "
            f"{target.timeout_s:g}s, gpuready.vsphere.request_timeout_s)"
        ) from e
    finally:
        if answering:  # a logout from a vCenter that stopped answering would only wait for another timeout
            try:
                from pyVim.connect import Disconnect

                Disconnect(si)
            except Exception as e:  # the session may already be gone; nothing to undo
                log.debug("logout from %s failed: %s", target.where, e)


def open_session(target: Target) -> Any:
    from pyVim.connect import SmartConnect
    from pyVmomi import vim

    redact.register(target.password)
    context = ssl_context(target.verify_tls, target.ca_file)
    try:
        # httpConnectionTimeout bounds each SOAP call; SmartConnect's version discovery before them opens its own
        # connections without a timeout (pyVim.connect.__GetElementTree), so those take the default socket timeout.
        with _default_socket_timeout(target.timeout_s):
            return SmartConnect(
                host=target.host,
                port=target.port,
                user=target.user,
                pwd=target.password,
                sslContext=context,
                httpConnectionTimeout=target.timeout_s,
            )
    except TimeoutError as e:
        raise Unreachable(
            f"vCenter {target.where} accepted the connection but did not answer within {target.timeout_s:g}s "
            "(gpuready.vsphere.request_timeout_s)"
        ) from e
    except vim.fault.InvalidLogin as e:
        raise Unreachable(f"vCenter {target.where} refused the login of {target.user!r}: wrong user or password") from e
    except ssl.SSLCertVerificationError as e:
        raise Unreachable(
            f"vCenter {target.where}: TLS certificate does not verify ({e.verify_message}); trust its "
            "CA with gpuready.vsphere.ca_file, or for a lab use --insecure or "
            "gpuready.vsphere.verify_tls: false"
        ) from e
    except ssl.SSLError as e:
        raise Unreachable(f"vCenter {target.where}: TLS failed: {shorten(e)}") from e
    except OSError as e:  # refused, timed out, name not resolved
        raise Unreachable(f"cannot reach vCenter {target.where}: {shorten(getattr(e, 'strerror', None) or e)}") from e
    except Exception as e:  # pyvmomi raises vmodl faults and plain exceptions for protocol problems
        raise translate(e, f"vCenter {target.where}") from e


@contextmanager
def _default_socket_timeout(seconds: float) -> Iterator[None]:
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


class VsphereFault(Unreachable):
    """vSphere answered a call with a fault (a task that failed, a refused change)."""


def translate(error: BaseException, what: str) -> GpureadyError:
    """One line for a pyvmomi fault or error."""
    from pyVmomi import vim, vmodl

    if isinstance(error, GpureadyError):
        return error
    if isinstance(error, vim.fault.InvalidLogin | vim.fault.NotAuthenticated):
        return Unreachable(f"{what}: not logged in (wrong user or password, or the session expired)")
    if isinstance(error, vim.fault.NoPermission):
        return VsphereFault(f"{what}: permission denied ({getattr(error, 'privilegeId', '') or 'no privilege'})")
    if isinstance(error, vmodl.MethodFault):
        message = getattr(error, "msg", "") or type(error).__name__.rsplit(".", 1)[-1]
        return VsphereFault(f"{what}: {shorten(redact.text(message))}")
    return VsphereFault(f"{what}: {shorten(redact.text(str(error)))}")


def wait_for_task(
    task: Any, what: str, timeout_s: float = 600.0, first_delay: float = 0.05, max_delay: float = 5.0
) -> Any:
    """Wait for a vSphere task with exponential backoff; its fault becomes a :class:`VsphereFault`."""
    from pyVmomi import vim

    delay = first_delay
    deadline = time.monotonic() + timeout_s
    while True:
        info = task.info
        if info.state == vim.TaskInfo.State.success:
            return info.result
        if info.state == vim.TaskInfo.State.error:
            raise translate(info.error, what)
        if time.monotonic() > deadline:
            raise VsphereFault(f"{what}: task {info.key} still {info.state} after {timeout_s:.0f}s")
        time.sleep(delay)
        delay = min(delay * 2, max_delay)


def objects(si: Any, kind: Any) -> list[Any]:
    """Every managed object of ``kind`` (vim.HostSystem, vim.VirtualMachine) under the root folder."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        return list(view.view)
    finally:
        view.Destroy()


def find_host(si: Any, name: str) -> Any:
    from pyVmomi import vim

    hosts = {h.name: h for h in objects(si, vim.HostSystem)}
    if name not in hosts:
        raise BadInput(f"ESXi host {name!r} is not known to vCenter (it has: {', '.join(sorted(hosts)) or 'none'})")
    return hosts[name]


def find_vm(si: Any, name: str) -> Any:
    from pyVmomi import vim

    vms = [v for v in objects(si, vim.VirtualMachine) if v.name == name]
    if not vms:
        raise BadInput(f"VM {name!r} is not known to vCenter")
    if len(vms) > 1:
        raise BadInput(f"VM name {name!r} is not unique in vCenter ({len(vms)} VMs)")
    return vms[0]


def host_option(host: Any, key: str) -> Any:
    """An advanced option's value on a host, or None when the host does not have it."""
    from pyVmomi import vim

    try:
        values = host.configManager.advancedOption.QueryView(name=key)
    except vim.fault.InvalidName:
        return None
    except Exception as e:
        raise translate(e, f"{host.name}: reading {key}") from e
    for option in values:
        if option.key == key:
            return option.value
    return None


@dataclass(frozen=True)
class PciDevice:
    """One PCI device of an ESXi host, as ``host.hardware.pciDevice`` reports it."""

    id: str
    vendor_id: int
    device_id: int
    name: str
    passthru_capable: bool = False
    passthru_enabled: bool = False
    passthru_active: bool = False

    @property
    def pci_id(self) -> str:
        """vendor:device in lower-case hex, as lspci -n prints it (10de:20f1)."""
        return f"{self.vendor_id & 0xFFFF:04x}:{self.device_id & 0xFFFF:04x}"


def pci_devices(host: Any) -> dict[str, PciDevice]:
    """The host's PCI devices by address, with their passthrough state."""
    passthru = {p.id: p for p in (host.config.pciPassthruInfo or [])} if host.config else {}
    devices = {}
    for d in host.hardware.pciDevice or []:
        p = passthru.get(d.id)
        devices[d.id] = PciDevice(
            id=d.id,
            vendor_id=d.vendorId & 0xFFFF,
            device_id=d.deviceId & 0xFFFF,
            name=d.deviceName or "",
            passthru_capable=bool(p and p.passthruCapable),
            passthru_enabled=bool(p and p.passthruEnabled),
            passthru_active=bool(p and p.passthruActive),
        )
    return devices


def vm_extra_config(vm: Any) -> dict[str, str]:
    return {o.key: str(o.value) for o in (vm.config.extraConfig or [])}


def vm_gpu_ids(vm: Any) -> list[str]:
    """PCI addresses of the NVIDIA devices passed through to the VM, in device order."""
    from pyVmomi import vim

    ids = []
    for device in vm.config.hardware.device:
        if isinstance(device, vim.vm.device.VirtualPCIPassthrough):
            backing = device.backing
            # Other passthrough devices (NICs) are not GPUs and not gpuready's business.
            if (
                isinstance(backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
                and (backing.vendorId & 0xFFFF) == nvidia_vendor_id()
            ):
                ids.append(backing.id)
    return ids
