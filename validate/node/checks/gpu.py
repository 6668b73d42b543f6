"""The catalogue: one function per property of a GPU node, each returning one Check.

A check reads the host through :class:`~gpuready.validate.node.node.Node` (testinfra underneath),
decides with one criterion, and says what to do when it fails. A check that does not apply to
this node is skipped with the reason.
"""

from __future__ import annotations

import fnmatch
import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING

from gpuready.core import role_defaults
from gpuready.core.results import Check, errored, failed, passed, skipped
from gpuready.validate.node import nvsmi, perf, tool_output
from gpuready.validate.node import xid as xids
from gpuready.validate.node.node import MODULES_COMMAND, Answer, Node, NoGpuView

#: The Dell/Red Hat TFJobs paper: "permission denied" means these labels are wrong (SELinux enforcing only).
#: The gpu_selinux role's file contexts of NVIDIA's devices and binaries (its kubelet context is the
#: cluster's business).
SELINUX_LABELS = {c["path"]: c["setype"] for c in role_defaults.selinux_file_contexts() if "nvidia" in c["path"]}

#: Where the container-toolkit role configured each runtime, and what the file then mentions.
RUNTIME_CONFIG = {
    **{runtime: (path, "nvidia") for runtime, path in role_defaults.runtime_configs().items()},
    "crio-oci-hook": ("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", "nvidia-container"),
}
# One listing each, whatever the number of GPUs: the file type per path, the label per path.
DEVICES_COMMAND = 'for f in /dev/nvidia*; do [ -c "$f" ] && echo "$f character" || echo "$f other"; done'
LABELS_COMMAND = (
    "for f in " + " ".join(SELINUX_LABELS) + '; do [ -e "$f" ] && printf \'%s %s\\n\' "$f" '
    '"$(getfattr --only-values -n security.selinux "$f" 2>/dev/null)"; done; true'
)
_VENDOR = role_defaults.nvidia_vendor_id()
# Where pciutils is missing (minimal images and VMs: the lent H100 VM had no lspci), the kernel's own PCI
# listing gives the same address and class, read with the shell's `read`, no process per device.
LSPCI_COMMAND = (
    f"lspci -n -d {_VENDOR:04x}: 2>/dev/null || {{ echo '{nvsmi.SYSFS_MARK}'; for d in /sys/bus/pci/devices/*; do "
    f'read -r v < "$d/vendor" && [ "$v" = 0x{_VENDOR:04x} ] && read -r c < "$d/class" && echo "${{d##*/}} $c"; '
    "done 2>/dev/null; true; }"
)
UPTIME_COMMAND = "cat /proc/uptime"
# Where dmesg is refused (kernel.dmesg_restrict and no become), the journal's kernel log, read in the same
# batch so the host still costs one connection; it prints nothing where dmesg works. short-monotonic stamps
# each line with the seconds since boot, as dmesg does (CLOCK_MONOTONIC: sd_journal_get_monotonic_usec(3)),
# so the Xid window applies to it too.
JOURNAL_COMMAND = "dmesg >/dev/null 2>&1 || journalctl -k -b -o short-monotonic --no-pager -q"
FABRIC_MANAGER_COMMAND = "systemctl is-active nvidia-fabricmanager 2>/dev/null || true"
# HGX Blackwell baseboards (fourth-generation NVSwitch, NVLink 5) need NVIDIA's NVLink Subnet Manager on the host:
# Fabric Manager starts /opt/nvidia/nvlsm/sbin/nvlsm and the fabric does not come up without it (NVIDIA Fabric
# Manager user guide 2.x, "What is NVLink Subnet Manager?"). GB200/GB300 NVL racks run it on the switch trays
# (NVIDIA NMX-Controller docs: in the GB200 NVL, NMX-C provides the Subnet Manager), not on the compute node.
# Asked only on such nodes, so not prefetched.
NVLSM_COMMAND = "pgrep -a -x nvlsm 2>/dev/null || true"
# GPUs older than Hopper do not register with the NVSwitch fabric: their fabric state is N/A by design.
NO_FABRIC_REGISTRATION = ("Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace")
# How long each level of `dcgmi diag` may run. NVIDIA's dcgmi-diag reference (docs.nvidia.com/datacenter/dcgm/
# latest/reference/command-line-reference/dcgmi/dcgmi-diag.html, "-r"): level 1 "normally lasting seconds",
# 2 "approximately two minutes", 3 "approximately 15 minutes", 4 "extended, longer-running" (no figure given);
# each limit is about three times that, level 4 gpuready's guess of three hours.
DCGM_TIMEOUTS = {1: 120, 2: 600, 3: 2700, 4: 10800}


def dcgm_command(level: int) -> str:
    """``dcgmi diag -r LEVEL -j`` under its level's time limit (timeout(1) where the node has it)."""
    limit = f"timeout {DCGM_TIMEOUTS[level]} " if level in DCGM_TIMEOUTS else ""
    return (
        f"if command -v dcgmi >/dev/null 2>&1; then if command -v timeout >/dev/null 2>&1; then "
        f"{limit}dcgmi diag -r {level} -j; else dcgmi diag -r {level} -j; fi; else echo '== no dcgmi'; fi"
    )


DCGM_COMMAND = dcgm_command(1)
#: Samples of each figure: the checks judge their median and show their spread.
SAMPLES = 3
NCCL_TIMEOUT, NVBANDWIDTH_TIMEOUT, PROBE_TIMEOUT = 180, 240, 420
# 8 GiB per all-reduce, as Azure's health checks run it on 32/40 GB GPUs (conf/nd96asr_v4.conf line 57,
# check_nccl_allreduce 228.0 1 8G); 2 GiB on GPUs under 32 GB, where two 8 GiB buffers would not fit.
# -N prints each of SAMPLES cycles, -c 0 skips the result check.
NCCL_COMMAND = (
    "if command -v all_reduce_perf >/dev/null 2>&1; then "
    "M=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | sort -n | head -1); "
    'if [ "${M:-0}" -ge 32000 ] 2>/dev/null; then S=8G; else S=2G; fi; '
    f'timeout {NCCL_TIMEOUT} all_reduce_perf -b "$S" -e "$S" -f 2 -c 0 -N {SAMPLES} '
    "-g \"$(nvidia-smi -L | grep -c '^GPU')\"; "
    "else echo '== not installed'; fi"
)
# nvbandwidth on PATH, else the copy DCGM 4 ships with its CUDA plugins (NVIDIA/DCGM nvvs/plugin_src/
# nvbandwidth/Cuda12/CMakeLists.txt installs it to libexec/datacenter-gpu-manager-4/plugins/cuda12).
NVBANDWIDTH_FIND = (
    "N=$(command -v nvbandwidth 2>/dev/null || "
    "ls -1 /usr/libexec/datacenter-gpu-manager-4/plugins/cuda*/nvbandwidth 2>/dev/null | sort -V | tail -n 1); "
)
# The three copies Azure's health checks measure (customTests/azure_gpu_bandwidth.nhc), run SAMPLES times;
# devices in PCI bus order, as nvidia-smi numbers them.
NVBANDWIDTH_COMMAND = (
    NVBANDWIDTH_FIND + 'if [ -n "$N" ]; then echo "== nvbandwidth $N"; '
    f'for i in $(seq {SAMPLES}); do CUDA_DEVICE_ORDER=PCI_BUS_ID timeout {NVBANDWIDTH_TIMEOUT // SAMPLES} "$N" '
    "-t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce || exit $?; done; "
    "else echo '== not installed'; fi"
)
PROBE_SOURCE = (files("gpuready.validate.node") / "gpu_probe.py").read_text()
#: gpuready's own probe, sent as a file and run with the node's python3 where torch imports (torch ships
#: cuBLAS and NCCL); it measures what nvbandwidth and nccl-tests, where installed, measure instead.
PROBE_COMMAND = (
    "if ! python3 -c 'import torch' >/dev/null 2>&1; then echo '== no torch'; else "
    "M=matmul,memory; " + NVBANDWIDTH_FIND + '[ -n "$N" ] || M=$M,h2d,d2h,p2p; '
    "command -v all_reduce_perf >/dev/null 2>&1 || M=$M,nccl; "
    "f=$(mktemp); cat > \"$f\" <<'GPUREADY_PROBE'\n" + PROBE_SOURCE + "GPUREADY_PROBE\n"
    f'timeout {PROBE_TIMEOUT} python3 "$f" --metrics "$M" --samples {SAMPLES}; r=$?; rm -f "$f"; exit $r; fi'
)
DEVICE_PLUGIN_SOCKET = f"{role_defaults.kubelet_device_plugins_dir()}/nvidia.sock"
KUBELET_COMMAND = "test -d /var/lib/kubelet"
SOCKET_COMMAND = f"test -S {DEVICE_PLUGIN_SOCKET}"

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gpuready.core.settings import Settings


@dataclass(frozen=True)
class CheckDef:
    id: str
    run: Callable[[Node], Check]
    remedy: str
    what: str
    #: Checks whose failure explains this one's: when one of them failed (or could not run), this check
    #: is skipped with "depends on <id>" instead of failing again for the same root cause.
    depends: tuple[str, ...] = ()


