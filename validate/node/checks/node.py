"""The node around the GPUs: device files, SELinux labels, the container runtime, Kubernetes, the fabric,
Fabric Manager, DCGM's diagnostics."""

from __future__ import annotations

import fnmatch

from gpuready.core import role_defaults
from gpuready.core.results import Check
from gpuready.core.verdict import Verdict
from gpuready.validate.node import nvsmi, tool_output
from gpuready.validate.node.checks.commands import (
    DCGM_TIMEOUTS,
    DEVICE_PLUGIN_SOCKET,
    DEVICES_COMMAND,
    FABRIC_MANAGER_COMMAND,
    JUDGE_ON_HOST,
    KUBELET_COMMAND,
    LABELS_COMMAND,
    NO_FABRIC_REGISTRATION,
    NVLSM_COMMAND,
    RUNTIME_CONFIG,
    SELINUX_LABELS,
    SOCKET_COMMAND,
    dcgm_command,
    ibstat_command,
    inside_container,
    mlxconfig_command,
    tool_absent,
)
from gpuready.validate.node.checks.driver import GPU_VIEW
from gpuready.validate.node.checks.registry import check
from gpuready.validate.node.node import Node, NoGpuView, decode


@check(
    "node.devices",
    "/dev/nvidiactl, /dev/nvidia-uvm and one /dev/nvidiaN per GPU are character devices",
    "Load nvidia-uvm and create the nodes: nvidia-modprobe -u -c=0 (or reboot after installing the driver).",
    depends=("driver.nvidia_module",),
)
def devices(node: Node, v: Verdict) -> Check:
    try:
        minors = [g.minor for g in node.smi.gpus]
    except NoGpuView:
        minors = []
    answer = node.run(DEVICES_COMMAND)
    kinds = dict(line.split(" ", 1) for line in answer.stdout.splitlines() if " " in line)
    paths = ["/dev/nvidiactl", "/dev/nvidia-uvm", *(f"/dev/nvidia{m}" for m in minors)]
    missing = [p for p in paths if kinds.get(p) != "character"]
    if missing:
        # A container's device files are made from the host's when it starts: one the host made later (nvidia-uvm
        # at the first CUDA call) is missing there until the container restarts, so the message says where it ran.
        container = inside_container(node)
        where = f" ({container}: its device files date from its start; {JUDGE_ON_HOST})" if container else ""
        return v.failed("missing: " + ", ".join(missing) + where, answer.evidence(600))
    return v.passed(f"{len(paths)} device files present", answer.evidence(600))


def _host_only(node: Node, v: Verdict, why: str) -> Check | None:
    """Skipped, not judged, where the checks run inside a container (``why``: what the container shows instead of
    the host); None on the host itself."""
    container = inside_container(node)
    return v.skipped(f"not judged: {container}, {why}; {JUDGE_ON_HOST}") if container else None


@check(
    "node.selinux_labels",
    "with SELinux enforcing, NVIDIA files carry the seed's labels",
    "Relabel: "
    + " && ".join(
        f"semanage fcontext -a -f {c.get('ftype', 'a')} -t {c['setype']} '{c['target']}'"
        for c in role_defaults.selinux_file_contexts()
        if "nvidia" in c["path"]
    )
    + " && restorecon -Rv /dev /usr/bin (gpuready provision cluster does this when "
    "selinux.manage_file_contexts is on).",
)
def selinux_labels(node: Node, v: Verdict) -> Check:
    # A container's /dev/nvidia* are the runtime's copies under the container's label, not the host's files.
    if skip := _host_only(node, v, "where the device files carry the container's labels"):
        return skip
    mode = node.run("getenforce")
    if not mode.ok:
        return v.skipped("SELinux not installed (no getenforce)")
    if mode.stdout.strip() != "Enforcing":
        return v.skipped(f"SELinux is {mode.stdout.strip()}, labels do not apply")
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
        return v.failed("; ".join(wrong), evidence)
    return v.passed(f"{len(seen)} files labelled as required", evidence)


