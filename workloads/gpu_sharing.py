"""Who else computes on a training worker's GPU: what the GPU was doing before the worker opened its own context,
and the processes nvidia-smi lists on it after the run, less the worker's own.

NVML names a process by its pid in the root PID namespace, whichever namespace asks: the driver does not
support PID namespaces (NVIDIA/nvidia-docker#1483, NVIDIA/gpu-monitoring-tools#63). A worker in a container
with its own PID namespace and its own /proc (a pod under the Kubernetes or OpenShift launcher) cannot see the
pid NVML gives it: its ``os.getpid()`` is another number, which may even be a stranger's host pid. So the
worker reads its own pids from /proc in the root namespace (:func:`own_pids`), and where it cannot, it names
no process that may be itself; what was on the GPU before it opened its context (:func:`before_context`), which
cannot be the worker, still shows a shared GPU there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: The inode of the root (initial) PID namespace: Linux's include/linux/proc_ns.h, PROC_PID_INIT_INO. Other
#: namespaces get theirs from proc_alloc_inum, below it.
ROOT_PID_NAMESPACE = 0xEFFFFFFC
PROC = Path("/proc")
#: what is asked of ``nvidia-smi --query-compute-apps`` (its fields: nvidia-smi --help-query-compute-apps)
COMPUTE_APPS = "gpu_uuid,pid,process_name,used_gpu_memory"
#: what the GPU was doing (nvidia-smi --help-query-gpu, driver 590.48.01: memory.used "Total memory allocated by
#: active contexts", memory.reserved "Total memory reserved by the NVIDIA driver and firmware", utilization.gpu
#: "Percent of time over the past sample period during which one or more kernels was executing on the GPU";
#: an idle H100 and H200 with that driver read 0 MiB used and 0 %). A driver that has no memory.reserved counts
#: the reserve in memory.used, so there only the utilisation tells.
GPU_LOAD = "uuid,memory.used,memory.reserved,utilization.gpu"
GPU_LOAD_OLD_DRIVER = "uuid,utilization.gpu"
SMI_TIMEOUT_S = 30


def nspid(status: str) -> list[int]:
    """The ``NSpid`` line of /proc/<pid>/status: the pid in each PID namespace the process is in, from the
    namespace of the /proc it was read from inwards (proc(5)); empty on a kernel without it (before 4.1)."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return [int(v) for v in line.split()[1:]]
    return []


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _proc_is_root_namespace(ids: list[int]) -> bool:
    """Whether /proc counts pids in the root namespace, as NVML does. Where this process is in the root namespace
    itself, /proc shows it one pid (NSpid of one entry). Otherwise /proc's pid 1 must be the root's init; from a
    namespace below it, the kernel refuses to show pid 1's namespace (EACCES, even to root), and an ancestor
    that cannot be shown to be the root may be a container's: unknown, so not the root."""
    if len(ids) == 1:
        return _inode(PROC / "self" / "ns" / "pid") == ROOT_PID_NAMESPACE
    return _inode(PROC / "1" / "ns" / "pid") == ROOT_PID_NAMESPACE


def _children(pid: int) -> list[int]:
    found = []
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def own_pids() -> frozenset[int] | None:
    """This process's pid and its descendants' (a DataLoader's, a compiler's) as NVML names them, i.e. in the
    root PID namespace; None where this process cannot know them (its own PID namespace and its own /proc)."""
    try:
        ids = nspid((PROC / "self" / "status").read_text())
    except OSError:
        return None
    if not ids or not _proc_is_root_namespace(ids):
        return None
    ours, todo = set(), [ids[0]]
    while todo:
        pid = todo.pop()
        if pid not in ours:
            ours.add(pid)
            todo += _children(pid)
    return frozenset(ours)