CATALOGUE: list[CheckDef] = []

#: Message prefix of a check skipped because a check it depends on did not pass.
DEPENDS = "depends on "


def check(
    id: str, what: str, remedy: str, depends: tuple[str, ...] = ()
) -> Callable[[Callable[[Node], Check]], Callable[[Node], Check]]:
    def register(func: Callable[[Node], Check]) -> Callable[[Node], Check]:
        unknown = [d for d in depends if d not in {c.id for c in CATALOGUE}]
        if unknown:  # a dependency must come earlier in the catalogue, so it has run when this one runs
            raise ValueError(f"check {id}: depends on {unknown}, not declared before it")
        CATALOGUE.append(CheckDef(id, func, remedy, what, depends))
        return func

    return register


def run_check(definition: CheckDef, node: Node) -> Check:
    """Run one check; a GPU view that cannot be read fails the check with that one clear reason."""
    try:
        result = definition.run(node)
    except NoGpuView as e:
        result = failed(definition.id, node.name, str(e), node.smi_xml.evidence())
    except Exception as e:  # a surprise in one check is that check's error; the others still run
        log.debug("check %s on %s", definition.id, node.name, exc_info=True)
        return errored(definition.id, node.name, f"the check itself failed: {type(e).__name__}: {e}")
    if result.status == "failed" and not result.remedy:
        result.remedy = definition.remedy
    return result


def run_catalogue(node: Node, only: set[str] | None = None) -> list[Check]:
    """Every check in catalogue order; one whose dependency did not pass is skipped, naming it."""
    results: dict[str, Check] = {}
    measured = False
    for definition in CATALOGUE:
        if only is not None and definition.id not in only:
            continue
        if not measured and definition.id in MEASURING and node.host is not None:
            measured = True
            _measure(node, only, results)
        cause = next((d for d in definition.depends if d in results and _blocks(results[d])), None)
        if cause is not None:
            root = results[cause]
            if root.message.startswith(DEPENDS):  # skipped itself: name the same root cause
                reason = root.message[len(DEPENDS) :]
            else:  # the first clause of the root's message, identical across hosts so they group
                reason = f"{cause} ({root.message.split(':', 1)[0]})"
            results[definition.id] = skipped(definition.id, node.name, DEPENDS + reason)
        else:
            results[definition.id] = run_check(definition, node)
    return list(results.values())


def _measure(node: Node, only: set[str] | None, results: dict[str, Check]) -> None:
    """The measuring commands in their own batch, after the fixed checks, only where the GPUs can be read
    (a node that failed the GPU view would skip every measuring check anyway)."""
    view = results.get(GPU_VIEW[0])
    if view is not None and view.status != "passed":
        return
    budget = perf_budget(node.settings, only)
    if node.on_measure is not None:
        node.on_measure(budget + 10)
    try:
        node.prefetch(perf_commands(node.settings, only), timeout=budget)
    except ConnectionError as e:  # each measuring check says its command did not finish; none is run again
        for command in perf_commands(node.settings, only):
            node.record(Answer(command, 124, "", str(e)))


def _blocks(result: Check) -> bool:
    return result.status in ("failed", "error") or (result.status == "skipped" and result.message.startswith(DEPENDS))


# ---------------------------------------------------------------- driver
@check(
    "driver.nouveau_absent",
    "the nouveau module is not loaded (lsmod)",
    "Blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs and reboot.",
)
def nouveau_absent(node: Node) -> Check:
    answer = node.modules
    if "nouveau" in nvsmi.parse_lsmod(answer.stdout):
        return failed(
            "driver.nouveau_absent",
            node.name,
            "nouveau is loaded: it holds the GPUs the nvidia driver needs",
            answer.evidence(600),
        )
    return passed("driver.nouveau_absent", node.name, "nouveau not loaded")


@check(
    "driver.nvidia_module",
    "the nvidia kernel module is loaded (lsmod)",
    "Install the driver (gpuready provision cluster) and load it: modprobe nvidia; check dmesg for NVRM errors.",
    depends=("driver.nouveau_absent",),
)
def nvidia_module(node: Node) -> Check:
    answer = node.modules
    if "nvidia" in nvsmi.parse_lsmod(answer.stdout):
        return passed("driver.nvidia_module", node.name, "nvidia module loaded", answer.evidence(300))
    return failed("driver.nvidia_module", node.name, "the nvidia kernel module is not loaded", answer.evidence(600))


@check(
    "driver.nvidia_smi",
    "nvidia-smi answers (nvidia-smi -q -x exits 0)",
    "Run nvidia-smi on the node: a driver/library version mismatch needs a reboot; a missing driver, an install.",
    depends=("driver.nvidia_module",),
)
def nvidia_smi(node: Node) -> Check:
    answer = node.smi_xml
    if answer.ok:
        return passed("driver.nvidia_smi", node.name, f"nvidia-smi answers ({len(node.smi.gpus)} GPUs)")
    if answer.rc == 127:
        return failed(
            "driver.nvidia_smi", node.name, "nvidia-smi not found: no NVIDIA driver installed", answer.evidence()
        )
    return failed("driver.nvidia_smi", node.name, f"nvidia-smi failed (exit {answer.rc})", answer.evidence())


GPU_VIEW = ("driver.nvidia_smi",)


@check(
    "driver.version",
    "the driver version equals gpuready.driver.version (or its branch)",
    "Provision the pinned driver: gpuready provision cluster (reboot if the old module is still loaded).",
    depends=GPU_VIEW,
)
def driver_version(node: Node) -> Check:
    pin = node.settings.driver
    version = node.smi.driver_version
    source = "nvidia-smi -q -x"
    if not version and node.query.ok:  # some drivers leave the XML field out; the query form still has it
        rows = node.gpus_csv()
        version, source = (nvsmi.driver_version(rows[0]["driver_version"]) if rows else ""), "--query-gpu"
    evidence = (
        f"driver_version={version or '(not reported)'} ({source}); pinned version={pin.version!r} branch={pin.branch}"
    )
    if not version:
        return skipped("driver.version", node.name, "nvidia-smi does not report the driver version here", evidence)
    branch = pin.branch.split("-")[0]
    if pin.version:
        ok, want = version == pin.version, pin.version
    else:
        ok, want = version.split(".")[0] == branch, f"branch {branch}"
    if ok:
        return passed("driver.version", node.name, f"driver {version}", evidence)
    return failed("driver.version", node.name, f"driver {version} is installed, the inventory pins {want}", evidence)


# ---------------------------------------------------------------- GPUs
@check(
    "gpu.pci_bus",
    "every NVIDIA GPU on the PCI bus (lspci -n, else /sys/bus/pci) is seen by nvidia-smi",
    "A GPU on the bus that nvidia-smi does not list has fallen off or failed to initialise: check dmesg for "
    "Xid 79/NVRM errors, reseat it, run the field diagnostics.",
    depends=GPU_VIEW,
)
def pci_bus(node: Node) -> Check:
    answer = node.run(LSPCI_COMMAND)
    if answer.rc == 127 or (not answer.ok and not answer.stdout.strip()):
        return skipped("gpu.pci_bus", node.name, "lspci is not installed (install pciutils)", answer.evidence(300))
    on_bus = nvsmi.parse_lspci_gpus(answer.stdout)
    if not on_bus and answer.stdout.startswith(nvsmi.SYSFS_MARK):
        return skipped(
            "gpu.pci_bus",
            node.name,
            "lspci is not installed and /sys/bus/pci lists no NVIDIA GPU (install pciutils)",
            answer.evidence(300),
        )
    seen = {_short_bus_id(g.bus_id) for g in node.smi.gpus}
    missing = sorted(set(on_bus) - seen)
    evidence = answer.evidence(1200) + "\nnvidia-smi: " + ", ".join(sorted(seen))
    if missing:
        return failed(
            "gpu.pci_bus",
            node.name,
            f"{len(on_bus)} NVIDIA GPUs on the PCI bus, nvidia-smi sees {len(seen)}; not seen: {', '.join(missing)}",
            evidence,
        )
    return passed("gpu.pci_bus", node.name, f"{len(on_bus)} GPUs on the bus, all seen by nvidia-smi", evidence)


def _short_bus_id(bus_id: str) -> str:
    """00000000:1A:00.0 (nvidia-smi) -> 1a:00.0 (lspci)."""
    return bus_id.lower().split(":", 1)[1] if bus_id.count(":") == 2 else bus_id.lower()


@check(
    "gpu.count",
    "as many GPUs as the node class says (nvidia-smi -q -x)",
    "Reseat or replace the missing GPU; check lspci and dmesg for a GPU that fell off the bus (Xid 79).",
    depends=(*GPU_VIEW, "gpu.pci_bus"),
)
def gpu_count(node: Node) -> Check:
    gpus = node.smi.gpus
    want = node.node_class.gpu_count
    evidence = "nvidia-smi -q -x: " + ", ".join(f"GPU {g.index} {g.bus_id} {g.name}" for g in gpus)
    if len(gpus) == want:
        return passed("gpu.count", node.name, f"{len(gpus)} GPUs", evidence)
    return failed("gpu.count", node.name, f"{len(gpus)} GPUs visible, the node class expects {want}", evidence)