@check(
    "node.container_runtime",
    "the container runtime's configuration names the nvidia runtime",
    "Run gpuready provision cluster (nvidia-ctk runtime configure --runtime=<runtime>), then restart it.",
)
def container_runtime(node: Node, v: Verdict) -> Check:
    runtime = node.settings.container_runtime
    if runtime == "none":
        return v.skipped("container_runtime is none in the settings")
    path, needle = RUNTIME_CONFIG[runtime]
    # Its /etc is the image's: the host's runtime configuration is not there to read.
    if skip := _host_only(node, v, f"where {path} is the image's, not the host's"):
        return skip
    config = node.host.file(path)
    if not config.exists:
        return v.failed(f"{path} does not exist ({runtime})")
    text, _ = decode(config.content)  # a stray byte that is not UTF-8 must not stop the host's validation
    if needle not in text:
        return v.failed(f"{path} does not mention {needle}", f"$ cat {path}\n{text[:800]}")
    return v.passed(f"{runtime} configured for nvidia", f"{path} mentions {needle}")


@check(
    "node.device_plugin_socket",
    "on Kubernetes nodes the device plugin's socket exists",
    "Deploy the NVIDIA device plugin on this node (gpuready provision cluster) and check its pod log.",
)
def device_plugin_socket(node: Node, v: Verdict) -> Check:
    # The kubelet's directory is the host's, not mounted into the checks' container.
    if skip := _host_only(node, v, "which does not see the host's /var/lib/kubelet"):
        return skip
    if not node.run(KUBELET_COMMAND).ok:
        return v.skipped("not a Kubernetes node (no /var/lib/kubelet)")
    if node.run(SOCKET_COMMAND).ok:
        return v.passed(f"{DEVICE_PLUGIN_SOCKET} present")
    return v.failed(f"{DEVICE_PLUGIN_SOCKET} missing: the device plugin is not serving on this node")


@check(
    "node.ib_ports",
    "on fabric nodes every listed IB port is Active at the node class's rate (ibstat)",
    "Check the cable and the subnet manager (opensm); ibdev2netdev maps ports; ibstat shows the state and rate.",
)
def ib_ports(node: Node, v: Verdict) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ports:
        return v.skipped("the node class has no fabric ports")
    problems, evidence = [], []
    for port in fabric.ports:
        answer = node.run(ibstat_command(port))
        if answer.rc == 127:
            return v.skipped("ibstat is not installed (install infiniband-diags)")
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
        return v.failed("ports not as expected: " + "; ".join(problems), "\n".join(evidence))
    at_rate = f" at >= {fabric.rate_gbps} Gb/s" if fabric.rate_gbps else ""
    return v.passed(f"{len(fabric.ports)} port(s) Active{at_rate}", "\n".join(evidence))


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
def ib_flapping(node: Node, v: Verdict) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ports:
        return v.skipped("the node class has no fabric ports")
    log = node.run("dmesg")
    if not log.ok:
        return v.skipped("the kernel log cannot be read here", log.evidence(300))
    downs = nvsmi.link_down_events(log.stdout, fabric.ports)
    if downs:
        return v.failed(
            f"{len(downs)} link-down event(s) on the fabric since boot",
            "$ dmesg | grep link down\n" + "\n".join(downs[:20]),
        )
    return v.passed("no fabric link-down event since boot")


@check(
    "node.ats",
    "on fabric nodes with ats: true, ATS is enabled on the NIC and active (mlxconfig -e: Current, else Next Boot)",
    "mlxconfig -d <dev> set ATS_ENABLED=true (gpuready provision cluster does it when fabric.ats), then a firmware "
    "reset (mlxfwreset -d <dev> reset) or reboot makes it the Current value.",
)
def ats(node: Node, v: Verdict) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ats:
        return v.skipped("ATS not required by the node class")
    devices = fabric.mst_devices or fabric.ports
    problems, evidence = [], []
    for device in devices:
        answer = node.run(mlxconfig_command(device))
        evidence.append(answer.evidence(500))
        current, next_boot = nvsmi.parse_mlxconfig(answer.stdout, "ATS_ENABLED")
        # The running firmware's value where mlxconfig reports it; a value only set for the next boot is not active.
        active = current or next_boot
        if not answer.ok or not active:
            problems.append(f"{device}: mlxconfig exit {answer.rc}")
        elif not active.startswith("True"):
            waiting = (
                " (True(1) set for the next boot: firmware reset or reboot pending)"
                if current and next_boot.startswith("True")
                else ""
            )
            problems.append(f"{device}: {active}{waiting}")
    if problems:
        return v.failed("ATS not enabled: " + "; ".join(problems), "\n".join(evidence))
    return v.passed(f"ATS enabled on {len(devices)} device(s)", "\n".join(evidence))


