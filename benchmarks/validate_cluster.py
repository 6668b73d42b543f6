"""`gpuready validate cluster` at 10, 100 and 1000 kwok GPU nodes of the lab's real control plane.

Usage: .venv/bin/python benchmarks/validate_cluster.py [--sizes 10,100,1000]

For each size: `gpuready lab up --components kubernetes --set kubernetes.nodes=N`, the device plugin
DaemonSet applied with kubectl (the manifest the provisioning role renders) and the GPU label put on
every GPU node, then, once every node advertises its GPU:
- the floor: `kubectl get nodes -o json` on the same cluster (one list of all nodes, wall time);
- the pods floor: the same cuda-vector-add pods created by 16 kubectl processes, timed until all Succeeded
  (the scheduler and kwok alone, no gpuready code), split by the pods' own timestamps;
- `gpuready validate cluster`: wall time, peak memory (max RSS of the process), and the API requests
  it made per node, counted by the API server itself (its audit log records gpuready's user only),
  with the LIST calls apart: they must not grow with the node count. gpuready runs with the product's
default pod timeout, not the lab's shorter one (which keeps the test suite quick): a pod that kwok has
not finished within the lab's timeout would count as a failure of the cluster, not time of the run.
Prints one line per size and a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuready.validate.cluster import cuda_vector_add_pod  # noqa: E402
from tests.unit.kubernetes.test_manifests import _render  # noqa: E402

LABEL = "openshift.com/gpu-accelerator"


def gpuready(*args: str, timeout: int = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuready.core.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, subprocess.CompletedProcess, float]:
    """Wall seconds, max RSS (KiB) and CPU seconds (user + system) of one child process."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(
            argv, os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()
        )
    return wall, usage.ru_maxrss, done, usage.ru_utime + usage.ru_stime


def audit_requests(log: Path, start: int) -> Counter:
    """Requests by verb. A streamed response (a pod's log) has two events, ResponseStarted and
    ResponseComplete, with one auditID: each request is counted once."""
    counts: Counter = Counter()
    seen: set[str] = set()
    with log.open() as f:
        f.seek(start)
        for line in f:
            event = json.loads(line)
            if event["auditID"] not in seen:
                seen.add(event["auditID"])
                counts[event["verb"]] += 1
    return counts


def kubectl(state: dict, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [state["kubectl"], "--kubeconfig", state["admin_kubeconfig"], *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return done.stdout


def prepare(state: dict, size: int) -> None:
    """Label the GPU nodes and deploy the plugin as `provision cluster --tags kubernetes` would."""
    kubectl(state, "label", "nodes", "--all", "--overwrite", f"{LABEL}=true")
    kubectl(state, "label", "node", "infra1.lab.local", f"{LABEL}-")
    docs = _render("nvidia_device_plugin", "serviceaccount.yml.j2") + _render(
        "nvidia_device_plugin", "daemonset.yml.j2"
    )
    kubectl(
        state,
        "apply",
        "--server-side",
        "--field-manager",
        "gpuready",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
    )
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline:
        nodes = json.loads(kubectl(state, "get", "nodes", "-o", "json"))["items"]
        ready = sum(1 for n in nodes if n["status"]["allocatable"].get("nvidia.com/gpu") == "1")
        if ready == size:
            return
        time.sleep(2)
    raise SystemExit(f"only {ready}/{size} nodes advertise a GPU after 20 minutes")


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def gpu_node_names(size: int) -> list[str]:
    return [f"gpu-{i:04d}.lab.local" for i in range(1, size + 1)]  # the lab's names with nodes=N


def pod_floor(state: dict, size: int, parallel: int = 16, build: Callable[[str], dict] | None = None) -> dict:
    """The cluster's own floor: the scheduler and kwok placing and completing the same cuda-vector-add pods
    (or ``build(node)``'s, one per GPU node), created by `parallel` kubectl processes at once (no gpuready code),
    timed until every pod Succeeded. The pods' own timestamps split it (second resolution): created, scheduled,
    finished."""
    namespace = "gpuready-floor"
    kubectl(state, "create", "namespace", namespace)
    build = build or (lambda node: cuda_vector_add_pod(node, "registry.k8s.io/cuda-vector-add:v0.1", "floor"))
    pods = [build(node) for node in gpu_node_names(size)]
    parallel = min(parallel, size)  # an empty List makes kubectl fail with "no objects passed to create"
    started = time.monotonic()
    base = [state["kubectl"], "--kubeconfig", state["admin_kubeconfig"], "create", "-n", namespace, "-f", "-"]
    creators = [
        subprocess.Popen(base, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) for _ in range(parallel)
    ]
    for i, creator in enumerate(creators):
        creator.communicate(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods[i::parallel]}))
    created = time.monotonic() - started
    while True:
        items = json.loads(kubectl(state, "get", "pods", "-n", namespace, "-o", "json"))["items"]
        if sum(p["status"].get("phase") == "Succeeded" for p in items) == size:
            break
        if time.monotonic() - started > 600:
            raise SystemExit("the floor's pods did not all Succeed within 10 minutes")
        time.sleep(0.5)
    wall = time.monotonic() - started
    first = min(_seconds(p["metadata"]["creationTimestamp"]) for p in items)

    def last(times: list[float]) -> float:
        return max(times) - first

    scheduled = [
        _seconds(c["lastTransitionTime"])
        for p in items
        for c in p["status"]["conditions"]
        if c["type"] == "PodScheduled" and c["status"] == "True"
    ]
    finished = [
        _seconds(c["state"]["terminated"]["finishedAt"]) for p in items for c in p["status"]["containerStatuses"]
    ]
    kubectl(state, "delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force")
    kubectl(state, "delete", "namespace", namespace, "--timeout=300s")
    return {
        "floor_pods_s": wall,
        "floor_create_s": created,
        "floor_last_created_s": last([_seconds(p["metadata"]["creationTimestamp"]) for p in items]),
        "floor_last_scheduled_s": last(scheduled),
        "floor_last_finished_s": last(finished),
    }