@check(
    "gpu.model",
    "every GPU is the node class's model (nvidia-smi -q -x product_name)",
    "Fix gpuready.node_classes[...].gpu_model or gpuready_node_class for this host, or the hardware.",
    depends=GPU_VIEW,
)
def gpu_model(node: Node) -> Check:
    gpus = node.smi.gpus
    want = node.node_class.gpu_model
    if not gpus:
        return skipped("gpu.model", node.name, "no GPU visible (see gpu.count)")
    wrong = [f"GPU {g.index}: {g.name}" for g in gpus if g.name != want]
    evidence = "nvidia-smi -q -x: " + ", ".join(f"GPU {g.index}: {g.name}" for g in gpus)
    if not wrong:
        return passed("gpu.model", node.name, f"{len(gpus)}x {want}", evidence)
    return failed("gpu.model", node.name, f"expected {want!r}; " + "; ".join(wrong), evidence)


def _per_gpu(
    node: Node,
    id: str,
    bad: Callable[[nvsmi.Gpu], str],
    ok_message: str,
    note: Callable[[nvsmi.Gpu], str] | None = None,
    *,
    facts: Callable[[nvsmi.Gpu], str],
) -> Check:
    """One verdict over every GPU: failed when ``bad`` says why for any; ``note`` adds what passes but is
    worth seeing (e.g. a narrower link the node class does not forbid). The evidence is ``facts`` of each
    GPU: the fields this check judged, so a report at 1000 nodes does not repeat every GPU's whole record
    under every check."""
    gpus = node.smi.gpus
    if not gpus:
        return skipped(id, node.name, "no GPU visible (see gpu.count)")
    problems = [f"GPU {g.index} ({g.bus_id}): {why}" for g in gpus if (why := bad(g))]
    evidence = "nvidia-smi -q -x:\n" + "\n".join(f"GPU {g.index} {g.bus_id}: {facts(g)}" for g in gpus)
    if problems:
        return failed(id, node.name, "; ".join(problems), evidence)
    notes = [f"GPU {g.index}: {n}" for g in gpus if note and (n := note(g))]
    return passed(id, node.name, ok_message + (" (" + "; ".join(notes) + ")" if notes else ""), evidence)


def _persistence_facts(g: nvsmi.Gpu) -> str:
    return f"persistence={g.persistence or 'not reported'} virtualization={g.virtualization or 'not reported'}"


def _ecc_facts(g: nvsmi.Gpu) -> str:
    return (
        f"ecc={g.ecc_mode or 'not reported'} volatile_uncorrectable={g.volatile_uncorrectable or 'none'} "
        f"aggregate_uncorrectable={g.aggregate_uncorrectable or 'none'} "
        f"sram_threshold_exceeded={g.sram_threshold_exceeded}"
    )


def _memory_facts(g: nvsmi.Gpu) -> str:
    return (
        f"retired sbe/dbe={g.retired_sbe}/{g.retired_dbe} retired_pending={g.retired_pending} "
        f"remapped pending/failure={g.remapped_pending}/{g.remapped_failure} "
        f"repair_pending={','.join(g.repair_pending) or 'none'} unrepairable_memory={g.unrepairable_memory}"
    )


def _throttle_facts(g: nvsmi.Gpu) -> str:
    return f"slowdowns={','.join(g.slowdowns) or 'none'} benign={','.join(g.benign_reasons) or 'none'}"


def _pcie_facts(g: nvsmi.Gpu) -> str:
    return (
        f"pcie gen cur/max/gpu/host={g.pcie_gen}/{g.pcie_max_gen}/{g.pcie_device_max_gen}/{g.pcie_host_max_gen} "
        f"width cur/max=x{g.pcie_width}/x{g.pcie_max_width}"
    )


def _mig_facts(g: nvsmi.Gpu) -> str:
    return f"mig current/pending={g.mig_current or 'not reported'}/{g.mig_pending or 'not reported'}"


@check(
    "gpu.persistence",
    "persistence mode is Enabled on every GPU (N/A on vGPU guests and some platforms)",
    "Enable it at boot: systemctl enable --now nvidia-persistenced (driver 580 logs that the legacy "
    "nvidia-smi -pm 1 is deprecated and points to nvidia-persistenced).",
    depends=GPU_VIEW,
)
def persistence(node: Node) -> Check:
    # "N/A" (vGPU guests, Windows, some platforms) or absent (old schemas): the mode does not apply there.
    return _per_gpu(
        node,
        "gpu.persistence",
        lambda g: f"persistence mode {g.persistence}" if g.persistence == "Disabled" else "",
        "no GPU with persistence mode Disabled",
        lambda g: (
            "" if g.persistence == "Enabled" else f"persistence mode {g.persistence or 'not reported'}, not applicable"
        ),
        facts=_persistence_facts,
    )


@check(
    "gpu.ecc_volatile",
    "no uncorrectable ECC error since the driver loaded (every DRAM and SRAM counter), SRAM threshold not exceeded",
    "Drain the node, reset the GPU (nvidia-smi -r) and run the field diagnostics; RMA if errors return.",
    depends=GPU_VIEW,
)
def ecc_volatile(node: Node) -> Check:
    def bad(g: nvsmi.Gpu) -> str:
        problems = []
        errors = {k: v for k, v in g.volatile_uncorrectable.items() if v}
        if errors:
            problems.append(
                f"{sum(errors.values())} volatile uncorrectable ECC errors ("
                + ", ".join(f"{k}={v}" for k, v in errors.items())
                + ")"
            )
        if g.sram_threshold_exceeded:  # NVIDIA's SRAM RMA flag (A100/H100 memory error management guide)
            problems.append("SRAM uncorrectable-error threshold exceeded (RMA criterion)")
        return ", ".join(problems)

    def note(g: nvsmi.Gpu) -> str:
        if g.ecc_mode and g.ecc_mode != "Enabled":
            return f"ECC {g.ecc_mode}"
        lifetime = sum(g.aggregate_uncorrectable.values())
        return f"{lifetime} uncorrectable in its lifetime (aggregate)" if lifetime else ""

    return _per_gpu(node, "gpu.ecc_volatile", bad, "no volatile uncorrectable ECC errors", note, facts=_ecc_facts)


def _counter_window(node: Node, check_id: str, unit_seconds: float) -> tuple[float, float] | Check:
    """The seconds a counter that starts at the driver load covers (at most the uptime) and the same in units.

    Under one unit counts as one, so a few events just after boot are not a high rate. No uptime: skipped.
    """
    uptime = xids.parse_uptime(node.run(UPTIME_COMMAND).stdout)
    if uptime is None:
        return skipped(check_id, node.name, f"the uptime cannot be read ({UPTIME_COMMAND})")
    return uptime, max(uptime / unit_seconds, 1.0)


@check(
    "gpu.ecc_correctable_rate",
    "corrected (single-bit) ECC errors per hour under the limit on every GPU (volatile counters over the uptime)",
    "A GPU correcting this many errors is degrading: watch its retired pages / remapped rows, drain it and run "
    "the field diagnostics (dcgmi diag -r 3) before it turns uncorrectable.",
    depends=GPU_VIEW,
)
def ecc_correctable_rate(node: Node) -> Check:
    limit = node.settings.node_checks.correctable_errors_per_hour
    gpus = [g for g in node.smi.gpus if g.volatile_correctable]
    if not limit:
        return skipped("gpu.ecc_correctable_rate", node.name, "turned off (node_checks.correctable_errors_per_hour: 0)")
    if not gpus:
        return skipped(
            "gpu.ecc_correctable_rate", node.name, "no GPU reports corrected-error counters (ECC off or not supported)"
        )
    window = _counter_window(node, "gpu.ecc_correctable_rate", 3600)
    if isinstance(window, Check):
        return window
    uptime, hours = window
    rates = {g.index: sum(g.volatile_correctable.values()) / hours for g in gpus}
    evidence = f"$ {UPTIME_COMMAND}: {uptime:.0f} s; nvidia-smi -q -x ecc_errors/volatile:\n" + "\n".join(
        f"GPU {g.index} {g.bus_id}: {g.volatile_correctable} -> {rates[g.index]:.1f}/h" for g in gpus
    )
    high = [
        f"GPU {g.index} ({g.bus_id}): {sum(g.volatile_correctable.values())} corrected in {hours:.1f} h = "
        f"{rates[g.index]:.1f}/h >= {limit:g}/h"
        for g in gpus
        if rates[g.index] >= limit
    ]
    if high:
        return failed("gpu.ecc_correctable_rate", node.name, "; ".join(high), evidence)
    worst = max(rates.values())
    return passed(
        "gpu.ecc_correctable_rate", node.name, f"at most {worst:.1f} corrected errors/h (< {limit:g}/h)", evidence
    )


