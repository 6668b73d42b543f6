"""gpuready.core.platforms.vsphere against vcsim: TLS verified on loopback, faults and task errors as one line."""

from __future__ import annotations

import pytest

from gpuready.core.errors import Unreachable
from gpuready.core.platforms.vsphere import Target, VsphereFault, connect, find_vm, wait_for_task
from tests.integration.vsphere.conftest import PASSWORD, Vcsim

USER = "administrator@vsphere.local"


def test_plain_smartconnect_skips_verification_on_loopback(vcsim: Vcsim) -> None:
    # Why the helper always passes an SSL context: without one, pyvmomi trusts any certificate
    # on 127.0.0.1, so a loopback test would prove nothing about TLS.
    from pyVim.connect import Disconnect, SmartConnect

    si = SmartConnect(host="127.0.0.1", port=vcsim.port, user=USER, pwd=PASSWORD)
    Disconnect(si)


def test_helper_verifies_the_certificate_on_loopback(vcsim: Vcsim) -> None:
    with (
        pytest.raises(Unreachable, match="TLS certificate does not verify"),
        connect(Target("127.0.0.1", vcsim.port, USER, PASSWORD)),
    ):
        pass
    with connect(Target("127.0.0.1", vcsim.port, USER, PASSWORD, ca_file=str(vcsim.cert))) as si:
        assert si.content.about.apiType == "VirtualCenter"


def test_a_failed_task_becomes_one_line(vcsim: Vcsim) -> None:
    with connect(Target("127.0.0.1", vcsim.port, USER, PASSWORD, ca_file=str(vcsim.cert))) as si:
        vm = find_vm(si, "DC0_H0_VM0")
        assert vm.runtime.powerState == "poweredOn"
        with pytest.raises(VsphereFault) as caught:
            wait_for_task(vm.PowerOnVM_Task(), "DC0_H0_VM0: power on", timeout_s=30)
    assert str(caught.value).startswith("DC0_H0_VM0: power on: ")
    assert "\n" not in str(caught.value)
