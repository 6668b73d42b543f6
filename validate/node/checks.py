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

from gpuready.core.results import Check, errored, failed, passed, skipped
from gpuready.validate.node import nvsmi
from gpuready.validate.node.node import MODULES_COMMAND, QUERY_FIELDS, Node, NoGpuView

#: Seed 002: "permission denied" means these labels are wrong (SELinux enforcing only).
SELINUX_LABELS = {"/dev/nvidia*": "xserver_misc_device_t", "/usr/bin/nvidia-*": "xserver_exec_t"}

RUNTIME_CONFIG = {
    "containerd": ("/etc/containerd/config.toml", "nvidia"),
    "docker": ("/etc/docker/daemon.json", "nvidia"),
    "crio": ("/etc/crio/crio.conf.d/99-nvidia.conf", "nvidia"),
    "crio-oci-hook": ("/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json", "nvidia-container"),
}
# One listing each, whatever the number of GPUs: the file type per path, the label per path.
DEVICES_COMMAND = "for f in /dev/nvidia*; do [ -c \"$f\" ] && echo \"$f character\" || echo \"$f other\"; done"
LABELS_COMMAND = ("for f in " + " ".join(SELINUX_LABELS) + "; do [ -e \"$f\" ] && printf '%s %s\\n' \"$f\" "
                  "\"$(getfattr --only-values -n security.selinux \"$f\" 2>/dev/null)\"; done; true")
DEVICE_PLUGIN_SOCKET = "/var/lib/kubelet/device-plugins/nvidia.sock"
KUBELET_COMMAND = "test -d /var/lib/kubelet"
SOCKET_COMMAND = f"test -S {DEVICE_PLUGIN_SOCKET}"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckDef:
    id: str
    run: Callable[[Node], Check]
    remedy: str
    what: str


CATALOGUE: list[CheckDef] = []


def check(id: str, what: str, remedy: str) -> Callable[[Callable[[Node], Check]], Callable[[Node], Check]]:
    def register(func: Callable[[Node], Check]) -> Callable[[Node], Check]:
        CATALOGUE.append(CheckDef(id, func, remedy, what))
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



# ---------------------------------------------------------------- driver
@check("driver.nvidia_module", "the nvidia kernel module is loaded (lsmod)",
       "Install the driver (gpuready provision cluster) and load it: modprobe nvidia; check dmesg for NVRM errors.")
def nvidia_module(node: Node) -> Check:
    answer = node.modules
    if "nvidia" in nvsmi.parse_lsmod(answer.stdout):
        return passed("driver.nvidia_module", node.name, "nvidia module loaded", answer.evidence(300))
    return failed("driver.nvidia_module", node.name, "the nvidia kernel module is not loaded", answer.evidence(600))


@check("driver.nouveau_absent", "the nouveau module is not loaded (lsmod)",
       "Blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf), rebuild the initramfs and reboot.")
def nouveau_absent(node: Node) -> Check:
    answer = node.modules
    if "nouveau" in nvsmi.parse_lsmod(answer.stdout):
        return failed("driver.nouveau_absent", node.name, "nouveau is loaded: it holds the GPUs the nvidia "
                      "driver needs", answer.evidence(600))
    return passed("driver.nouveau_absent", node.name, "nouveau not loaded")


@check("driver.nvidia_smi", "nvidia-smi answers (nvidia-smi -q -x exits 0)",
       "Run nvidia-smi on the node: a driver/library version mismatch needs a reboot; a missing driver, an install.")
def nvidia_smi(node: Node) -> Check:
    answer = node.smi_xml
    if answer.ok:
        return passed("driver.nvidia_smi", node.name, f"nvidia-smi answers ({len(node.smi.gpus)} GPUs)")
    if answer.rc == 127:
        return failed("driver.nvidia_smi", node.name, "nvidia-smi not found: no NVIDIA driver installed",
                      answer.evidence())
    return failed("driver.nvidia_smi", node.name, f"nvidia-smi failed (exit {answer.rc})", answer.evidence())


@check("driver.version", "the driver version equals gpuready.driver.version (or its branch)",
       "Provision the pinned driver: gpuready provision cluster (reboot if the old module is still loaded).")