def with_product_timeouts(inventory: Path, target: Path) -> Path:
    """A copy of the lab's inventory without its short pod timeout, so the product's default applies."""
    shutil.copytree(inventory, target)
    settings = target / "group_vars" / "all" / "gpuready.yml"
    values = yaml.safe_load(settings.read_text())
    values["gpuready"]["kubernetes"].pop("pod_timeout_s")
    settings.write_text(yaml.safe_dump(values, sort_keys=False))
    return target


@contextlib.contextmanager
def running_lab(
    size: int, root: Path
) -> Iterator[tuple[Path, subprocess.CompletedProcess[str], float, dict[str, Any]]]:
    """The Kubernetes lab with ``size`` kwok GPU nodes in ``root`` while the block runs: its folder, what ``lab up``
    printed, the seconds it took, and its state. ``lab down`` after the block, whatever happens in it."""
    lab_dir = root / f"lab-{size}"
    started = time.monotonic()
    up = gpuready(
        "lab", "up", "--components", "kubernetes", "--lab-dir", str(lab_dir), "--set", f"kubernetes.nodes={size}"
    )
    if up.returncode != 0:
        raise SystemExit(up.stderr)
    lab_up = time.monotonic() - started
    try:
        yield lab_dir, up, lab_up, json.loads((lab_dir / "state.json").read_text())["kubernetes"]
    finally:
        gpuready("lab", "down", "--lab-dir", str(lab_dir))


def measure_sizes(sizes: str, measure: Callable[[int, Path], dict[str, Any]]) -> list[dict[str, Any]]:
    """``measure`` at each of the comma-separated ``sizes``, in one scratch folder; each row printed as JSON."""
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for size in (int(s) for s in sizes.split(",")):
            row = measure(size, Path(root))
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def measure(size: int, root: Path) -> dict:
    with running_lab(size, root) as (lab_dir, up, lab_up, state):
        prepare(state, size)
        floor, floor_rss, _, floor_cpu = timed(
            [state["kubectl"], "--kubeconfig", state["kubeconfig"], "get", "nodes", "-o", "json"]
        )
        audit = lab_dir / "kubernetes" / "logs" / "audit.log"
        mark = audit.stat().st_size
        wall, rss, done, cpu = timed(
            [
                sys.executable,
                "-m",
                "gpuready.core.cli",
                "validate",
                "cluster",
                "-i",
                str(with_product_timeouts(Path(up.stdout.strip().splitlines()[-1]), lab_dir / "inventory")),
                "--artifacts",
                str(root / "runs"),
            ],
            env={**os.environ, "COLUMNS": "200"},
        )
        time.sleep(1)  # the audit backend writes in batches
        verbs = audit_requests(audit, mark)
        total = sum(verbs.values())
        floor_pods = pod_floor(state, size)  # after gpuready's run, so its pods do not load that run
        return {
            **floor_pods,
            "size": size,
            "rc": done.returncode,
            "lab_up_s": lab_up,
            "floor_s": floor,
            "floor_rss_mib": floor_rss / 1024,
            "floor_cpu_s": floor_cpu,
            "wall_s": wall,
            "cpu_s": cpu,
            "load_1min": os.getloadavg()[0],
            "rss_mib": rss / 1024,
            "requests": total,
            "per_node": total / size,
            "lists": verbs["list"],
            "verbs": dict(verbs),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    rows = measure_sizes(args.sizes, measure)
    print(
        "\n| GPU nodes | floor wall (CPU) | pods floor | validate cluster wall | CPU | peak RSS | API requests "
        "per node | LIST calls | load | exit |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['size']} | {r['floor_s']:.2f} s ({r['floor_cpu_s']:.2f} s) | {r['floor_pods_s']:.1f} s | "
            f"{r['wall_s']:.1f} s | "
            f"{r['cpu_s']:.1f} s | {r['rss_mib']:.0f} MiB | {r['per_node']:.1f} | {r['lists']} | "
            f"{r['load_1min']:.0f} | {r['rc']} |"
        )


if __name__ == "__main__":
    main()
