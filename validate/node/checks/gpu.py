"""Each GPU: on the bus, counted, its model, persistence, ECC and memory health, slowdowns, PCIe, MIG, Xids.

Checks that judge each GPU's nvidia-smi -q -x fields on their own are rows of :func:`per_gpu`; the counters judged
per hour or minute of the uptime, rows of :func:`rate`."""

from __future__ import annotations

import operator
from collections.abc import Callable

from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi, recovery
from gpuready.validate.node import xid as xids
from gpuready.validate.node.checks.commands import JOURNAL_COMMAND, LSPCI_COMMAND, UPTIME_COMMAND
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node


@check(
    "gpu.pci_bus",
    "every NVIDIA GPU on the PCI bus (lspci -n, else /sys/bus/pci) is seen by nvidia-smi",
    "A GPU on the bus that nvidia-smi does not list has fallen off or failed to initialise: check dmesg for "
    "Xid 79/NVRM errors, reseat it, run the field diagnostics.",
    depends=GPU_VIEW,
)
def pci_bus(node: Node, v: Verdict) -> Check:
    answer = node.run(LSPCI_COMMAND)
    if answer.rc == 127 or (not answer.ok and not answer.stdout.strip()):
        return v.skipped("lspci is not installed (install pciutils)", answer.evidence(300))
    on_bus = nvsmi.parse_lspci_gpus(answer.stdout)
    if not on_bus and answer.stdout.startswith(nvsmi.SYSFS_MARK):
        return v.skipped(
            "lspci is not installed and /sys/bus/pci lists no NVIDIA GPU (install pciutils)", answer.evidence(300)
        )
    seen = {_short_bus_id(g.bus_id) for g in node.smi.gpus}
    missing = sorted(set(on_bus) - seen)
    evidence = answer.evidence(1200) + "\nnvidia-smi: " + ", ".join(sorted(seen))
    if missing:
        return v.failed(
            f"{len(on_bus)} NVIDIA GPUs on the PCI bus, nvidia-smi sees {len(seen)}; not seen: {', '.join(missing)}",
            evidence,
        )
    return v.passed(f"{len(on_bus)} GPUs on the bus, all seen by nvidia-smi", evidence)


def _short_bus_id(bus_id: str) -> str:
    """00000000:1A:00.0 (nvidia-smi) -> 1a:00.0 (lspci)."""
    return bus_id.lower().split(":", 1)[1] if bus_id.count(":") == 2 else bus_id.lower()


@check(
    "gpu.count",
    "as many GPUs as the node class says (nvidia-smi -q -x)",
    "Reseat or replace the missing GPU; check lspci and dmesg for a GPU that fell off the bus (Xid 79).",
    depends=(*GPU_VIEW, "gpu.pci_bus"),
)
def gpu_count(node: Node, v: Verdict) -> Check:
    gpus = node.smi.gpus
    want = node.node_class.gpu_count
    evidence = "nvidia-smi -q -x: " + ", ".join(f"GPU {g.index} {g.bus_id} {g.name}" for g in gpus)
    if len(gpus) == want:
        return v.passed(f"{len(gpus)} GPUs", evidence)
    return v.failed(f"{len(gpus)} GPUs visible, the node class expects {want}", evidence)


@check(
    "gpu.model",
    "every GPU is the node class's model (nvidia-smi -q -x product_name)",
    "Fix gpuready.node_classes[...].gpu_model or gpuready_node_class for this host, or the hardware.",
    depends=GPU_VIEW,
)
def gpu_model(node: Node, v: Verdict) -> Check:
    gpus = node.smi.gpus
    want = node.node_class.gpu_model
    if not gpus:
        return v.skipped("no GPU visible (see gpu.count)")
    wrong = [f"GPU {g.index}: {g.name}" for g in gpus if g.name != want]
    evidence = "nvidia-smi -q -x: " + ", ".join(f"GPU {g.index}: {g.name}" for g in gpus)
    if not wrong:
        return v.passed(f"{len(gpus)}x {want}", evidence)
    return v.failed(f"expected {want!r}; " + "; ".join(wrong), evidence)