def driver_version(node: Node) -> Check:
    pin = node.settings.driver
    version = node.smi.driver_version
    evidence = f"driver_version={version} (nvidia-smi -q -x); pinned version={pin.version!r} branch={pin.branch}"
    branch = pin.branch.split("-")[0]
    if pin.version:
        ok, want = version == pin.version, pin.version
    else:
        ok, want = version.split(".")[0] == branch, f"branch {branch}"
    if ok:
        return passed("driver.version", node.name, f"driver {version}", evidence)
    return failed("driver.version", node.name, f"driver {version or '?'} is installed, the inventory pins {want}",
                  evidence)


# ---------------------------------------------------------------- GPUs
@check("gpu.count", "as many GPUs as the node class says (--query-gpu)",
       "Reseat or replace the missing GPU; check lspci and dmesg for a GPU that fell off the bus (Xid 79).")
def gpu_count(node: Node) -> Check:
    rows = node.gpus_csv()
    want = node.node_class.gpu_count
    evidence = node.query.evidence()
    if len(rows) == want:
        return passed("gpu.count", node.name, f"{len(rows)} GPUs", evidence)
    return failed("gpu.count", node.name, f"{len(rows)} GPUs visible, the node class expects {want}", evidence)


@check("gpu.model", "every GPU is the node class's model (--query-gpu=name)",
       "Fix gpuready.node_classes[...].gpu_model or gpuready_node_class for this host, or the hardware.")
def gpu_model(node: Node) -> Check:
    rows = node.gpus_csv()
    want = node.node_class.gpu_model
    if not rows:
        return skipped("gpu.model", node.name, "no GPU visible (see gpu.count)")
    wrong = [f"GPU {r['index']}: {r['name']}" for r in rows if r["name"] != want]
    if not wrong:
        return passed("gpu.model", node.name, f"{len(rows)}x {want}", node.query.evidence())
    return failed("gpu.model", node.name, f"expected {want!r}; " + "; ".join(wrong), node.query.evidence())


def _per_gpu(node: Node, id: str, bad: Callable[[nvsmi.Gpu], str], ok_message: str) -> Check:
    gpus = node.smi.gpus
    if not gpus:
        return skipped(id, node.name, "no GPU visible (see gpu.count)")
    problems = [f"GPU {g.index} ({g.bus_id}): {why}" for g in gpus if (why := bad(g))]
    evidence = "nvidia-smi -q -x:\n" + "\n".join(f"GPU {g.index} {g.bus_id}: {_facts(g)}" for g in gpus)
    if problems:
        return failed(id, node.name, "; ".join(problems), evidence)
    return passed(id, node.name, ok_message, evidence)


def _facts(g: nvsmi.Gpu) -> str:
    return (f"persistence={g.persistence} volatile_uncorrectable={g.volatile_uncorrectable} "
            f"retired_pending={g.retired_pending} remapped_pending={g.remapped_pending} "
            f"slowdowns={','.join(g.slowdowns) or 'none'} pcie=gen{g.pcie_max_gen}/dev-gen{g.pcie_device_max_gen} "
            f"x{g.pcie_width}/x{g.pcie_max_width}")


@check("gpu.persistence", "persistence mode is Enabled on every GPU",
       "Enable it at boot: systemctl enable --now nvidia-persistenced (or nvidia-smi -pm 1).")
def persistence(node: Node) -> Check:
    return _per_gpu(node, "gpu.persistence",
                    lambda g: "" if g.persistence == "Enabled" else f"persistence mode {g.persistence}",
                    "persistence mode on")


@check("gpu.ecc_volatile", "no volatile uncorrectable ECC errors",
       "Drain the node, reset the GPU (nvidia-smi -r) and run the field diagnostics; RMA if errors return.")
def ecc_volatile(node: Node) -> Check:
    return _per_gpu(node, "gpu.ecc_volatile",
                    lambda g: f"{g.volatile_uncorrectable} volatile uncorrectable ECC errors"
                    if g.volatile_uncorrectable else "",
                    "no volatile uncorrectable ECC errors")


