"""The commands the catalogue sends to a node: the fixed batch sent before the checks, and the measuring
batch sent after them."""

from __future__ import annotations

import shlex
from importlib.resources import files
from typing import TYPE_CHECKING

from gpuready.core import role_defaults
from gpuready.validate.node import nvsmi
from gpuready.validate.node.node import MODULES_COMMAND, Answer

if TYPE_CHECKING:
    from gpuready.core.settings import Settings
    from gpuready.validate.node.node import Node

#: The Dell/Red Hat TFJobs paper: "permission denied" means these labels are wrong (SELinux enforcing only).
#: The labels the policy gives NVIDIA's device nodes and the gpu_selinux role's rule for its binaries (the
#: role's kubelet context is the cluster's business).
SELINUX_LABELS = {
    c["path"]: c["setype"]
    for c in [*role_defaults.selinux_policy_labels(), *role_defaults.selinux_file_contexts()]
    if "nvidia" in c["path"]
}

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
# Whether these commands run inside a container, whose /dev and /etc are its own, not the host's: a runtime makes
# a container's device files with the container's own SELinux label, and its /etc is the image's. Podman
# creates /run/.containerenv "in each container to indicate to programs they are running in a container"
# (podman-run(1), DESCRIPTION); Docker creates /.dockerenv; systemd-detect-virt reads the same two files
# (systemd src/basic/virt.c, detect_container_files). Regular files only: a lab host masks its machine's marker
# with a device node. A Kubernetes pod has neither, but a DaemonSet with hostPID: true sees the host's init as
# PID 1, so a mount namespace other than PID 1's (namespaces(7): two processes share a namespace when their
# /proc/PID/ns links match) means our /dev is not the host's. Without the right to read PID 1's link
# (not root), nothing is printed: not known to be a container.
CONTAINER_COMMAND = (
    "if [ -f /run/.containerenv ]; then echo 'podman /run/.containerenv'; "
    "elif [ -f /.dockerenv ]; then echo 'docker /.dockerenv'; "
    "else s=$(readlink /proc/self/ns/mnt 2>/dev/null); o=$(readlink /proc/1/ns/mnt 2>/dev/null); "
    '[ -n "$o" ] && [ "$s" != "$o" ] && echo "mount-namespace $s $o"; fi; true'
)
#: What each answer of CONTAINER_COMMAND says, as a check's message puts it.
_CONTAINER_SIGNS = {
    "podman": "podman's /run/.containerenv is there",
    "docker": "Docker's /.dockerenv is there",
    "mount-namespace": "its mount namespace is not that of PID 1, the host's init (hostPID)",
}
#: Where a check that cannot be judged from inside a container is judged instead.
JUDGE_ON_HOST = "judge it with `gpuready validate gpu-node` over SSH on the node"