@check(
    "gpu.retired_pages",
    "retired pages under NVIDIA's replacement threshold, nothing pending; row remapping neither pending nor "
    "failed; no memory flagged unrepairable",
    "Pending retirement/remapping/repair: reset the GPU or reboot. Threshold reached, remapping failed or memory "
    "unrepairable: drain, run the field diagnostics, RMA.",
    depends=GPU_VIEW,
)
def retired_pages(node: Node) -> Check:
    limit = node.settings.node_checks.retired_pages_limit

    def bad(g: nvsmi.Gpu) -> str:
        problems = []
        retired = (g.retired_sbe or 0) + (g.retired_dbe or 0)
        if retired >= limit:
            problems.append(f"{retired} retired pages (sbe {g.retired_sbe}, dbe {g.retired_dbe}) >= {limit}")
        if g.retired_pending:
            problems.append("page retirement pending")
        if g.remapped_failure:  # NVIDIA's DRAM RMA criterion (A100 memory error management, RMA policy)
            problems.append("row remapping failed")
        if g.remapped_pending:
            problems.append("row remapping pending")
        problems += [f"{what.replace('_', ' ')}" for what in g.repair_pending]
        if g.unrepairable_memory:  # NVML's unrepairable-memory flag: no reset brings the memory back
            problems.append("memory flagged unrepairable (ecc_errors/unrepairable_memory Yes)")
        return ", ".join(problems)

    def note(g: nvsmi.Gpu) -> str:
        retired = (g.retired_sbe or 0) + (g.retired_dbe or 0)
        return f"{retired} retired pages" if retired else ""

    return _per_gpu(node, "gpu.retired_pages", bad, "nothing pending, under the thresholds", note, facts=_memory_facts)


@check(
    "gpu.throttle",
    "no hardware slowdown (HW slowdown, thermal, power brake) active",
    "Check cooling, airflow and power supply; nvidia-smi -q -d PERFORMANCE shows the active reason.",
    depends=GPU_VIEW,
)
def throttle(node: Node) -> Check:
    return _per_gpu(
        node,
        "gpu.throttle",
        lambda g: "hardware slowdown active: " + ", ".join(g.slowdowns) if g.slowdowns else "",
        "no hardware slowdown active",
        lambda g: "benign: " + ", ".join(g.benign_reasons) if g.benign_reasons else "",
        facts=_throttle_facts,
    )


@check(
    "gpu.pcie_link",
    "PCIe link as wide as the GPU's maximum (or the node class's narrower pcie_width) and at the class's generation",
    "Reseat the GPU or riser (a link narrower than its maximum has missing lanes), set the slot to its maximum "
    "generation in the BIOS, check lspci -vv LnkSta; a slot narrower by design is declared as pcie_width.",
    depends=GPU_VIEW,
)
def pcie_link(node: Node) -> Check:
    want_gen, want_width = node.node_class.pcie_gen, node.node_class.pcie_width

    def bad(g: nvsmi.Gpu) -> str:
        # An idle GPU lowers its current generation to save power: the generation is judged on the link's
        # negotiated maximum, the width on the current link (it does not drop at idle on data-centre GPUs).
        # A link that trained narrower than the GPU's maximum width halves (or worse) its host bandwidth:
        # it fails unless the node class declares the narrower slot, as Oracle Cloud's GPU fleet check for
        # missing PCIe lanes fails it (oracle/oci-dr-hpc-v2, scripts/BM.GPU.H100.8/
        # pcie_width_missing_lanes_check.py: every H100's LnkSta must read Width x16).
        problems = []
        if want_gen and g.pcie_max_gen is not None and g.pcie_max_gen < want_gen:
            problems.append(f"link gen {g.pcie_max_gen} < node class gen {want_gen}")
        if want_width and g.pcie_width is not None and g.pcie_width < want_width:
            problems.append(f"width x{g.pcie_width} < node class x{want_width}")
        elif not want_width and g.pcie_width and g.pcie_max_width and g.pcie_width < g.pcie_max_width:
            problems.append(
                f"width x{g.pcie_width} < the GPU's x{g.pcie_max_width} (missing lanes; a narrower slot is "
                "declared as the node class's pcie_width)"
            )
        return ", ".join(problems)

    def note(g: nvsmi.Gpu) -> str:
        gpu_max = g.pcie_device_max_gen or g.pcie_max_gen
        if g.pcie_max_gen and gpu_max and g.pcie_max_gen < gpu_max:
            limit = f", host max gen {g.pcie_host_max_gen}" if g.pcie_host_max_gen else ""
            return f"link max gen {g.pcie_max_gen} < GPU's gen {gpu_max}{limit}"
        return ""

    declared = " and ".join(filter(None, [want_gen and f"gen {want_gen}", want_width and f"x{want_width}"]))
    return _per_gpu(
        node,
        "gpu.pcie_link",
        bad,
        f"links reach the node class's {declared}" if declared else "links at the GPUs' full width",
        note,
        facts=_pcie_facts,
    )


@check(
    "gpu.pcie_replay",
    "PCIe replays per minute under the limit on every GPU (nvidia-smi -q -x replay_counter over the uptime)",
    "Many replays mean a marginal link: reseat the GPU or riser, check the slot and cables; nvidia-smi -q -d PCIE.",
    depends=GPU_VIEW,
)
def pcie_replay(node: Node) -> Check:
    limit = node.settings.node_checks.pcie_replays_per_minute
    counted = [g for g in node.smi.gpus if g.pcie_replays is not None]
    if not limit:
        return skipped("gpu.pcie_replay", node.name, "turned off (node_checks.pcie_replays_per_minute: 0)")
    if not counted:
        return skipped("gpu.pcie_replay", node.name, "no GPU reports a PCIe replay counter")
    replaying = [g for g in counted if g.pcie_replays]
    if not replaying:
        return passed("gpu.pcie_replay", node.name, "no PCIe replays")
    # One reading gives an average: one above the per-minute limit means at least one minute was above it.
    # Shorter bursts need two readings a minute apart, as DCGM's health watch takes (dcgmi health).
    window = _counter_window(node, "gpu.pcie_replay", 60)
    if isinstance(window, Check):
        return window
    uptime, minutes = window
    rates = {g.index: g.pcie_replays / minutes for g in replaying}
    evidence = f"$ {UPTIME_COMMAND}: {uptime:.0f} s; nvidia-smi -q -x pci/replay_counter:\n" + "\n".join(
        f"GPU {g.index} {g.bus_id}: {g.pcie_replays} -> {rates[g.index]:.2f}/min" for g in replaying
    )
    high = [
        f"GPU {g.index} ({g.bus_id}): {g.pcie_replays} PCIe replays in {minutes:.0f} min = "
        f"{rates[g.index]:.2f}/min > {limit:g}/min"
        for g in replaying
        if rates[g.index] > limit
    ]
    if high:
        return failed("gpu.pcie_replay", node.name, "; ".join(high), evidence)
    worst = max(rates.values())
    return passed("gpu.pcie_replay", node.name, f"at most {worst:.2f} PCIe replays/min (<= {limit:g}/min)", evidence)


@check(
    "gpu.mig",
    "MIG mode as the node class declares, nothing pending (nvidia-smi -q -x mig_mode)",
    "Set MIG mode as the node class says (nvidia-smi -mig 1|0, or the GPU Operator's MIG manager) and reset "
    "the GPU so a pending change takes effect.",
    depends=GPU_VIEW,
)
def mig(node: Node) -> Check:
    want = node.node_class.mig
    if want is None:
        return skipped("gpu.mig", node.name, "the node class does not declare a MIG mode (mig: true|false)")
    target = "Enabled" if want else "Disabled"

    def bad(g: nvsmi.Gpu) -> str:
        if g.mig_current in nvsmi.NOT_AVAILABLE:
            return "MIG not supported on this GPU" if want else ""
        if g.mig_current != target:
            return f"MIG {g.mig_current}, the node class wants {target}"
        if g.mig_pending and g.mig_pending != g.mig_current:
            return f"MIG change to {g.mig_pending} pending (reset the GPU)"
        return ""

    return _per_gpu(node, "gpu.mig", bad, f"MIG {target}", facts=_mig_facts)


@check(
    "gpu.xid",
    "no hardware or driver Xid (NVIDIA's Xid catalogue) in the kernel log within the window",
    "Look the Xid code up in NVIDIA's Xid catalogue; hardware Xids need a drain, a GPU reset and the field "
    "diagnostics, driver Xids a reset and, if they repeat, a driver update.",
    depends=GPU_VIEW,
)
def xid(node: Node) -> Check:
    settings = node.settings.node_checks
    answer = node.run("dmesg")
    if not answer.ok:
        answer = node.run(JOURNAL_COMMAND)
    if not answer.ok:
        return skipped(
            "gpu.xid",
            node.name,
            "the kernel log cannot be read here (dmesg and journalctl -k failed)",
            answer.evidence(300),
        )
    found = xids.events(answer.stdout)
    uptime = xids.parse_uptime(node.run(UPTIME_COMMAND).stdout)
    recent = xids.recent(found, uptime, settings.xid_window_hours)
    window = f"last {settings.xid_window_hours:g} h" if settings.xid_window_hours else "since boot"
    fatal = [e for e in recent if e.kind in settings.xid_fail_classes]
    evidence = f"$ {answer.command}  (uptime {uptime}s, window {window})\n" + "\n".join(
        f"[{e.kind}] Xid {e.code} ({e.description}): {e.line}" for e in found[:30]
    )
    if fatal:
        kinds = sorted({e.kind for e in fatal})
        codes = ", ".join(sorted({f"{e.code} ({e.description})" for e in fatal}))
        remedy = "; ".join(f"{k}: {xids.REMEDY[k]}" for k in kinds)
        return failed("gpu.xid", node.name, f"{'/'.join(kinds)} Xid in the {window}: {codes}", evidence, remedy)
    if found:
        other = len(found) - len(recent)
        return passed(
            "gpu.xid",
            node.name,
            f"no failing Xid in the {window} ({len(recent)} application Xid(s) in it, {other} older)",
            evidence,
        )
    return passed("gpu.xid", node.name, "no Xid since boot")