@check("gpu.retired_pages", "no page retirement or row remapping pending",
       "Reset the GPU or reboot the node so pending retirements/remappings take effect; RMA on remapping failure.")
def retired_pages(node: Node) -> Check:
    def bad(g: nvsmi.Gpu) -> str:
        return ", ".join(w for w, on in (("page retirement pending", g.retired_pending),
                                         ("row remapping pending or failed", g.remapped_pending)) if on)
    return _per_gpu(node, "gpu.retired_pages", bad, "nothing pending")


@check("gpu.throttle", "no hardware or thermal slowdown active at idle",
       "Check cooling, airflow and power supply; nvidia-smi -q -d PERFORMANCE shows the active reason.")
def throttle(node: Node) -> Check:
    return _per_gpu(node, "gpu.throttle",
                    lambda g: "slowdown active: " + ", ".join(g.slowdowns) if g.slowdowns else "",
                    "no slowdown active")


@check("gpu.pcie_link", "PCIe link at the GPU's maximum generation and width",
       "Reseat the GPU or riser, set the slot to its maximum generation in the BIOS, check lspci -vv LnkSta.")
def pcie_link(node: Node) -> Check:
    # An idle GPU lowers its current generation to save power, so the negotiated maximum is compared.
    def bad(g: nvsmi.Gpu) -> str:
        problems = []
        if g.pcie_max_gen and g.pcie_device_max_gen and g.pcie_max_gen < g.pcie_device_max_gen:
            problems.append(f"link gen {g.pcie_max_gen} < GPU's gen {g.pcie_device_max_gen}")
        if g.pcie_width and g.pcie_max_width and g.pcie_width < g.pcie_max_width:
            problems.append(f"width x{g.pcie_width} < x{g.pcie_max_width}")
        return ", ".join(problems)
    return _per_gpu(node, "gpu.pcie_link", bad, "PCIe links at their maximum")


@check("gpu.xid", "no Xid (GPU error) in the kernel log since boot (dmesg)",
       "Look the Xid code up in NVIDIA's Xid catalogue; 48/63/64/74/79/94/95 need a drain and a GPU reset or RMA.")
def xid(node: Node) -> Check:
    node.smi  # noqa: B018 - without a readable GPU the check fails with that reason first
    answer = node.run("dmesg")
    if not answer.ok:
        answer = node.run("journalctl -k -b --no-pager -q")
    if not answer.ok:
        return skipped("gpu.xid", node.name, "the kernel log cannot be read here (dmesg and journalctl -k failed)",
                       answer.evidence(300))
    events = nvsmi.xid_events(answer.stdout)
    if events:
        return failed("gpu.xid", node.name, f"{len(events)} Xid event(s) since boot: {events[0]}",
                      "$ " + answer.command + "\n" + "\n".join(events[:20]))
    return passed("gpu.xid", node.name, "no Xid since boot")


# ---------------------------------------------------------------- topology
@check("topology.nvlink", "every GPU has the node class's NVLink links up (nvidia-smi nvlink -s)",
       "Reseat the NVLink bridge (PCIe) or check the baseboard (SXM); run the field diagnostics.")
def nvlink(node: Node) -> Check:
    want = node.node_class.nvlink_links_per_gpu
    if not want:
        return skipped("topology.nvlink", node.name, "the node class expects no NVLink (nvlink_links_per_gpu: 0)")
    node.smi  # noqa: B018
    answer = node.run("nvidia-smi nvlink -s")
    if not answer.ok:
        return failed("topology.nvlink", node.name, f"nvidia-smi nvlink -s failed (exit {answer.rc})",
                      answer.evidence())
    links = nvsmi.parse_nvlink_status(answer.stdout)
    problems = []
    for gpu in node.smi.gpus:
        up = sum(links.get(gpu.index, {}).values())
        if up < want:
            down = [str(n) for n, ok in sorted(links.get(gpu.index, {}).items()) if not ok]
            problems.append(f"GPU {gpu.index}: {up}/{want} links up" + (f" (down: {','.join(down)})" if down else ""))
    if problems:
        return failed("topology.nvlink", node.name, "; ".join(problems), answer.evidence())
    return passed("topology.nvlink", node.name, f"{want} links up on each GPU", answer.evidence(600))