def per_gpu(
    id: str,
    what: str,
    remedy: str,
    *,
    passing: str | Callable[[Node], str],
    bad: Callable[[Node, nvsmi.Gpu], str],
    facts: Callable[[nvsmi.Gpu], str],
    note: Callable[[nvsmi.Gpu], str] | None = None,
    unless: Callable[[Node], str] | None = None,
) -> None:
    """Register a check that judges each GPU on its own (nvidia-smi -q -x): failed where ``bad`` says why for any
    GPU; ``note`` adds what passes but is worth seeing (e.g. a narrower link the node class does not forbid);
    ``unless`` names why the check does not apply to the node. The evidence is ``facts`` of each GPU: the fields
    this check judged, so a report at 1000 nodes does not repeat every GPU's whole record under every check."""

    def judge(node: Node, v: Verdict) -> Check:
        if unless and (reason := unless(node)):
            return v.skipped(reason)
        gpus = node.smi.gpus
        if not gpus:
            return v.skipped("no GPU visible (see gpu.count)")
        problems = [f"GPU {g.index} ({g.bus_id}): {why}" for g in gpus if (why := bad(node, g))]
        evidence = "nvidia-smi -q -x:\n" + "\n".join(f"GPU {g.index} {g.bus_id}: {facts(g)}" for g in gpus)
        if problems:
            return v.failed("; ".join(problems), evidence)
        notes = [f"GPU {g.index}: {n}" for g in gpus if note and (n := note(g))]
        message = passing if isinstance(passing, str) else passing(node)
        return v.passed(message + (" (" + "; ".join(notes) + ")" if notes else ""), evidence)

    check(id, what, remedy, depends=GPU_VIEW)(judge)


def rate(
    id: str,
    what: str,
    remedy: str,
    *,
    limit: str,
    count: Callable[[nvsmi.Gpu], int | None],
    unit_seconds: int,
    read: str,
    none: str,
    shown: str,
    high: str,
    low: str,
    fails: Callable[[float, float], bool],
    quiet: str = "",
) -> None:
    """Register a check of a counter that starts at the driver load, judged per unit of the time it covers (at
    most the uptime; under one unit counts as one, so a few events just after boot are not a high rate).

    ``limit`` names the node_checks setting (0: off); ``count`` is a GPU's counter, None where it has none, ``read``
    where nvidia-smi -q -x reports it; ``fails`` compares a rate with the limit. The templates take ``g``, ``count``,
    ``window`` (in units), ``rate`` and ``limit``: a GPU's evidence line (``shown``), why it fails (``high``), the
    passing message with the highest rate (``low``). ``quiet`` passes a node whose counters are all 0, uptime unread.
    """

    def judge(node: Node, v: Verdict) -> Check:
        most: float = getattr(node.settings.node_checks, limit)
        counted = [g for g in node.smi.gpus if count(g) is not None]
        if not most:
            return v.skipped(f"turned off (node_checks.{limit}: 0)")
        if not counted:
            return v.skipped(none)
        judged = [g for g in counted if count(g) or not quiet]
        if not judged:
            return v.passed(quiet)
        uptime = xids.parse_uptime(node.run(UPTIME_COMMAND).stdout)
        if uptime is None:
            return v.skipped(f"the uptime cannot be read ({UPTIME_COMMAND})")
        window = max(uptime / unit_seconds, 1.0)
        rates = {g.index: (count(g) or 0) / window for g in judged}
        evidence = f"$ {UPTIME_COMMAND}: {uptime:.0f} s; nvidia-smi -q -x {read}:\n" + "\n".join(
            f"GPU {g.index} {g.bus_id}: " + shown.format(g=g, rate=rates[g.index]) for g in judged
        )
        failing = [
            f"GPU {g.index} ({g.bus_id}): "
            + high.format(count=count(g), window=window, rate=rates[g.index], limit=most)
            for g in judged
            if fails(rates[g.index], most)
        ]
        return v.passed_if(not failing, low.format(rate=max(rates.values()), limit=most), "; ".join(failing), evidence)

    check(id, what, remedy, depends=GPU_VIEW)(judge)