# ---------------------------------------------------------------- topology
@check(
    "topology.nvlink",
    "every GPU has the node class's NVLink links up (nvidia-smi nvlink -s)",
    "Reseat the NVLink bridge (PCIe) or check the baseboard (SXM); run the field diagnostics.",
    depends=(*GPU_VIEW, "gpu.count"),
)
def nvlink(node: Node) -> Check:
    want = node.node_class.nvlink_links_per_gpu
    if not want:
        return skipped("topology.nvlink", node.name, "the node class expects no NVLink (nvlink_links_per_gpu: 0)")
    gpus = [g for g in node.smi.gpus if not g.mig_enabled]
    in_mig = [g.index for g in node.smi.gpus if g.mig_enabled]
    if not gpus:
        return skipped(
            "topology.nvlink",
            node.name,
            "every GPU is in MIG mode: the driver does not report NVLink state per link there (see gpu.mig)",
        )
    answer = node.run("nvidia-smi nvlink -s")
    if not answer.ok:
        return failed(
            "topology.nvlink", node.name, f"nvidia-smi nvlink -s failed (exit {answer.rc})", answer.evidence()
        )
    links = nvsmi.parse_nvlink_status(answer.stdout)
    problems = []
    for gpu in gpus:
        up = sum(links.get(gpu.index, {}).values())
        if up < want:
            down = [str(n) for n, ok in sorted(links.get(gpu.index, {}).items()) if not ok]
            problems.append(f"GPU {gpu.index}: {up}/{want} links up" + (f" (down: {','.join(down)})" if down else ""))
    skipped_note = f"; GPU {','.join(map(str, in_mig))} in MIG mode, not counted" if in_mig else ""
    if problems:
        return failed("topology.nvlink", node.name, "; ".join(problems) + skipped_note, answer.evidence())
    return passed("topology.nvlink", node.name, f"{want} links up on each GPU{skipped_note}", answer.evidence(600))


@check(
    "topology.nvlink_errors",
    "no NVLink replay, recovery or CRC errors beyond the limit (nvidia-smi nvlink -e)",
    "Errors on one link: reseat the bridge or report the baseboard; run dcgmi diag -r 3; RMA if they grow.",
    depends=GPU_VIEW,
)
def nvlink_errors(node: Node) -> Check:
    if not node.node_class.nvlink_links_per_gpu:
        return skipped("topology.nvlink_errors", node.name, "the node class expects no NVLink")
    answer = node.run("nvidia-smi nvlink -e")
    if not answer.ok:
        return skipped(
            "topology.nvlink_errors",
            node.name,
            f"nvidia-smi nvlink -e does not answer here (exit {answer.rc})",
            answer.evidence(300),
        )
    counters = nvsmi.parse_nvlink_errors(answer.stdout)
    if not counters:
        # A GPU passed through without its NVLinks answers with nothing at all (recorded on an H100 VM):
        # no counter read is no evidence of a healthy link, and topology.nvlink reports the missing links.
        return skipped(
            "topology.nvlink_errors",
            node.name,
            "nvidia-smi nvlink -e printed no counters (no NVLink visible; see topology.nvlink)",
            answer.evidence(300),
        )
    limit = node.settings.node_checks.nvlink_error_limit
    bad = [
        f"GPU {g} link {link}: {name}={value}" for (g, link, name), value in sorted(counters.items()) if value > limit
    ]
    if bad:
        return failed(
            "topology.nvlink_errors",
            node.name,
            f"{len(bad)} NVLink counter(s) over {limit}: " + "; ".join(bad[:6]),
            answer.evidence(2000),
        )
    return passed(
        "topology.nvlink_errors", node.name, f"{len(counters)} counters read, none over {limit}", answer.evidence(600)
    )


@check(
    "topology.p2p",
    "peer-to-peer reads possible between the class's GPU pairs (nvidia-smi topo -p2p r)",
    "Attach NVLink-bridged GPUs together; enable ATS/ACS settings for peer-to-peer (Dell's vSphere study).",
    depends=(*GPU_VIEW, "gpu.count"),
)
def p2p(node: Node) -> Check:
    pairs = node.node_class.p2p_pairs
    if not pairs:
        return skipped("topology.p2p", node.name, "the node class names no p2p_pairs")
    answer = node.run("nvidia-smi topo -p2p r")
    if not answer.ok:
        return failed("topology.p2p", node.name, f"nvidia-smi topo -p2p r failed (exit {answer.rc})", answer.evidence())
    matrix = nvsmi.parse_p2p_matrix(answer.stdout)
    bad = [f"GPU{a}<->GPU{b}: {matrix.get((a, b), 'absent')}" for a, b in pairs if matrix.get((a, b)) != "OK"]
    if bad:
        return failed("topology.p2p", node.name, "peer-to-peer not possible: " + "; ".join(bad), answer.evidence())
    return passed("topology.p2p", node.name, f"{len(pairs)} pair(s) peer-to-peer capable", answer.evidence(600))


# ---------------------------------------------------------------- compute
VECTOR_ADD_PASS = "Test PASSED"


@check(
    "compute.vector_add",
    "a vector add passes on every GPU (cuda-samples vectorAdd, cupy or torch)",
    "Install the CUDA samples (vectorAdd) or a CUDA Python library; a failure on one GPU points at that GPU.",
    depends=GPU_VIEW,
)
def vector_add(node: Node) -> Check:
    gpus = node.smi.gpus
    if not gpus:
        return failed("compute.vector_add", node.name, "no GPU visible to compute on")
    answer = node.run(VECTOR_ADD_COMMAND)
    if "== no program" in answer.stdout:
        return skipped(
            "compute.vector_add", node.name, "no vector add available (neither vectorAdd, cupy nor torch on the node)"
        )
    sections = answer.stdout.split("== GPU ")[1:]
    failing = [s.split("\n", 1)[0] for s in sections if VECTOR_ADD_PASS not in s or "== rc=0" not in s]
    if len(sections) != len(gpus) or failing:
        which = ", ".join(failing) if failing else f"(output for {len(sections)} of {len(gpus)} GPUs)"
        return failed("compute.vector_add", node.name, f"vector add failed on GPU {which}", answer.evidence(3000))
    return passed("compute.vector_add", node.name, f"{VECTOR_ADD_PASS} on {len(gpus)} GPUs", answer.evidence(600))


_CUPY = (
    'python3 -c "import cupy as c; a=c.arange(50000,dtype=c.float32); b=a*2; '
    "assert bool((a+b==a*3).all()); print('Test PASSED')\""
)
_TORCH = (
    "python3 -c \"import torch as t; a=t.rand(50000,device='cuda'); b=t.rand(50000,device='cuda'); "
    "assert t.allclose((a+b).cpu(),a.cpu()+b.cpu()); print('Test PASSED')\""
)
#: One command whatever the node has: it picks the program there and runs it once per GPU index.
VECTOR_ADD_COMMAND = (
    "P=; if command -v vectorAdd >/dev/null 2>&1; then P=vectorAdd; "
    "elif [ -x /usr/local/cuda/extras/demo_suite/vectorAdd ]; then P=/usr/local/cuda/extras/demo_suite/vectorAdd; "
    f"elif python3 -c 'import cupy' >/dev/null 2>&1; then P={shlex.quote(_CUPY)}; "
    f"elif python3 -c 'import torch' >/dev/null 2>&1; then P={shlex.quote(_TORCH)}; fi; "
    "if [ -z \"$P\" ]; then echo '== no program'; else "
    'for i in $(nvidia-smi --query-gpu=index --format=csv,noheader); do echo "== GPU $i"; '
    'CUDA_VISIBLE_DEVICES=$i sh -c "$P"; echo "== rc=$?"; done; fi'
)


# ---------------------------------------------------------------- node
@check(
    "node.devices",
    "/dev/nvidiactl, /dev/nvidia-uvm and one /dev/nvidiaN per GPU are character devices",
    "Load nvidia-uvm and create the nodes: nvidia-modprobe -u -c=0 (or reboot after installing the driver).",
    depends=("driver.nvidia_module",),
)
def devices(node: Node) -> Check:
    try:
        minors = [g.minor for g in node.smi.gpus]
    except NoGpuView:
        minors = []
    answer = node.run(DEVICES_COMMAND)
    kinds = dict(line.split(" ", 1) for line in answer.stdout.splitlines() if " " in line)
    paths = ["/dev/nvidiactl", "/dev/nvidia-uvm", *(f"/dev/nvidia{m}" for m in minors)]
    missing = [p for p in paths if kinds.get(p) != "character"]
    if missing:
        return failed("node.devices", node.name, "missing: " + ", ".join(missing), answer.evidence(600))
    return passed("node.devices", node.name, f"{len(paths)} device files present", answer.evidence(600))