@check("topology.p2p", "peer-to-peer reads possible between the class's GPU pairs (nvidia-smi topo -p2p r)",
       "Attach NVLink-bridged GPUs together; enable ATS/ACS settings for peer-to-peer (seed 003).")
def p2p(node: Node) -> Check:
    pairs = node.node_class.p2p_pairs
    if not pairs:
        return skipped("topology.p2p", node.name, "the node class names no p2p_pairs")
    node.smi  # noqa: B018
    answer = node.run("nvidia-smi topo -p2p r")
    if not answer.ok:
        return failed("topology.p2p", node.name, f"nvidia-smi topo -p2p r failed (exit {answer.rc})",
                      answer.evidence())
    matrix = nvsmi.parse_p2p_matrix(answer.stdout)
    bad = [f"GPU{a}<->GPU{b}: {matrix.get((a, b), 'absent')}" for a, b in pairs if matrix.get((a, b)) != "OK"]
    if bad:
        return failed("topology.p2p", node.name, "peer-to-peer not possible: " + "; ".join(bad), answer.evidence())
    return passed("topology.p2p", node.name, f"{len(pairs)} pair(s) peer-to-peer capable", answer.evidence(600))


# ---------------------------------------------------------------- compute
VECTOR_ADD_PASS = "Test PASSED"


@check("compute.vector_add", "a vector add passes on every GPU (cuda-samples vectorAdd, cupy or torch)",
       "Install the CUDA samples (vectorAdd) or a CUDA Python library; a failure on one GPU points at that GPU.")
def vector_add(node: Node) -> Check:
    gpus = node.smi.gpus
    if not gpus:
        return failed("compute.vector_add", node.name, "no GPU visible to compute on")
    answer = node.run(VECTOR_ADD_COMMAND)
    if "== no program" in answer.stdout:
        return skipped("compute.vector_add", node.name,
                       "no vector add available (neither vectorAdd, cupy nor torch on the node)")
    sections = answer.stdout.split("== GPU ")[1:]
    failing = [s.split("\n", 1)[0] for s in sections if VECTOR_ADD_PASS not in s or "== rc=0" not in s]
    if len(sections) != len(gpus) or failing:
        which = ", ".join(failing) if failing else f"(output for {len(sections)} of {len(gpus)} GPUs)"
        return failed("compute.vector_add", node.name, f"vector add failed on GPU {which}", answer.evidence(3000))
    return passed("compute.vector_add", node.name, f"{VECTOR_ADD_PASS} on {len(gpus)} GPUs", answer.evidence(600))


_CUPY = ("python3 -c \"import cupy as c; a=c.arange(50000,dtype=c.float32); b=a*2; "
         "assert bool((a+b==a*3).all()); print('Test PASSED')\"")
_TORCH = ("python3 -c \"import torch as t; a=t.rand(50000,device='cuda'); b=t.rand(50000,device='cuda'); "
          "assert t.allclose((a+b).cpu(),a.cpu()+b.cpu()); print('Test PASSED')\"")
#: One command whatever the node has: it picks the program there and runs it once per GPU index.
VECTOR_ADD_COMMAND = (
    "P=; if command -v vectorAdd >/dev/null 2>&1; then P=vectorAdd; "
    "elif [ -x /usr/local/cuda/extras/demo_suite/vectorAdd ]; then P=/usr/local/cuda/extras/demo_suite/vectorAdd; "
    f"elif python3 -c 'import cupy' >/dev/null 2>&1; then P={shlex.quote(_CUPY)}; "
    f"elif python3 -c 'import torch' >/dev/null 2>&1; then P={shlex.quote(_TORCH)}; fi; "
    "if [ -z \"$P\" ]; then echo '== no program'; else "
    "for i in $(nvidia-smi --query-gpu=index --format=csv,noheader); do echo \"== GPU $i\"; "
    "CUDA_VISIBLE_DEVICES=$i sh -c \"$P\"; echo \"== rc=$?\"; done; fi"
)


