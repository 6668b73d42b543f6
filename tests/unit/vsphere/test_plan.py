"""The GPU passthrough plan, from the settings and PCI device lists of real hosts' shape.

vcsim has no GPUs of its own; these tests feed the plan the device list in
lab/vcsim/ (see its "source" field for where the values come from), so the
pairing, limit and MMIO rules are checked without any vCenter.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuready.core.errors import BadInput
from gpuready.core.platforms.vsphere import PciDevice
from gpuready.core.platforms.vsphere_plan import Plan, make_plan, mmio_size_gib, vm_extra_config
from gpuready.core.settings import Vsphere
from gpuready.lab.vsphere import DEVICE_LIST

ROOT = Path(__file__).resolve().parents[3]
DEVICES = json.loads(DEVICE_LIST.read_text())
SEED = yaml.safe_load((ROOT / "inventories/vsphere-r750xa/group_vars/all/gpuready.yml").read_text())["gpuready"]
HOSTS = ["r750xa-01.lab.local", "r750xa-02.lab.local"]
# A non-GPU device next to the GPUs, as every real host has (an Intel chipset function).
CHIPSET = PciDevice(id="0000:00:00.0", vendor_id=0x8086, device_id=0x09A2, name="Ice Lake Memory Map/VT-d")


def recorded_devices() -> dict[str, PciDevice]:
    devices = {
        d["id"]: PciDevice(
            id=d["id"], vendor_id=d["vendor_id"] & 0xFFFF, device_id=d["device_id"] & 0xFFFF, name=d["device_name"]
        )
        for d in DEVICES["devices"]
    }
    return {**devices, CHIPSET.id: CHIPSET}


def seed_settings(**changes: object) -> Vsphere:
    return Vsphere.model_validate({**SEED["vsphere"], **changes})


def plan(settings: Vsphere) -> Plan:
    return make_plan(settings, HOSTS, dict.fromkeys(HOSTS, recorded_devices()))


@pytest.mark.parametrize(("memory", "size"), [(0, 0), (16, 32), (32, 64), (40, 128), (80, 256), (160, 512)])
def test_mmio_is_the_next_power_of_two_at_or_above_twice_the_gpu_memory(memory: int, size: int) -> None:
    assert mmio_size_gib(memory) == size


def test_seed_003_plan_pairs_gpus_and_sizes_mmio() -> None:
    p = plan(seed_settings())
    vms = {v.name: v for v in p.vms}
    assert [g.id for g in vms["gpuvm-01"].gpus] == ["0000:17:00.0", "0000:31:00.0"]
    assert vms["gpuvm-01"].nvlink_pair == ["0000:17:00.0", "0000:31:00.0"]
    assert vms["gpuvm-01"].gpus[0].model == "A100-PCIE-40GB"
    assert vms["gpuvm-01"].mmio_gib == 256  # 2 x A100 40 GB: 2 x 80 = 160 -> 256
    assert vms["gpuvm-04"].mmio_gib == 128 and vms["gpuvm-04"].nvlink_pair == []
    assert vms["gpuvm-01"].extra_config == {
        "pciPassthru.allowP2P": "true",
        "pciPassthru.RelaxACSforP2P": "true",
        "pciPassthru.use64bitMMIO": "TRUE",
        "pciPassthru.64bitMMIOSizeGB": "256",
    }
    hosts = {h.name: h.gpus for h in p.hosts}
    assert hosts["r750xa-02.lab.local"] == ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0"]


def test_extra_config_keys_are_the_ones_vsphere_knows() -> None:
    assert set(vm_extra_config(128)) == {
        "pciPassthru.allowP2P",
        "pciPassthru.RelaxACSforP2P",
        "pciPassthru.use64bitMMIO",
        "pciPassthru.64bitMMIOSizeGB",
    }


def _vm(name: str, host: str, gpus: list[str]) -> dict[str, object]:
    return {"name": name, "esxi_host": host, "gpus": gpus}


H1 = HOSTS[0]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"gpu_vms": [_vm("a", H1, ["0000:17:00.0", "0000:b1:00.0"])]},
            "splits the NVLink pair 0000:17:00.0 + 0000:31:00.0",
        ),
        ({"gpu_vms": [_vm("a", H1, ["0000:17:00.0", "0000:17:00.0"])]}, "a GPU is attached twice"),
        ({"gpu_vms": [_vm("a", H1, ["0000:17:00.0"]), _vm("b", H1, ["0000:17:00.0"])]}, "already attached to VM a"),
        (
            {"gpu_vms": [_vm("a", H1, ["0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0"])]},
            "4 GPUs exceed the limit of 2 per VM",
        ),
        ({"gpu_vms": [_vm("a", "esxi-99", ["0000:17:00.0"])]}, "ESXi host 'esxi-99' is not in the inventory"),
        ({"gpu_vms": [_vm("a", H1, ["0000:3b:00.0"])]}, "no PCI device 0000:3b:00.0"),
        ({"gpu_vms": [_vm("a", H1, ["0000:00:00.0"])]}, "not an NVIDIA GPU"),
        (
            {"gpu_vms": [_vm("a", H1, ["0000:17:00.0", "0000:31:00.0"])], "nvlink_pairs": {}},
            "no NVLink pairs are declared",
        ),
        ({"gpu_vms": [_vm("a", H1, ["0000:17:00.0"])], "gpu_models": {}}, "add it to gpuready.vsphere.gpu_models"),
        ({"gpu_vms": [_vm("a", H1, ["0000:17:00.0"]), _vm("a", H1, ["0000:31:00.0"])]}, "VM listed twice"),
        (
            {"nvlink_pairs": {H1: [["0000:17:00.0", "0000:31:00.0"], ["0000:31:00.0", "0000:b1:00.0"]]}},
            "0000:31:00.0 is in two NVLink pairs",
        ),
    ],
)
def test_bad_plans_are_refused_with_one_line(changes: dict[str, object], expected: str) -> None:
    with pytest.raises(BadInput) as caught:
        plan(seed_settings(**changes))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_single_gpu_vm_may_take_either_gpu_of_a_pair() -> None:
    p = plan(seed_settings(gpu_vms=[_vm("a", H1, ["0000:31:00.0"]), _vm("b", H1, ["0000:17:00.0"])]))
    assert [v.mmio_gib for v in p.vms] == [128, 128]


def test_settings_refuse_a_malformed_pci_address() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="not a PCI address"):
        seed_settings(gpu_vms=[_vm("a", H1, ["17:00.0"])])