# "N/A" (vGPU guests, Windows, some platforms) or absent (old schemas): the mode does not apply there.
per_gpu(
    "gpu.persistence",
    "persistence mode is Enabled on every GPU (N/A on vGPU guests and some platforms)",
    "Enable it at boot: systemctl enable --now nvidia-persistenced (driver 580 logs that the legacy "
    "nvidia-smi -pm 1 is deprecated and points to nvidia-persistenced).",
    passing="no GPU with persistence mode Disabled",
    bad=lambda _, g: f"persistence mode {g.persistence}" if g.persistence == "Disabled" else "",
    note=lambda g: (
        "" if g.persistence == "Enabled" else f"persistence mode {g.persistence or 'not reported'}, not applicable"
    ),
    facts=lambda g: (
        f"persistence={g.persistence or 'not reported'} virtualization={g.virtualization or 'not reported'}"
    ),
)


def _uncorrectable(_: Node, g: nvsmi.Gpu) -> str:
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


def _ecc_note(g: nvsmi.Gpu) -> str:
    if g.ecc_mode and g.ecc_mode != "Enabled":
        return f"ECC {g.ecc_mode}"
    lifetime = sum(g.aggregate_uncorrectable.values())
    return f"{lifetime} uncorrectable in its lifetime (aggregate)" if lifetime else ""


per_gpu(
    "gpu.ecc_volatile",
    "no uncorrectable ECC error since the driver loaded (every DRAM and SRAM counter), SRAM threshold not exceeded",
    "Drain the node, reset the GPU (nvidia-smi -r) and run the field diagnostics; RMA if errors return.",
    passing="no volatile uncorrectable ECC errors",
    bad=_uncorrectable,
    note=_ecc_note,
    facts=lambda g: (
        f"ecc={g.ecc_mode or 'not reported'} volatile_uncorrectable={g.volatile_uncorrectable or 'none'} "
        f"aggregate_uncorrectable={g.aggregate_uncorrectable or 'none'} "
        f"sram_threshold_exceeded={g.sram_threshold_exceeded}"
    ),
)
# The limit: NVIDIA DCGM's DCGM_LIMIT_MAX_SBE_RATE = 10 (NVIDIA/DCGM common/DcgmGPUHardwareLimits.h), per hour.
rate(
    "gpu.ecc_correctable_rate",
    "corrected (single-bit) ECC errors per hour under the limit on every GPU (volatile counters over the uptime)",
    "A GPU correcting this many errors is degrading: watch its retired pages / remapped rows, drain it and run "
    "the field diagnostics (dcgmi diag -r 3) before it turns uncorrectable.",
    limit="correctable_errors_per_hour",
    count=lambda g: sum(g.volatile_correctable.values()) if g.volatile_correctable else None,
    unit_seconds=3600,
    read="ecc_errors/volatile",
    none="no GPU reports corrected-error counters (ECC off or not supported)",
    shown="{g.volatile_correctable} -> {rate:.1f}/h",
    high="{count} corrected in {window:.1f} h = {rate:.1f}/h >= {limit:g}/h",
    low="at most {rate:.1f} corrected errors/h (< {limit:g}/h)",
    fails=operator.ge,
)


def _memory_problems(node: Node, g: nvsmi.Gpu) -> str:
    # The limit: NVIDIA DCGM's DCGM_LIMIT_MAX_RETIRED_PAGES = 63 (NVIDIA/DCGM common/DcgmGPUHardwareLimits.h).
    limit = node.settings.node_checks.retired_pages_limit
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