@check(
    "node.selinux_labels",
    "with SELinux enforcing, NVIDIA files carry the seed's labels",
    "Relabel: "
    + " && ".join(
        f"semanage fcontext -a -t {c['setype']} '{c['target']}'"
        for c in role_defaults.selinux_file_contexts()
        if "nvidia" in c["path"]
    )
    + " && restorecon -Rv /dev /usr/bin (gpuready provision cluster does this when "
    "selinux.manage_file_contexts is on).",
)
def selinux_labels(node: Node) -> Check:
    mode = node.run("getenforce")
    if not mode.ok:
        return skipped("node.selinux_labels", node.name, "SELinux not installed (no getenforce)")
    if mode.stdout.strip() != "Enforcing":
        return skipped("node.selinux_labels", node.name, f"SELinux is {mode.stdout.strip()}, labels do not apply")
    wrong, seen = [], []
    listing = node.run(LABELS_COMMAND)
    for line in listing.stdout.splitlines():
        path, _, label = line.partition(" ")
        want = next((t for pattern, t in SELINUX_LABELS.items() if fnmatch.fnmatch(path, pattern)), None)
        if want is None:
            continue
        seen.append(line)
        if f":{want}:" not in label:
            wrong.append(f"{path} is {label or 'unlabelled'} (want {want})")
    evidence = "$ getfattr -n security.selinux /dev/nvidia* /usr/bin/nvidia-*\n" + "\n".join(seen)
    if wrong:
        return failed("node.selinux_labels", node.name, "; ".join(wrong), evidence)
    return passed("node.selinux_labels", node.name, f"{len(seen)} files labelled as required", evidence)


@check(
    "node.container_runtime",
    "the container runtime's configuration names the nvidia runtime",
    "Run gpuready provision cluster (nvidia-ctk runtime configure --runtime=<runtime>), then restart it.",
)
def container_runtime(node: Node) -> Check:
    runtime = node.settings.container_runtime
    if runtime == "none":
        return skipped("node.container_runtime", node.name, "container_runtime is none in the settings")
    path, needle = RUNTIME_CONFIG[runtime]
    config = node.host.file(path)
    if not config.exists:
        return failed("node.container_runtime", node.name, f"{path} does not exist ({runtime})")
    if needle not in config.content_string:
        return failed(
            "node.container_runtime",
            node.name,
            f"{path} does not mention {needle}",
            f"$ cat {path}\n{config.content_string[:800]}",
        )
    return passed("node.container_runtime", node.name, f"{runtime} configured for nvidia", f"{path} mentions {needle}")


@check(
    "node.device_plugin_socket",
    "on Kubernetes nodes the device plugin's socket exists",
    "Deploy the NVIDIA device plugin on this node (gpuready provision cluster) and check its pod log.",
)
def device_plugin_socket(node: Node) -> Check:
    if not node.run(KUBELET_COMMAND).ok:
        return skipped("node.device_plugin_socket", node.name, "not a Kubernetes node (no /var/lib/kubelet)")
    if node.run(SOCKET_COMMAND).ok:
        return passed("node.device_plugin_socket", node.name, f"{DEVICE_PLUGIN_SOCKET} present")
    return failed(
        "node.device_plugin_socket",
        node.name,
        f"{DEVICE_PLUGIN_SOCKET} missing: the device plugin is not serving on this node",
    )


@check(
    "node.ib_ports",
    "on fabric nodes every listed IB port is Active at the node class's rate (ibstat)",
    "Check the cable and the subnet manager (opensm); ibdev2netdev maps ports; ibstat shows the state and rate.",
)
def ib_ports(node: Node) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ports:
        return skipped("node.ib_ports", node.name, "the node class has no fabric ports")
    problems, evidence = [], []
    for port in fabric.ports:
        answer = node.run(_ibstat(port))
        if answer.rc == 127:
            return skipped("node.ib_ports", node.name, "ibstat is not installed (install infiniband-diags)")
        evidence.append(answer.evidence(500))
        ports = nvsmi.parse_ibstat(answer.stdout)
        if not answer.ok or not ports:
            problems.append(f"{port}: ibstat exit {answer.rc}")
            continue
        for number, facts in sorted(ports.items()):
            state, rate = facts.get("State", "?"), _int_or_none(facts.get("Rate", ""))
            if state != "Active":
                problems.append(f"{port} port {number}: {state}")
            elif fabric.rate_gbps and (rate or 0) < fabric.rate_gbps:
                problems.append(f"{port} port {number}: rate {rate} Gb/s < node class {fabric.rate_gbps}")
    if problems:
        return failed("node.ib_ports", node.name, "ports not as expected: " + "; ".join(problems), "\n".join(evidence))
    rate = f" at >= {fabric.rate_gbps} Gb/s" if fabric.rate_gbps else ""
    return passed("node.ib_ports", node.name, f"{len(fabric.ports)} port(s) Active{rate}", "\n".join(evidence))


def _int_or_none(value: str) -> int | None:
    try:
        return int(float(value))
    except ValueError:
        return None


@check(
    "node.ib_flapping",
    "on fabric nodes, no InfiniBand/RDMA link went down since boot (kernel log)",
    "A port that goes down and up is a bad cable, transceiver or switch port: reseat or replace it.",
)
def ib_flapping(node: Node) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ports:
        return skipped("node.ib_flapping", node.name, "the node class has no fabric ports")
    log = node.run("dmesg")
    if not log.ok:
        return skipped("node.ib_flapping", node.name, "the kernel log cannot be read here", log.evidence(300))
    downs = nvsmi.link_down_events(log.stdout, fabric.ports)
    if downs:
        return failed(
            "node.ib_flapping",
            node.name,
            f"{len(downs)} link-down event(s) on the fabric since boot",
            "$ dmesg | grep link down\n" + "\n".join(downs[:20]),
        )
    return passed("node.ib_flapping", node.name, "no fabric link-down event since boot")


@check(
    "node.ats",
    "on fabric nodes with ats: true, ATS is enabled on the NIC (mlxconfig)",
    "mlxconfig -d <dev> set ATS_ENABLED=true, then reboot (gpuready provision cluster does it when fabric.ats).",
)
def ats(node: Node) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ats:
        return skipped("node.ats", node.name, "ATS not required by the node class")
    devices = fabric.mst_devices or fabric.ports
    problems, evidence = [], []
    for device in devices:
        answer = node.run(_mlxconfig(device))
        evidence.append(answer.evidence(500))
        values = [line.split()[-1] for line in answer.stdout.splitlines() if line.strip().startswith("ATS_ENABLED")]
        if not answer.ok or not values or not values[0].startswith("True"):
            problems.append(f"{device}: {values[0] if values else f'mlxconfig exit {answer.rc}'}")
    if problems:
        return failed("node.ats", node.name, "ATS not enabled: " + "; ".join(problems), "\n".join(evidence))
    return passed("node.ats", node.name, f"ATS enabled on {len(devices)} device(s)", "\n".join(evidence))


@check(
    "node.peermem",
    "on GPUDirect RDMA fabric nodes the nvidia_peermem module is loaded (lsmod)",
    "modprobe nvidia_peermem and add it to /etc/modules-load.d (NVIDIA GPUDirect RDMA guide; the GPU Operator "
    "sets driver.rdma.enabled).",
    depends=("driver.nvidia_module",),
)
def peermem(node: Node) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.gpudirect_rdma:
        return skipped("node.peermem", node.name, "the node class does not ask for GPUDirect RDMA")
    modules = nvsmi.parse_lsmod(node.modules.stdout)
    loaded = [m for m in ("nvidia_peermem", "nv_peer_mem") if m in modules]
    if loaded:
        return passed("node.peermem", node.name, f"{loaded[0]} loaded")
    return failed(
        "node.peermem", node.name, "nvidia_peermem is not loaded: GPUDirect RDMA is off", node.modules.evidence(600)
    )