# ---------------------------------------------------------------- node
@check("node.devices", "/dev/nvidiactl, /dev/nvidia-uvm and one /dev/nvidiaN per GPU are character devices",
       "Load nvidia-uvm and create the nodes: nvidia-modprobe -u -c=0 (or reboot after installing the driver).")
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


@check("node.selinux_labels", "with SELinux enforcing, NVIDIA files carry the seed's labels",
       "Relabel: semanage fcontext -a -t xserver_misc_device_t '/dev/nvidia.*' && restorecon -Rv /dev "
       "(gpuready provision cluster does this when selinux.manage_file_contexts is on).")
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


@check("node.container_runtime", "the container runtime's configuration names the nvidia runtime",
       "Run gpuready provision cluster (nvidia-ctk runtime configure --runtime=<runtime>), then restart it.")
def container_runtime(node: Node) -> Check:
    runtime = node.settings.container_runtime
    if runtime == "none":
        return skipped("node.container_runtime", node.name, "container_runtime is none in the settings")
    path, needle = RUNTIME_CONFIG[runtime]
    config = node.host.file(path)
    if not config.exists:
        return failed("node.container_runtime", node.name, f"{path} does not exist ({runtime})")
    if needle not in config.content_string:
        return failed("node.container_runtime", node.name, f"{path} does not mention {needle}",
                      f"$ cat {path}\n{config.content_string[:800]}")
    return passed("node.container_runtime", node.name, f"{runtime} configured for nvidia", f"{path} mentions {needle}")


@check("node.device_plugin_socket", "on Kubernetes nodes the device plugin's socket exists",
       "Deploy the NVIDIA device plugin on this node (gpuready provision cluster) and check its pod log.")
def device_plugin_socket(node: Node) -> Check:
    if not node.run(KUBELET_COMMAND).ok:
        return skipped("node.device_plugin_socket", node.name, "not a Kubernetes node (no /var/lib/kubelet)")
    if node.run(SOCKET_COMMAND).ok:
        return passed("node.device_plugin_socket", node.name, f"{DEVICE_PLUGIN_SOCKET} present")
    return failed("node.device_plugin_socket", node.name, f"{DEVICE_PLUGIN_SOCKET} missing: the device plugin "
                  "is not serving on this node")


@check("node.ib_ports", "on fabric nodes every listed IB port is Active (ibstat)",
       "Check the cable and the subnet manager (opensm); ibdev2netdev maps ports; ibstat shows the state.")
def ib_ports(node: Node) -> Check:
    fabric = node.node_class.fabric
    if fabric is None or not fabric.ports:
        return skipped("node.ib_ports", node.name, "the node class has no fabric ports")
    problems, evidence = [], []
    for port in fabric.ports:
        answer = node.run(_ibstat(port))
        evidence.append(answer.evidence(500))
        states = [line.split(":", 1)[1].strip() for line in answer.stdout.splitlines()
                  if line.strip().startswith("State:")]
        if not answer.ok or not states or any(s != "Active" for s in states):
            problems.append(f"{port}: {', '.join(states) or f'ibstat exit {answer.rc}'}")
    if problems:
        return failed("node.ib_ports", node.name, "ports not Active: " + "; ".join(problems), "\n".join(evidence))
    return passed("node.ib_ports", node.name, f"{len(fabric.ports)} port(s) Active", "\n".join(evidence))


@check("node.ats", "on fabric nodes with ats: true, ATS is enabled on the NIC (mlxconfig)",
       "mlxconfig -d <dev> set ATS_ENABLED=true, then reboot (gpuready provision cluster does it when fabric.ats).")
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


CHECK_IDS = [c.id for c in CATALOGUE]

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
PREFETCH = [MODULES_COMMAND, "nvidia-smi -q -x",
            f"nvidia-smi --query-gpu={','.join(QUERY_FIELDS)} --format=csv,noheader",
            "dmesg", "nvidia-smi nvlink -s", "nvidia-smi topo -p2p r", "getenforce", DEVICES_COMMAND,
            LABELS_COMMAND, VECTOR_ADD_COMMAND, KUBELET_COMMAND, SOCKET_COMMAND]