per_gpu(
    "gpu.retired_pages",
    "retired pages under NVIDIA's replacement threshold, nothing pending; row remapping neither pending nor "
    "failed; no memory flagged unrepairable",
    "Pending retirement/remapping/repair: reset the GPU or reboot. Threshold reached, remapping failed or memory "
    "unrepairable: drain, run the field diagnostics, RMA.",
    passing="nothing pending, under the thresholds",
    bad=_memory_problems,
    note=lambda g: f"{retired} retired pages" if (retired := (g.retired_sbe or 0) + (g.retired_dbe or 0)) else "",
    facts=lambda g: (
        f"retired sbe/dbe={g.retired_sbe}/{g.retired_dbe} retired_pending={g.retired_pending} "
        f"remapped pending/failure={g.remapped_pending}/{g.remapped_failure} "
        f"repair_pending={','.join(g.repair_pending) or 'none'} unrepairable_memory={g.unrepairable_memory}"
    ),
)
per_gpu(
    "gpu.throttle",
    "no hardware slowdown (HW slowdown, thermal, power brake) active",
    "Check cooling, airflow and power supply; nvidia-smi -q -d PERFORMANCE shows the active reason.",
    passing="no hardware slowdown active",
    bad=lambda _, g: "hardware slowdown active: " + ", ".join(g.slowdowns) if g.slowdowns else "",
    note=lambda g: "benign: " + ", ".join(g.benign_reasons) if g.benign_reasons else "",
    facts=lambda g: f"slowdowns={','.join(g.slowdowns) or 'none'} benign={','.join(g.benign_reasons) or 'none'}",
)


def _link_problems(node: Node, g: nvsmi.Gpu) -> str:
    # An idle GPU lowers its current generation to save power: the generation is judged on the link's
    # negotiated maximum, the width on the current link (it does not drop at idle on data-centre GPUs).
    # A link that trained narrower than the GPU's maximum width halves (or worse) its host bandwidth:
    # it fails unless the node class declares the narrower slot, as Oracle Cloud's GPU fleet check for
    # missing PCIe lanes fails it (oracle/oci-dr-hpc-v2, scripts/BM.GPU.H100.8/
    # pcie_width_missing_lanes_check.py: every H100's LnkSta must read Width x16).
    want_gen, want_width = node.node_class.pcie_gen, node.node_class.pcie_width
    problems = []
    if _busy(g) and g.pcie_gen and g.pcie_max_gen and g.pcie_gen < g.pcie_max_gen:
        problems.append(
            f"link at gen {g.pcie_gen} of its gen {g.pcie_max_gen} while the GPU is {g.utilization} % busy "
            "(trained down under load)"
        )
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


#: NVML's GPU utilisation (``utilization/gpu_util``) is the percent of the last sample period (1/6 s to 1 s) in
#: which a kernel ran (NVML API reference, nvmlUtilization_t). A GPU at 10 % or more has left its idle state for
#: that sample, so its link runs at its working speed: a lower current generation then is a link that trained
#: down, not idle power saving (an idle GPU drops its link generation, NVIDIA's nvidia-smi documentation of
#: "PCIe Generation Current").
BUSY_PERCENT = 10


def _busy(g: nvsmi.Gpu) -> bool:
    return g.utilization is not None and g.utilization >= BUSY_PERCENT


def _slower_link(g: nvsmi.Gpu) -> str:
    gpu_max = g.pcie_device_max_gen or g.pcie_max_gen
    if g.pcie_max_gen and gpu_max and g.pcie_max_gen < gpu_max:
        limit = f", host max gen {g.pcie_host_max_gen}" if g.pcie_host_max_gen else ""
        return f"link max gen {g.pcie_max_gen} < GPU's gen {gpu_max}{limit}"
    return ""


def _links_reach(node: Node) -> str:
    want_gen, want_width = node.node_class.pcie_gen, node.node_class.pcie_width
    declared = " and ".join(
        filter(None, [f"gen {want_gen}" if want_gen else "", f"x{want_width}" if want_width else ""])
    )
    return f"links reach the node class's {declared}" if declared else "links at the GPUs' full width"


