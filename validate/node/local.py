"""The catalogue on the node it runs on: no inventory, no SSH, a time budget.

A node under Slurm or Kubernetes has no inventory. Its settings are a settings file copied from one (the
``gpuready`` variable of group_vars/all/gpuready.yml) and a node class named in it; without one, the settings
gpuready ships for "this machine" (inventories/local), and the checks that compare the node with a declared
class (how many GPUs, which model, which driver) are reported as not judged instead of guessed.
The checks are the catalogue's own, run through the same fan-out code as ``validate gpu-node`` with a local
connection (``connect.testinfra_host``), so there is no second copy of any check.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuready.core.errors import BadInput
from gpuready.core.results import RunResult, skipped

if TYPE_CHECKING:
    from gpuready.core.settings import NodeClass, Settings

#: Checks that judge the node against its declared node class or driver pin: without a settings file there is
#: nothing declared, so they are not judged (skipped, saying why), never passed or failed on a guess.
DECLARED = ("gpu.count", "gpu.model", "driver.version")
NOT_DECLARED = "no node class declared (pass --settings FILE and --node-class NAME to judge it)"
#: Seconds the node's read-only commands may take by default: with the health check's scontrol calls (three, at
#: most 10 s each) well inside the 60 seconds after which slurmd kills a HealthCheckProgram (slurm.conf(5),
#: HealthCheckProgram).
DEFAULT_BUDGET = {"quick": 20.0, "full": 120.0}


@dataclass(frozen=True)
class NodeSettings:
    settings: Settings
    node_class_name: str
    node_class: NodeClass
    #: The settings file read; None: gpuready's defaults for this machine.
    source: Path | None

    @property
    def declared(self) -> bool:
        return self.source is not None


def node_settings(settings_file: Path | None, node_class: str | None) -> NodeSettings:
    """The settings and node class a node-local run judges by."""
    from gpuready.core.inventory import load_settings, shipped_settings_file

    if settings_file is None:
        if node_class is not None:
            raise BadInput(f"--node-class {node_class}: a node class is defined in a settings file; pass --settings")
        settings = load_settings(shipped_settings_file())
        name = next(iter(settings.node_classes))
        # The shipped class describes the admin machine (gpu_count 0, so its GPU checks would all be skipped); a
        # node-local run judges the GPUs it finds, its count undeclared: None (only gpu.count reads it, and it is
        # skipped with NOT_DECLARED). model_copy does not validate, as no count is there to validate.
        undeclared = settings.node_classes[name].model_copy(update={"gpu_count": None})
        return NodeSettings(settings, name, undeclared, None)
    settings = load_settings(settings_file)
    name = node_class or next(iter(settings.node_classes))
    if name not in settings.node_classes:
        raise BadInput(
            f"--node-class {name}: not a node class of {settings_file} (it has {', '.join(settings.node_classes)})"
        )
    return NodeSettings(settings, name, settings.node_classes[name], settings_file)


def node_name(given: str | None = None) -> str:
    """The name the node is known by: given, else Slurm's name for it (slurmd sets SLURMD_NODENAME for its
    prolog and epilog, slurm.conf(5) "Prolog and Epilog Scripts"), else the short host name."""
    name = given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
    if not name or any(c.isspace() or not c.isprintable() for c in name):
        raise BadInput(f"node name {name!r}: empty or not printable; pass --node-name")
    return name


@dataclass
class LocalRun:
    result: RunResult
    seconds: float


def run(
    name: str, node: NodeSettings, ids: set[str] | None, budget: float, command: str = "validate this-node"
) -> LocalRun:
    """The selected checks (None: all) on this node; the read-only commands bounded by ``budget`` seconds (the
    measuring checks of the full set run after them, each under its own limit)."""
    from gpuready.core.inventory.connection import connection_spec
    from gpuready.validate.gpu_node import record_figures
    from gpuready.validate.node import fanout, perf
    from gpuready.validate.node.checks import CHECK_IDS

    chosen = ids if node.declared else (set(CHECK_IDS) if ids is None else ids) - set(DECLARED)
    target = fanout.Target(name, connection_spec(name, {"ansible_connection": "local"}), node.node_class)
    started = time.monotonic()
    result = RunResult(command=command, inventory=str(node.source or ""))
    seconds = max(1, int(budget))
    checks = fanout.validate_host(target, node.settings, seconds, chosen, command_timeout=seconds)
    if not node.declared:
        checks += [skipped(i, name, NOT_DECLARED) for i in DECLARED if ids is None or i in ids]
    order = {id: n for n, id in enumerate(CHECK_IDS)}
    checks.sort(key=lambda c: order.get(c.id, -1))  # catalogue order; host.reachable (not a catalogue id) first
    result.add(*perf.across_run(checks))
    record_figures(result, checks, lambda _host: node.node_class)
    elapsed = time.monotonic() - started
    result.metrics.update({"hosts": 1, "wall_seconds": round(elapsed, 3)})
    return LocalRun(result, elapsed)
