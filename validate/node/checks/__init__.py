"""The catalogue: one function per property of a GPU node, each returning one Check.

A check reads the host through :class:`~gpuready.validate.node.node.Node` (testinfra underneath),
decides with one criterion, and says what to do when it fails. A check that does not apply to
this node is skipped with the reason. Each family of checks is a module; they register in the order
they are imported here, which is the order they run in.
"""

from __future__ import annotations

# isort: off
from gpuready.validate.node.checks import driver, gpu, topology, compute, node, perf  # noqa: F401

# isort: on
from gpuready.validate.node.checks.commands import (
    CONTAINER_COMMAND,
    DCGM_COMMAND,
    DCGM_PERF_COMMAND,
    DCGM_TIMEOUTS,
    DEVICE_PLUGIN_SOCKET,
    DEVICES_COMMAND,
    FABRIC_MANAGER_COMMAND,
    IMEX_COMMAND,
    JOURNAL_COMMAND,
    LSPCI_COMMAND,
    NCCL_COMMAND,
    NVBANDWIDTH_COMMAND,
    NVLSM_COMMAND,
    PREFETCH,
    PROBE_COMMAND,
    PROBE_TIMEOUT,
    RUNTIME_CONFIG,
    SELINUX_LABELS,
    UPTIME_COMMAND,
    VECTOR_ADD_COMMAND,
    dcgm_command,
    perf_budget,
    perf_commands,
    prefetch_commands,
)
from gpuready.validate.node.checks.registry import CATALOGUE
from gpuready.validate.node.checks.runner import run_catalogue, run_check
from gpuready.validate.node.node import MODULES_COMMAND

CHECK_IDS = [c.id for c in CATALOGUE]

#: What the tests, benchmarks and docs name from the package.
__all__ = [
    "CATALOGUE",
    "CHECK_IDS",
    "CONTAINER_COMMAND",
    "DCGM_COMMAND",
    "DCGM_PERF_COMMAND",
    "DCGM_TIMEOUTS",
    "DEVICES_COMMAND",
    "DEVICE_PLUGIN_SOCKET",
    "FABRIC_MANAGER_COMMAND",
    "IMEX_COMMAND",
    "JOURNAL_COMMAND",
    "LSPCI_COMMAND",
    "MODULES_COMMAND",
    "NCCL_COMMAND",
    "NVBANDWIDTH_COMMAND",
    "NVLSM_COMMAND",
    "PREFETCH",
    "PROBE_COMMAND",
    "PROBE_TIMEOUT",
    "RUNTIME_CONFIG",
    "SELINUX_LABELS",
    "UPTIME_COMMAND",
    "VECTOR_ADD_COMMAND",
    "dcgm_command",
    "perf_budget",
    "perf_commands",
    "prefetch_commands",
    "run_catalogue",
    "run_check",
]