def parse_compute_apps(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-compute-apps=... --format=csv``: a header naming the fields, then one process a
    line. Read outside-in, as a process name may hold a comma: the fields before the name from the left,
    those after it from the right."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    if not {"gpu_uuid", "pid", "process_name"} <= set(header):
        return []
    name_at = header.index("process_name")
    after = len(header) - name_at - 1
    found = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(header):
            continue
        row = dict(zip(header[:name_at], cells[:name_at], strict=True))
        row.update(zip(header[name_at + 1 :], cells[len(cells) - after :], strict=True))
        row["process_name"] = ", ".join(cells[name_at : len(cells) - after])
        if not row["pid"].isdigit():
            continue
        memory = row.get("used_gpu_memory", "").removesuffix(" MiB")
        found.append(
            {
                "gpu_uuid": row["gpu_uuid"],
                "pid": int(row["pid"]),
                "name": row["process_name"],
                "used_memory_mib": int(memory) if memory.isdigit() else None,
            }
        )
    return found


def parse_gpu_load(text: str) -> dict[str, dict[str, int | None]]:
    """``nvidia-smi --query-gpu=<GPU_LOAD or GPU_LOAD_OLD_DRIVER> --format=csv``, by GPU uuid: memory.used in MiB
    (None where the driver has no memory.reserved: its figure holds the reserve) and utilization.gpu in %."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    load: dict[str, dict[str, int | None]] = {}
    for line in lines[1:]:
        row = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        if "uuid" not in row:
            continue

        def number(field: str, unit: str, row: dict[str, str] = row) -> int | None:
            value = row.get(field, "").removesuffix(unit).strip()
            return int(value) if value.isdigit() else None

        exact = "memory.reserved" in row and "memory.used" in row
        load[row["uuid"]] = {
            "memory_used_mib": number("memory.used", "MiB") if exact else None,
            "utilization_gpu_pct": number("utilization.gpu", "%"),
        }
    return load


def gpu_matches(smi_uuid: str, torch_uuid: str) -> bool:
    """nvidia-smi writes ``GPU-<uuid>``, torch the bare uuid. Without torch's uuid (an old torch) nothing
    matches: a sibling worker on another GPU must never count as sharing this one."""
    return bool(torch_uuid) and smi_uuid.removeprefix("GPU-") == torch_uuid.removeprefix("GPU-")


def _smi(*args: str) -> str | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        done = subprocess.run([smi, *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def compute_apps() -> list[dict[str, Any]]:
    return parse_compute_apps(_smi(f"--query-compute-apps={COMPUTE_APPS}", "--format=csv") or "")


def before_context() -> dict[str, Any]:
    """Every GPU's processes and load, sampled before this worker opens a CUDA context: nothing there is this
    worker. Called before torch touches a GPU (torch.cuda.set_device opens the context)."""
    load = _smi(f"--query-gpu={GPU_LOAD}", "--format=csv") or _smi(f"--query-gpu={GPU_LOAD_OLD_DRIVER}", "--format=csv")
    return {"apps": compute_apps(), "load": parse_gpu_load(load or "")}


def others(
    before: dict[str, Any], after: list[dict[str, Any]], uuid: str, ours: frozenset[int] | None
) -> dict[str, Any]:
    """What shares the GPU ``uuid`` with this worker: every process on it before the worker's context, those on
    it after the run that are not the worker's (only where ``ours`` is known), and the GPU's load before."""
    seen: dict[int, dict[str, Any]] = {}
    for p in before.get("apps", []):
        if gpu_matches(p["gpu_uuid"], uuid):
            seen[p["pid"]] = {**p, "seen": "before the run"}
    for p in after:
        mine = ours is None or p["pid"] in ours  # unknown: it may be this worker, so it is not named
        if gpu_matches(p["gpu_uuid"], uuid) and not mine and p["pid"] not in seen:
            seen[p["pid"]] = {**p, "seen": "during the run"}
    loads: dict[str, dict[str, int | None]] = before.get("load", {})
    load = next((v for k, v in loads.items() if gpu_matches(k, uuid)), {})
    return {
        "processes": list(seen.values()),
        "load_before": load,
        "own_pids": "known" if ours is not None else "unknown (own PID namespace and /proc)",
    }