@check(
    "node.peermem",
    "on GPUDirect RDMA fabric nodes the nvidia_peermem module is loaded (lsmod)",
    "modprobe nvidia_peermem and add it to /etc/modules-load.d (NVIDIA GPUDirect RDMA guide; the GPU Operator "
    "sets driver.rdma.enabled).",
    depends=("driver.nvidia_module",),
)
def peermem(node: Node, v: Verdict) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.gpudirect_rdma:
        return v.skipped("the node class does not ask for GPUDirect RDMA")
    modules = nvsmi.parse_lsmod(node.modules.stdout)
    loaded = [m for m in ("nvidia_peermem", "nv_peer_mem") if m in modules]
    if loaded:
        return v.passed(f"{loaded[0]} loaded")
    return v.failed("nvidia_peermem is not loaded: GPUDirect RDMA is off", node.modules.evidence(600))


@check(
    "node.fabric_manager",
    "on NVSwitch (HGX/DGX) nodes nvidia-fabricmanager is active and every GPU's fabric state is Completed/Success",
    "Install nvidia-fabricmanager of the same version as the driver and systemctl enable --now "
    "nvidia-fabricmanager; journalctl -u nvidia-fabricmanager says why it stopped.",
    depends=GPU_VIEW,
)
def fabric_manager(node: Node, v: Verdict) -> Check:
    if not node.node_class.nvswitch:
        return v.skipped("the node class has no NVSwitch (nvswitch: false)")
    service = node.run(FABRIC_MANAGER_COMMAND)
    problems = []
    # Inside a container systemctl asks the container, not the host's systemd: the service is not judged there,
    # the GPUs' fabric registration (from nvidia-smi, the same inside) still is.
    container = inside_container(node)
    if not container and service.stdout.strip() != "active":
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
        (f"service not judged: {container}; {JUDGE_ON_HOST}" if container else service.evidence(300))
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
        return v.failed("; ".join(problems), evidence)
    said = "fabric registration complete" if container else "nvidia-fabricmanager active, fabric registration complete"
    return v.passed(said, evidence)


@check(
    "diag.dcgm",
    "DCGM diagnostics pass (dcgmi diag -r LEVEL -j, node_checks.dcgm_level, default 1) when DCGM is installed",
    "Read the failing test's message in the evidence; dcgmi diag -r 3 runs the longer tests; "
    "NVIDIA's DCGM user guide lists each test's remedy.",
    depends=GPU_VIEW,
)
def dcgm_diag(node: Node, v: Verdict) -> Check:
    level = node.settings.node_checks.dcgm_level
    answer = node.run(dcgm_command(level))
    if tool_absent(answer, "== no dcgmi"):
        return v.skipped(
            "DCGM not installed: install datacenter-gpu-manager-4 (NVIDIA's CUDA repository) "
            "and start nvidia-dcgm to run dcgmi diag"
        )
    if answer.rc in (124, 137):
        return v.failed(
            f"dcgmi diag -r {level} ran past its {DCGM_TIMEOUTS[level]} s limit and was stopped", answer.evidence(1500)
        )
    try:
        results = nvsmi.parse_dcgm_diag(answer.stdout)
    except nvsmi.ParseError as e:
        return v.failed(f"dcgmi diag did not answer in JSON (exit {answer.rc}): {e}", answer.evidence(1500))
    if not results:
        return v.failed(f"dcgmi diag answered no test result (exit {answer.rc})", answer.evidence(1500))
    failing = [f"{name}: {status}" for name, status in results if status.lower() in ("fail", "failed")]
    # Levels 2 and up carry figures (host copies, GEMM rates): named first in the evidence, DCGM's JSON after.
    try:
        figures = tool_output.dcgm_figures_line(answer.stdout)
    except nvsmi.ParseError:
        figures = ""
    head = f"{figures}\n" if figures else ""
    if failing:
        return v.failed(f"dcgmi diag -r {level} failed: " + "; ".join(failing[:6]), head + answer.evidence(3000))
    return v.passed(f"dcgmi diag -r {level}: {len(results)} result(s), none failed", head + answer.evidence(800))
