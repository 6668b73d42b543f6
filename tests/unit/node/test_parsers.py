"""The parsers read the recorded real nvidia-smi output and the replayed profiles built from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.lab import replay
from gpuready.validate.node import nvsmi, tool_output, xid

RECORDED = replay.RECORDED


def test_recorded_a100_xml() -> None:
    log = nvsmi.parse_xml((RECORDED / "a100-sxm4-80gb-535.54.03.q.xml").read_text())
    assert log.driver_version == "535.54.03"
    [gpu] = log.gpus
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.bus_id == "00000000:01:00.0"
    assert gpu.minor == 1
    assert gpu.persistence == "Disabled"
    assert gpu.volatile_uncorrectable == {"sram_uncorrectable": 0, "dram_uncorrectable": 0}
    assert (gpu.retired_pending, gpu.remapped_pending, gpu.slowdowns) == (False, False, [])
    assert gpu.mig_enabled
    assert (gpu.pcie_max_gen, gpu.pcie_device_max_gen, gpu.pcie_width, gpu.pcie_max_width) == (4, 4, 16, 16)


def test_older_schema_throttle_reasons_and_double_bit_counts() -> None:
    xml = """<nvidia_smi_log><driver_version>418.40.04</driver_version><gpu id="0000:1A:00.0">
      <product_name>Tesla V100-SXM2-32GB</product_name><minor_number>0</minor_number>
      <persistence_mode>Enabled</persistence_mode>
      <clocks_throttle_reasons><clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown>
      </clocks_throttle_reasons>
      <ecc_errors><volatile><single_bit><total>5</total></single_bit><double_bit><total>3</total></double_bit>
      </volatile></ecc_errors>
      <retired_pages><pending_retirement>Yes</pending_retirement></retired_pages></gpu></nvidia_smi_log>"""
    [gpu] = nvsmi.parse_xml(xml).gpus
    assert gpu.slowdowns == ["hw_slowdown"]
    assert gpu.volatile_uncorrectable == {"double_bit_total": 3}
    assert gpu.retired_pending


@pytest.mark.parametrize("text", ["", "not xml", "<other/>"])
def test_bad_xml_is_a_parse_error(text: str) -> None:
    with pytest.raises(nvsmi.ParseError):
        nvsmi.parse_xml(text)


def test_query_csv_checks_columns() -> None:
    rows = nvsmi.parse_query_csv("0, Tesla V100-SXM2-32GB, 00000000:1A:00.0\n", ["index", "name", "pci.bus_id"])
    assert rows == [{"index": "0", "name": "Tesla V100-SXM2-32GB", "pci.bus_id": "00000000:1A:00.0"}]
    with pytest.raises(nvsmi.ParseError):
        nvsmi.parse_query_csv("0, x\n", ["index", "name", "pci.bus_id"])


def test_lsmod_xid_p2p_and_nvlink() -> None:
    assert {"nvidia", "nvidia_uvm"} <= nvsmi.parse_lsmod(replay.LSMOD_NVIDIA)
    assert "nvidia" not in nvsmi.parse_lsmod(replay.LSMOD_NOUVEAU)
    ecc = replay.PROFILES["ecc-errors"]
    [event] = xid.events(replay.dmesg(ecc))
    assert (event.code, event.kind, event.seconds) == (48, "hardware", 8123.456789)
    assert xid.events(replay.dmesg(replay.PROFILES["v100-x4"])) == []
    matrix = nvsmi.parse_p2p_matrix(replay.p2p_matrix(replay.PROFILES["a100-x4"]))
    assert (matrix[(0, 1)], matrix[(2, 3)], matrix[(0, 2)]) == ("OK", "OK", "CNS")
    links = nvsmi.parse_nvlink_status(replay.nvlink_status(replay.PROFILES["nvlink-down"]))
    assert sum(links[5].values()) == 17 and links[5][3] is False
    assert all(sum(links[g].values()) == 18 for g in links if g != 5)


@pytest.mark.parametrize("name", sorted(replay.PROFILES))
def test_every_profile_replays_parseable_outputs(name: str, tmp_path: Path) -> None:
    profile = replay.PROFILES[name]
    replay.build(name, tmp_path)
    log = nvsmi.parse_xml((tmp_path / "data" / "q.xml").read_text())
    assert len(log.gpus) == profile.count - len(profile.missing_gpus)
    assert {g.name for g in log.gpus} == {replay.MODELS[profile.model].name}
    assert log.driver_version == profile.driver
    rows = nvsmi.parse_query_csv((tmp_path / "data" / "query.csv").read_text(), replay.QUERY_FIELDS)
    assert [r["pci.bus_id"] for r in rows] == [g.bus_id for g in log.gpus]


def test_profile_names() -> None:
    assert replay.profile_names("v100-x4,h100-x8*3") == ["v100-x4"] + ["h100-x8"] * 3
    with pytest.raises(ValueError, match="unknown profile"):
        replay.profile_names("v100-x5")


def test_nvlink_error_counters_ibstat_rate_and_lspci() -> None:
    text = replay.nvlink_errors(replay.PROFILES["v100-x4"])
    text = text.replace("Link 2: CRC Errors: 0", "Link 2: CRC Errors: 512", 1)
    counters = nvsmi.parse_nvlink_errors(text)
    assert len(counters) == 4 * 6 * 3
    assert [k for k, v in counters.items() if v] == [(0, 2, "CRC Errors")]
    ports = nvsmi.parse_ibstat(replay.ibstat(replay.PROFILES["h100-x8"]))
    assert (ports[1]["State"], ports[1]["Rate"]) == ("Active", "400")
    on_bus = nvsmi.parse_lspci_gpus(replay.lspci(replay.PROFILES["missing-gpu"]) + "07:00.0 0680: 10de:22a3 (rev a1)\n")
    assert on_bus == ["1a:00.0", "1c:00.0", "1d:00.0", "1e:00.0"]  # the NVSwitch (class 0680) is not a GPU


def test_dcgm_nccl_and_nvbandwidth_figures() -> None:
    dcgm = (
        '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": ['
        '{"name": "Denylist", "results": [{"status": "Pass"}]}, {"name": "Persistence Mode", '
        '"results": [{"status": "Fail", "warnings": [{"warning": "off"}]}]}]}]}}'
    )
    assert ("Persistence Mode", "Fail") in nvsmi.parse_dcgm_diag(dcgm)
    with pytest.raises(nvsmi.ParseError):
        nvsmi.parse_dcgm_diag("Error: unable to connect to host engine")
    assert tool_output.nccl_busbw("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 187.52 \n") == [187.52]
    matrix = (
        "Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
        "           0         1\n 0     24.10     23.80\n\nSUM host_to_device_memcpy_ce 47.90\n"
    )
    assert tool_output.nvbandwidth_per_gpu(matrix, tool_output.H2D_TEST) == {0: [24.1], 1: [23.8]}