per_gpu(
    "gpu.pcie_link",
    "PCIe link as wide as the GPU's maximum (or the node class's narrower pcie_width) and at the class's generation; "
    "a busy GPU's link at its full generation",
    "Reseat the GPU or riser (a link narrower than its maximum has missing lanes), set the slot to its maximum "
    "generation in the BIOS, check lspci -vv LnkSta; a slot narrower by design is declared as pcie_width.",
    passing=_links_reach,
    bad=_link_problems,
    note=_slower_link,
    facts=lambda g: (
        f"pcie gen cur/max/gpu/host={g.pcie_gen}/{g.pcie_max_gen}/{g.pcie_device_max_gen}/{g.pcie_host_max_gen} "
        f"width cur/max=x{g.pcie_width}/x{g.pcie_max_width} "
        f"utilization={'not reported' if g.utilization is None else f'{g.utilization} %'}"
    ),
)
# One reading gives an average: one above the per-minute limit means at least one minute was above it.
# Shorter bursts need two readings a minute apart, as DCGM's health watch takes (dcgmi health).
# The limit: NVIDIA DCGM's DCGM_LIMIT_MAX_PCIREPLAY_RATE = 8 per minute (NVIDIA/DCGM common/DcgmGPUHardwareLimits.h).
rate(
    "gpu.pcie_replay",
    "PCIe replays per minute under the limit on every GPU (nvidia-smi -q -x replay_counter over the uptime)",
    "Many replays mean a marginal link: reseat the GPU or riser, check the slot and cables; nvidia-smi -q -d PCIE.",
    limit="pcie_replays_per_minute",
    count=lambda g: g.pcie_replays,
    unit_seconds=60,
    read="pci/replay_counter",
    none="no GPU reports a PCIe replay counter",
    shown="{g.pcie_replays} -> {rate:.2f}/min",
    high="{count} PCIe replays in {window:.0f} min = {rate:.2f}/min > {limit:g}/min",
    low="at most {rate:.2f} PCIe replays/min (<= {limit:g}/min)",
    fails=operator.gt,
    quiet="no PCIe replays",
)


def _mig_target(node: Node) -> str:
    return "Enabled" if node.node_class.mig else "Disabled"


def _mig_problem(node: Node, g: nvsmi.Gpu) -> str:
    if g.mig_current in nvsmi.NOT_AVAILABLE:
        return "MIG not supported on this GPU" if node.node_class.mig else ""
    if g.mig_current != _mig_target(node):
        return f"MIG {g.mig_current}, the node class wants {_mig_target(node)}"
    if g.mig_pending and g.mig_pending != g.mig_current:
        return f"MIG change to {g.mig_pending} pending (reset the GPU)"
    return ""


per_gpu(
    "gpu.mig",
    "MIG mode as the node class declares, nothing pending (nvidia-smi -q -x mig_mode)",
    "Set MIG mode as the node class says (nvidia-smi -mig 1|0, or the GPU Operator's MIG manager) and reset "
    "the GPU so a pending change takes effect.",
    unless=lambda node: (
        "the node class does not declare a MIG mode (mig: true|false)" if node.node_class.mig is None else ""
    ),
    passing=lambda node: f"MIG {_mig_target(node)}",
    bad=_mig_problem,
    facts=lambda g: f"mig current/pending={g.mig_current or 'not reported'}/{g.mig_pending or 'not reported'}",
)