def inside_container(node: Node) -> str:
    """Why the node's commands run inside a container ("" where they do not, or it cannot be told)."""
    words = node.run(CONTAINER_COMMAND).stdout.split()
    if not words or words[0] not in _CONTAINER_SIGNS:
        return ""
    return f"the checks run inside a container ({_CONTAINER_SIGNS[words[0]]})"


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
# The IMEX service of a multi-node NVLink domain (GB200/GB300 NVL): its unit state, then the whole domain's status
# as the command service reports it (NVIDIA IMEX guide, "IMEX Command Service": `nvidia-imex-ctl -N` "gets the full
# status of the entire IMEX domain"). It asks every node's daemon, so it is bounded. Asked only on such nodes.
IMEX_COMMAND = (
    'echo "service: $(systemctl is-active nvidia-imex 2>/dev/null || true)"; timeout 30 nvidia-imex-ctl -N 2>&1 || true'
)
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
#: The DCGM plugins that measure what the perf checks judge, run by name with bounded work instead of a whole
#: level (dcgmi diag reference, "-r": "a comma-separated list of named tests"; "-p": test_name.parameter=value,
#: several separated by ";" as dcgmi's own help shows; NVIDIA's "Diagnostic Configuration File" reference: such a
#: parameter replaces the packaged diag-skus.yaml value for that request only): pcie's pinned host copies only (its
#: test_unpinned,
#: test_p2p_on and test_p2p_off switches, nvvs/include/PluginStrings.h: peers are nvbandwidth's job),
#: targeted_stress for 10 s instead of its default 30 (test_duration, TargetedStress_wrapper.cpp: it also
#: logs one info message per GPU a second, and DCGM 4.6 keeps 128 per test, DCGM_DIAG_TEST_RUN_INFO_INDICES_MAX_V2
#: in dcgmlib/dcgm_structs.h, so a short run leaves room for each GPU's final figure), and memory_bandwidth
#: (a STREAM Triad, no duration parameter). -v keeps each GPU's info messages, where the figures are.
DCGM_PERF_TESTS = "pcie,targeted_stress,memory_bandwidth"
DCGM_PERF_PARAMETERS = (
    "pcie.test_unpinned=false;pcie.test_p2p_on=false;pcie.test_p2p_off=false;targeted_stress.test_duration=10"
)
DCGM_PERF_TIMEOUT = 110
#: Where torch sees a GPU, gpuready's probe measures every figure DCGM's plugins would, so DCGM is not run: a node
#: with both pays for one measurement, not two (the check tries the probe first).
PROBE_MEASURES = "python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1"
DCGM_PERF_COMMAND = (
    f"if {PROBE_MEASURES}; then echo '== measured by the probe'; elif command -v dcgmi >/dev/null 2>&1; then "
    f"timeout {DCGM_PERF_TIMEOUT} dcgmi diag -r {DCGM_PERF_TESTS} -p '{DCGM_PERF_PARAMETERS}' -j -v; "
    "else echo '== no dcgmi'; fi"
)
#: Samples of each figure: the checks judge their median and show their spread.
SAMPLES = 3
NCCL_TIMEOUT, NVBANDWIDTH_TIMEOUT, PROBE_TIMEOUT = 180, 240, 420
# The message size of the bound it is judged against (references.py): Azure's health checks measure 16 GiB
# on 80 GB and larger GPUs (conf/nd96isr_h100_v5.conf line 52, nd96isr_h200_v5.conf line 53,
# nd96amsr_a100_v4.conf line 57: check_nccl_allreduce ... 16G) and 8 GiB on 32/40 GB ones (nd96asr_v4.conf
# line 57, nd40rs_v2.conf line 42: ... 8G); 2 GiB on GPUs under 32 GB, where two 8 GiB buffers would not fit.
# -N prints each of SAMPLES cycles, -c 0 skips the result check.
NCCL_COMMAND = (
    "if command -v all_reduce_perf >/dev/null 2>&1; then "
    "M=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | sort -n | head -1); "
    'if [ "${M:-0}" -ge 64000 ] 2>/dev/null; then S=16G; elif [ "${M:-0}" -ge 32000 ] 2>/dev/null; then S=8G; '
    "else S=2G; fi; "
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
#: Whether DCGM is installed, asked only where neither nvbandwidth (DCGM 4's copy included) nor the probe measured
#: peers, so that the skip can say what DCGM here lacks.
DCGMI_COMMAND = "command -v dcgmi 2>/dev/null || echo '== no dcgmi'"
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


def tool_absent(answer: Answer, mark: str) -> bool:
    """The tool is not there: its command printed ``mark``, or the shell found no such program (exit 127)."""
    return mark in answer.stdout or (answer.rc == 127 and not answer.stdout.strip())


#: The performance checks and the commands each may run: they run after the fixed ones in the host's one session,
#: so the other checks never wait for a measurement, and only when selected.
PERF_COMMANDS = {
    "perf.matmul_tflops": [PROBE_COMMAND, DCGM_PERF_COMMAND],
    "perf.memory_bandwidth": [PROBE_COMMAND, DCGM_PERF_COMMAND],
    "perf.h2d_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND, DCGM_PERF_COMMAND],
    "perf.d2h_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND, DCGM_PERF_COMMAND],
    "perf.p2p_bandwidth": [NVBANDWIDTH_COMMAND, PROBE_COMMAND, DCGMI_COMMAND],
    "perf.nccl_allreduce": [NCCL_COMMAND, PROBE_COMMAND],
}
_TIMEOUTS = {
    PROBE_COMMAND: PROBE_TIMEOUT,
    NVBANDWIDTH_COMMAND: NVBANDWIDTH_TIMEOUT,
    NCCL_COMMAND: NCCL_TIMEOUT,
    DCGM_PERF_COMMAND: DCGM_PERF_TIMEOUT,
    DCGMI_COMMAND: 5,
}


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


#: Checks that measure (their commands follow the fixed ones, on the same connection).
MEASURING = ("diag.dcgm", *PERF_COMMANDS)


def ibstat_command(port: str) -> str:
    return f"ibstat {shlex.quote(port)}"


def mlxconfig_command(device: str) -> str:
    """-e: the Current column beside Next Boot (a value set with mlxconfig is active only after a firmware reset)."""
    return f"mlxconfig -d {shlex.quote(device)} -e q ATS_ENABLED"


def prefetch_commands(node: Node, only: set[str] | None = None) -> list[str]:
    """The commands the catalogue will run on this node, known before any check runs; the vector add (a CUDA
    program per GPU) only when compute.vector_add is selected."""
    fabric = node.node_class.fabric
    extra = []
    if fabric is not None:
        extra += [ibstat_command(p) for p in fabric.ports]
        if fabric.ats:
            extra += [mlxconfig_command(d) for d in fabric.mst_devices or fabric.ports]
    fixed = PREFETCH
    if only is not None and "compute.vector_add" not in only:
        fixed = [c for c in PREFETCH if c != VECTOR_ADD_COMMAND]
    return fixed + extra


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
    CONTAINER_COMMAND,
    DEVICES_COMMAND,
    LABELS_COMMAND,
    VECTOR_ADD_COMMAND,
    KUBELET_COMMAND,
    SOCKET_COMMAND,
    FABRIC_MANAGER_COMMAND,
]