@check(
    "node.fabric_manager",
    "on NVSwitch (HGX/DGX) nodes nvidia-fabricmanager is active and every GPU's fabric state is Completed/Success",
    "Install nvidia-fabricmanager of the same version as the driver and systemctl enable --now "
    "nvidia-fabricmanager; journalctl -u nvidia-fabricmanager says why it stopped.",
    depends=GPU_VIEW,
)
def fabric_manager(node: Node) -> Check:
    if not node.node_class.nvswitch:
        return skipped("node.fabric_manager", node.name, "the node class has no NVSwitch (nvswitch: false)")
    service = node.run(FABRIC_MANAGER_COMMAND)
    problems = []
    if service.stdout.strip() != "active":
        problems.append(f"nvidia-fabricmanager is {service.stdout.strip() or 'not installed'}")
    # Hopper and later report their NVSwitch fabric registration in the XML (<fabric><state>, <status>): the fabric
    # came up when it is Completed/Success ("In Progress" is still training). Their N/A is no registration at all;
    # older GPUs (and schemas without product_architecture) report N/A by design.
    states = {g.index: (g.fabric_state, g.fabric_status) for g in node.smi.gpus}
    registers = {g.index: g.architecture not in ("", *NO_FABRIC_REGISTRATION) for g in node.smi.gpus}
    problems += [
        f"GPU {i}: fabric {state or 'N/A'}/{status or 'N/A'}"
        for i, (state, status) in states.items()
        if (state not in nvsmi.NOT_AVAILABLE or registers[i])
        and (state != "Completed" or status not in ("Success", *nvsmi.NOT_AVAILABLE))
    ]
    evidence = (
        service.evidence(300)
        + "\nfabric state/status per GPU: "
        + ", ".join(f"{i}={a or 'N/A'}/{b or 'N/A'}" for i, (a, b) in states.items())
    )
    # B200, B300 as nvidia-smi names them ("NVIDIA B200"); GB200 and GB300 are Grace Blackwell racks.
    if any(w[:1] == "B" and w[1:].isdigit() and len(w) == 4 for g in node.smi.gpus for w in g.name.split()):
        nvlsm = node.run(NVLSM_COMMAND)
        evidence += "\n" + nvlsm.evidence(300)
        if "nvlsm" not in nvlsm.stdout:
            problems.append("NVLink Subnet Manager (nvlsm) is not running: an HGX Blackwell fabric needs it")
    if problems:
        return failed("node.fabric_manager", node.name, "; ".join(problems), evidence)
    return passed(
        "node.fabric_manager", node.name, "nvidia-fabricmanager active, fabric registration complete", evidence
    )


@check(
    "diag.dcgm",
    "DCGM diagnostics pass (dcgmi diag -r LEVEL -j, node_checks.dcgm_level, default 1) when DCGM is installed",
    "Read the failing test's message in the evidence; dcgmi diag -r 3 runs the longer tests; "
    "NVIDIA's DCGM user guide lists each test's remedy.",
    depends=GPU_VIEW,
)
def dcgm_diag(node: Node) -> Check:
    level = node.settings.node_checks.dcgm_level
    answer = node.run(dcgm_command(level))
    if _absent(answer, "== no dcgmi"):
        return skipped(
            "diag.dcgm",
            node.name,
            "DCGM not installed: install datacenter-gpu-manager-4 (NVIDIA's CUDA repository) "
            "and start nvidia-dcgm to run dcgmi diag",
        )
    if answer.rc in (124, 137):
        return failed(
            "diag.dcgm",
            node.name,
            f"dcgmi diag -r {level} ran past its {DCGM_TIMEOUTS[level]} s limit and was stopped",
            answer.evidence(1500),
        )
    try:
        results = nvsmi.parse_dcgm_diag(answer.stdout)
    except nvsmi.ParseError as e:
        return failed(
            "diag.dcgm", node.name, f"dcgmi diag did not answer in JSON (exit {answer.rc}): {e}", answer.evidence(1500)
        )
    if not results:
        return failed(
            "diag.dcgm", node.name, f"dcgmi diag answered no test result (exit {answer.rc})", answer.evidence(1500)
        )
    failing = [f"{name}: {status}" for name, status in results if status.lower() in ("fail", "failed")]
    if failing:
        return failed(
            "diag.dcgm", node.name, f"dcgmi diag -r {level} failed: " + "; ".join(failing[:6]), answer.evidence(3000)
        )
    return passed(
        "diag.dcgm", node.name, f"dcgmi diag -r {level}: {len(results)} result(s), none failed", answer.evidence(800)
    )


# ---------------------------------------------------------------- performance
PERF_REMEDY = (
    "A GPU below its mates or its model's reference: look at the evidence's samples, then at gpu.throttle, "
    "gpu.pcie_link and what else runs on the node; rerun, and drain the node if the figure stays low."
)
INSTALL_PROBE = "pip install torch built for CUDA (gpuready's probe measures through it)"


@dataclass
class _Measured:
    """What one tool said about one metric: figures, or why there are none (skip or fail)."""

    source: str = ""
    figures: list[perf.Figure] | None = None
    skip: str = ""
    fail: str = ""
    evidence: str = ""


def _absent(answer: Answer, mark: str) -> bool:
    """The tool is not there: its command printed ``mark``, or the shell found no such program (exit 127)."""
    return mark in answer.stdout or (answer.rc == 127 and not answer.stdout.strip())


def _probe(node: Node) -> tuple[dict | None, str, Answer]:
    """The probe's result; else (None, why) where the probe failed, (None, "") where torch (with CUDA) is missing."""
    answer = node.run(PROBE_COMMAND)
    if _absent(answer, "== no torch"):
        return None, "", answer
    try:
        data = tool_output.probe(answer.stdout)
    except nvsmi.ParseError as e:
        why = "stopped at its time limit" if answer.rc in (124, 137) else f"exit {answer.rc}"
        return None, f"gpuready's probe failed ({why}): {e}", answer
    if data.get("no_cuda"):  # a CPU-only torch: as if there were none
        return None, "", answer
    if data.get("error"):
        return None, f"gpuready's probe could not measure: {data['error']}", answer
    return data, "", answer