@check(
    "gpu.recovery_action",
    "no GPU asks for a recovery action (nvidia-smi -q -x gpu_recovery_action None; no 'GPU requires reset')",
    "Do what the GPU's recovery action says (the failing message names it): reset the GPU, drain P2P, reboot, "
    "recover the IMEX domain.",
    depends=GPU_VIEW,
)
def recovery_action(node: Node, v: Verdict) -> Check:
    gpus = node.smi.gpus
    if not gpus:
        return v.skipped("no GPU visible (see gpu.count)")
    evidence = "nvidia-smi -q -x:\n" + "\n".join(
        f"GPU {g.index} {g.bus_id}: gpu_recovery_action={g.recovery_action or 'not reported'} "
        f"reset_required={g.reset_required}"
        for g in gpus
    )
    asking = {
        g.index: (g.recovery_action if g.recovery_action not in ("", "None") else "GPU requires reset")
        for g in gpus
        if g.recovery_action not in ("", "None") or g.reset_required
    }
    if asking:
        bus = {g.index: g.bus_id for g in gpus}
        message = "; ".join(f"GPU {i} ({bus[i]}): recovery action {a}" for i, a in asking.items())
        remedy = "; ".join(sorted({f"{a}: {recovery.remedy(a)}" for a in asking.values()}))
        found = v.failed(message, evidence, remedy)
        return recovery.RecoveryCheck(**vars(found), asking={i: (bus[i], a) for i, a in asking.items()})
    if not any(g.recovery_action for g in gpus):
        return v.skipped("no GPU reports a recovery action (drivers before 550, or older schemas)", evidence)
    return v.passed("no GPU asks for a recovery action", evidence)


@check(
    "gpu.xid",
    "no Xid whose immediate action in NVIDIA's Xid catalog needs the node (a GPU reset, a reboot, diagnostics) in "
    "the kernel log within the window",
    "Do NVIDIA's immediate action for the Xid (the failing remedy names it per Xid: reset the GPU, reboot, run the "
    "field diagnostics); if it recurs, its investigatory action.",
    depends=GPU_VIEW,
)
def xid(node: Node, v: Verdict) -> Check:
    settings = node.settings.node_checks
    answer = node.run("dmesg")
    if not answer.ok:
        answer = node.run(JOURNAL_COMMAND)
    if not answer.ok:
        return v.skipped("the kernel log cannot be read here (dmesg and journalctl -k failed)", answer.evidence(300))
    found = xids.events(answer.stdout)
    uptime = xids.parse_uptime(node.run(UPTIME_COMMAND).stdout)
    recent = xids.recent(found, uptime, settings.xid_window_hours)
    window = f"last {settings.xid_window_hours:g} h" if settings.xid_window_hours else "since boot"
    kinds = {id(e): xids.judged_kind(e, recent) for e in recent}
    fatal = [e for e in recent if kinds[id(e)] in settings.xid_fail_classes]
    evidence = f"$ {answer.command}  (uptime {uptime}s, window {window})\n" + "\n".join(
        f"[{kinds.get(id(e), e.kind)}] Xid {e.code} ({e.description}; NVIDIA: {e.action or 'not in the catalog'}): "
        f"{e.line}"
        for e in found[:30]
    )
    if fatal:
        failing = sorted({kinds[id(e)] for e in fatal})
        codes = ", ".join(sorted({f"{e.code} ({e.description})" for e in fatal}))
        # NVIDIA's immediate action per Xid first (an Xid 154 names the recovery action), then the class's course.
        actions = [f"Xid {e.code}: {e.action}" for e in _first_of_each(fatal) if e.action]
        remedy = "; ".join(actions + [f"{k}: {xids.REMEDY[k]}" for k in failing])
        return v.failed(f"{'/'.join(failing)} Xid in the {window}: {codes}", evidence, remedy)
    if found:
        other = len(found) - len(recent)
        return v.passed(
            f"no failing Xid in the {window} ({len(recent)} application Xid(s) in it, {other} older)", evidence
        )
    return v.passed("no Xid since boot")


def _first_of_each(events: list[xids.XidEvent]) -> list[xids.XidEvent]:
    """One event per Xid code and action (an Xid 154 per recovery action, an Xid 144-150 per decoded sub-code), in
    code order."""
    seen: dict[tuple[int, str], xids.XidEvent] = {}
    for e in events:
        seen.setdefault((e.code, e.action), e)
    return [seen[k] for k in sorted(seen)]