def _gpu_figures(node: Node, values: dict[int, list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    return [
        perf.Figure(
            f"GPU {index} ({gpus[index].bus_id})", gpus[index].name, samples, gpus[index], perf.busy([gpus[index]])
        )
        for index, samples in sorted(values.items())
        if index in gpus  # a device nvidia-smi does not list is no GPU of this node's (gpu.count says so)
    ]


def _from_probe(node: Node, key: str) -> _Measured:
    data, why, answer = _probe(node)
    if data is None:
        return _Measured(fail=why, evidence=answer.evidence(1500)) if why else _Measured(skip="no torch")
    values = {g["index"]: g[key] for g in data.get("gpus", []) if g.get(key)}
    source = f"gpuready's probe (torch {data.get('torch', '?')}, {data.get('dtype', '?')})"
    if not values:
        return _Measured(fail=f"gpuready's probe printed no {key} figure", evidence=answer.evidence(1500))
    return _Measured(source, _gpu_figures(node, values))


def _from_nvbandwidth(node: Node, test: str) -> _Measured:
    answer = node.run(NVBANDWIDTH_COMMAND)
    if _absent(answer, "== not installed"):
        return _Measured(skip="nvbandwidth")
    values = tool_output.nvbandwidth_per_gpu(answer.stdout, test)
    if not values:
        return _Measured(
            fail=f"nvbandwidth printed no {test} figure (exit {answer.rc})", evidence=answer.evidence(1500)
        )
    return _Measured(f"{_nvbandwidth_path(answer)} -t {test}, {SAMPLES} runs", _gpu_figures(node, values))


def _nvbandwidth_path(answer: Answer) -> str:
    """Which nvbandwidth ran (the command's first line names it)."""
    first = answer.stdout.split("\n", 1)[0]
    return first.removeprefix("== nvbandwidth ").strip() if first.startswith("== nvbandwidth ") else "nvbandwidth"


def _verdict(node: Node, id: str, metric: str, tries: list[Callable[[], _Measured]], install: str) -> Check:
    """The first tool that measured decides; one that is missing hands on to the next; none: skipped."""
    for attempt in tries:
        measured = attempt()
        if measured.fail:
            return failed(id, node.name, measured.fail, measured.evidence)
        if measured.figures is not None:
            return perf.judge(
                id,
                node.name,
                metric,
                measured.figures,
                measured.source,
                overrides=node.node_class.references,
            )
    return skipped(id, node.name, f"nothing here measures it: {install}")


@check(
    "perf.matmul_tflops",
    "dense matrix-product TFLOP/s per GPU in its fastest dense type (bf16, fp16 on Volta) at least the model's "
    "lower bound and 80% of its mates' median (gpuready's probe through torch)",
    PERF_REMEDY,
    depends=GPU_VIEW,
)
def matmul_tflops(node: Node) -> Check:
    return _verdict(
        node, "perf.matmul_tflops", "matmul_tflops", [lambda: _from_probe(node, "matmul_tflops")], INSTALL_PROBE
    )


@check(
    "perf.memory_bandwidth",
    "device memory bandwidth per GPU (a device-to-device copy) at least the model's lower bound and 80% of its "
    "mates' median (gpuready's probe through torch)",
    PERF_REMEDY,
    depends=GPU_VIEW,
)
def memory_bandwidth(node: Node) -> Check:
    return _verdict(
        node,
        "perf.memory_bandwidth",
        "memory_bandwidth",
        [lambda: _from_probe(node, "memory_bandwidth")],
        INSTALL_PROBE,
    )


@check(
    "perf.h2d_bandwidth",
    "pinned host-to-device copy bandwidth per GPU (nvbandwidth, else gpuready's probe) at least the model's "
    "lower bound (else the PCIe link's) and 80% of its mates' median",
    "A slow copy with a full-width link points at the host (NUMA placement, IOMMU); check gpu.pcie_link.",
    depends=GPU_VIEW,
)
def h2d_bandwidth(node: Node) -> Check:
    return _verdict(
        node,
        "perf.h2d_bandwidth",
        "h2d_bandwidth",
        [lambda: _from_nvbandwidth(node, tool_output.H2D_TEST), lambda: _from_probe(node, "h2d_bandwidth")],
        "build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or " + INSTALL_PROBE,
    )


@check(
    "perf.d2h_bandwidth",
    "pinned device-to-host copy bandwidth per GPU (nvbandwidth, else gpuready's probe) at least the model's "
    "lower bound (else the PCIe link's) and 80% of its mates' median",
    "A slow copy with a full-width link points at the host (NUMA placement, IOMMU); check gpu.pcie_link.",
    depends=GPU_VIEW,
)
def d2h_bandwidth(node: Node) -> Check:
    return _verdict(
        node,
        "perf.d2h_bandwidth",
        "d2h_bandwidth",
        [lambda: _from_nvbandwidth(node, tool_output.D2H_TEST), lambda: _from_probe(node, "d2h_bandwidth")],
        "build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or " + INSTALL_PROBE,
    )


def _pair_figures(node: Node, values: dict[tuple[int, int], list[float]]) -> list[perf.Figure]:
    gpus = {g.index: g for g in node.smi.gpus}
    figures = []
    for (a, b), samples in sorted(values.items()):
        pair = [gpus[i] for i in (a, b) if i in gpus]
        model = pair[0].name if pair else ""
        figures.append(perf.Figure(f"GPU {a} -> GPU {b}", model, samples, None, perf.busy(pair)))
    return figures


@check(
    "perf.p2p_bandwidth",
    "peer-to-peer copy bandwidth per GPU pair that allows it (nvbandwidth device_to_device_memcpy_read_ce, else "
    "gpuready's probe) at least the model's lower bound",
    "Check NVLink (topology.nvlink, topology.nvlink_errors) and the NVSwitch fabric (node.fabric_manager); "
    "a PCIe pair below its mates points at the PCIe switch or ACS settings.",
    depends=GPU_VIEW,
)
def p2p_bandwidth(node: Node) -> Check:
    id = "perf.p2p_bandwidth"
    if len(node.smi.gpus) < 2:
        return skipped(id, node.name, "one GPU: no peer-to-peer pair")
    answer = node.run(NVBANDWIDTH_COMMAND)
    if not _absent(answer, "== not installed"):
        pairs = tool_output.nvbandwidth_per_pair(answer.stdout)
        if not pairs:
            # nvbandwidth waives the test where no pair has peer access (NVIDIA/nvbandwidth issue #13).
            return skipped(
                id, node.name, "nvbandwidth measured no peer-to-peer pair (no pair allows it)", answer.evidence(800)
            )
        return perf.judge(
            id,
            node.name,
            "p2p_bandwidth",
            _pair_figures(node, pairs),
            f"{_nvbandwidth_path(answer)} -t {tool_output.P2P_TEST}, {SAMPLES} runs",
            overrides=node.node_class.references,
            per_gpu=False,
        )
    data, why, probe_answer = _probe(node)
    if why:
        return failed(id, node.name, why, probe_answer.evidence(1500))
    if data is None:
        return skipped(
            id,
            node.name,
            "nothing here measures it: build nvbandwidth (github.com/NVIDIA/nvbandwidth) and put it on PATH, or "
            + INSTALL_PROBE,
        )
    pairs = {tuple(p["pair"]): p["p2p_bandwidth"] for p in data.get("p2p", []) if p.get("p2p_bandwidth")}
    if not pairs:
        return skipped(id, node.name, "no GPU pair allows peer-to-peer access (torch.cuda.can_device_access_peer)")
    return perf.judge(
        id,
        node.name,
        "p2p_bandwidth",
        _pair_figures(node, pairs),  # type: ignore[arg-type]
        f"gpuready's probe (torch {data.get('torch', '?')})",
        overrides=node.node_class.references,
        per_gpu=False,
    )


@check(
    "perf.nccl_allreduce",
    "NCCL all-reduce bus bandwidth within the node (nccl-tests all_reduce_perf, else gpuready's probe through "
    "torch's NCCL) at least the model's lower bound",
    "Check NVLink/NVSwitch health (topology.nvlink, node.fabric_manager) and "
    "that no other job runs; compare with the reference table in docs/node-checks.md.",
    depends=GPU_VIEW,
)
def nccl_allreduce(node: Node) -> Check:
    id = "perf.nccl_allreduce"
    gpus = node.smi.gpus
    if len(gpus) < 2:
        # all_reduce_perf on one GPU reports a bus bandwidth of 0: there is no link within the node to measure.
        return skipped(id, node.name, "one GPU: no all-reduce within the node")
    answer = node.run(NCCL_COMMAND)
    if not _absent(answer, "== not installed"):
        samples, source, evidence = tool_output.nccl_busbw(answer.stdout), "nccl-tests all_reduce_perf", answer
    else:
        data, why, evidence = _probe(node)
        if why:
            return failed(id, node.name, why, evidence.evidence(1500))
        if data is None:
            return skipped(
                id,
                node.name,
                "nothing here runs NCCL: build all_reduce_perf (github.com/NVIDIA/nccl-tests) and put it on PATH, "
                "or " + INSTALL_PROBE,
            )
        if data.get("nccl_error"):
            return failed(id, node.name, f"NCCL all-reduce through torch failed: {data['nccl_error']}")
        samples, source = data.get("nccl_allreduce_busbw") or [], f"gpuready's probe (torch {data.get('torch')})"
    if not samples or not any(samples):
        return failed(
            id, node.name, f"no bus bandwidth figure in the output (exit {evidence.rc})", evidence.evidence(1500)
        )
    figure = perf.Figure(f"{len(gpus)} GPUs", gpus[0].name, samples, None, perf.busy(gpus))
    return perf.judge(
        id, node.name, "nccl_allreduce_busbw", [figure], source, overrides=node.node_class.references, per_gpu=False
    )


#: The performance checks and the commands each may run: they run in a second batch, after the fixed one,
#: so the other checks never wait for a measurement, and only when selected.
PERF_COMMANDS = {
    "perf.matmul_tflops": [PROBE_COMMAND],
    "perf.memory_bandwidth": [PROBE_COMMAND],
    "perf.h2d_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND],
    "perf.d2h_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND],
    "perf.p2p_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND],
    "perf.nccl_allreduce": [NCCL_COMMAND, PROBE_COMMAND],
}
_TIMEOUTS = {PROBE_COMMAND: PROBE_TIMEOUT, NVBANDWIDTH_COMMAND: NVBANDWIDTH_TIMEOUT, NCCL_COMMAND: NCCL_TIMEOUT}


def perf_commands(settings: Settings, only: set[str] | None = None) -> list[str]:
    """The measuring commands of the selected checks (diag.dcgm's at its level included), each once."""
    chosen = [i for i in [*PERF_COMMANDS, "diag.dcgm"] if only is None or i in only]
    commands = [c for i in chosen if i in PERF_COMMANDS for c in PERF_COMMANDS[i]]
    if "diag.dcgm" in chosen:
        commands.append(dcgm_command(settings.node_checks.dcgm_level))
    return list(dict.fromkeys(commands))


def perf_budget(settings: Settings, only: set[str] | None = None) -> int:
    """Seconds the measuring batch may take: the sum of its commands' limits (they run one after another)."""
    level = settings.node_checks.dcgm_level
    limits = {**_TIMEOUTS, dcgm_command(level): DCGM_TIMEOUTS[level]}
    return sum(limits[c] for c in perf_commands(settings, only)) + 10 if perf_commands(settings, only) else 0


CHECK_IDS = [c.id for c in CATALOGUE]
#: Checks that measure (they run their commands in the second batch).
MEASURING = ("diag.dcgm", *PERF_COMMANDS)


def _ibstat(port: str) -> str:
    return f"ibstat {shlex.quote(port)}"


def _mlxconfig(device: str) -> str:
    return f"mlxconfig -d {shlex.quote(device)} q ATS_ENABLED"


def prefetch_commands(node: Node) -> list[str]:
    """The commands the catalogue will run on this node, known before any check runs."""
    fabric = node.node_class.fabric
    extra = []
    if fabric is not None:
        extra += [_ibstat(p) for p in fabric.ports]
        if fabric.ats:
            extra += [_mlxconfig(d) for d in fabric.mst_devices or fabric.ports]
    return PREFETCH + extra


#: The fixed commands the catalogue runs, sent to a host in one round trip before the checks.
PREFETCH = [
    MODULES_COMMAND,
    "nvidia-smi -q -x",
    "dmesg",
    JOURNAL_COMMAND,
    UPTIME_COMMAND,
    LSPCI_COMMAND,
    "nvidia-smi nvlink -s",
    "nvidia-smi nvlink -e",
    "nvidia-smi topo -p2p r",
    "getenforce",
    DEVICES_COMMAND,
    LABELS_COMMAND,
    VECTOR_ADD_COMMAND,
    KUBELET_COMMAND,
    SOCKET_COMMAND,
    FABRIC_MANAGER_COMMAND,
]
