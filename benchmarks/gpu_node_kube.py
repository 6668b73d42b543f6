"""`gpuready validate gpu-node --through kubernetes` at N kwok GPU nodes, against the pods floors, in the same run.

Usage: .venv/bin/python benchmarks/gpu_node_kube.py [--sizes 10,100,1000] [--no-vector-add-floor]

The set-up is validate_cluster.py's (the lab's real control plane with N kwok GPU nodes, the device plugin and the
GPU label as `provision cluster` puts them, its helpers imported from there). Each GPU node's node-checks pod
"prints" the verdict that `validate this-node --set quick --verdict -` wrote on a replayed h100-x8 node, with that
node's name: the lab's kwok serves it as the pod's log, as tests/integration/kubernetes does. Then, on the same
cluster, one after another:
- the same-work pods floor: the very node-checks pods gpuready creates, one per GPU node, created by 16 `kubectl
  create` processes at once and timed until all Succeeded (the API server, the scheduler, kwok and the lab's log
  pointer, no gpuready code; their logs are not read);
- `gpuready validate gpu-node --through kubernetes` with the product's pod timeout: wall, CPU (user + system, wait4),
  peak RSS, and the API requests it made (the API server's audit log, gpuready's user only);
- the pods floor of validate_cluster.py: the cuda-vector-add pods, the same way (skipped by --no-vector-add-floor,
  which also skips the device plugin's start-up it needs).
Goal: the gpuready run at most 2x the pods floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.validate_cluster import (  # noqa: E402
    audit_requests,
    gpu_node_names,
    measure_sizes,
    pod_floor,
    prepare,
    running_lab,
    timed,
    with_product_timeouts,
)
from gpuready.core.settings.kubernetes import Kubernetes  # noqa: E402
from gpuready.lab import kwok as kwok_config  # noqa: E402
from gpuready.validate.node.kube_pods import CHECK_ID, node_checks_pod  # noqa: E402
from tests.integration.kubernetes.test_node_conditions import this_node  # noqa: E402

PLACEHOLDER = "gpuready-benchmark-node"


def write_verdicts(folder: Path, nodes: list[str], scratch: Path) -> None:
    """One node verdict per node, as its node-checks pod prints it: one real run of `validate this-node`, the
    node's name put in (the run's verdict is checked against the node it ran on)."""
    printed = this_node(scratch, "h100-x8", PLACEHOLDER)
    if printed.returncode != 0:
        raise SystemExit(f"validate this-node on a replayed h100-x8: exit {printed.returncode}\n{printed.stderr}")
    lines = [*printed.stdout.splitlines(), *printed.stderr.splitlines()]
    for node in nodes:
        (folder / f"{node}.log").write_text(kwok_config.cri_log([line.replace(PLACEHOLDER, node) for line in lines]))


def measure(size: int, root: Path, vector_add_floor: bool) -> dict:
    with running_lab(size, root) as (lab_dir, up, lab_up, state):
        started = time.monotonic()
        if vector_add_floor:
            prepare(state, size)
        plugin = time.monotonic() - started
        write_verdicts(Path(state["node_verdicts"]), gpu_node_names(size), root / f"scratch-{size}")
        budget = float(Kubernetes().pod_timeout_s)
        image = Kubernetes().node_checks_image
        same_work = pod_floor(state, size, build=lambda node: node_checks_pod(node, image, "floor", "full", budget))
        audit = lab_dir / "kubernetes" / "logs" / "audit.log"
        mark = audit.stat().st_size
        inventory = with_product_timeouts(Path(up.stdout.strip().splitlines()[-1]), lab_dir / "inventory")
        argv = [sys.executable, "-m", "gpuready.core.cli", "validate", "gpu-node", "--through", "kubernetes"]
        argv += ["-i", str(inventory), "--artifacts", str(root / f"runs-{size}")]
        wall, rss, done, cpu = timed(argv, env={**os.environ, "COLUMNS": "200"})
        load = os.getloadavg()[0]
        time.sleep(1)  # the audit backend writes in batches
        verbs = audit_requests(audit, mark)
        floor = pod_floor(state, size) if vector_add_floor else {}
        (summary,) = (root / f"runs-{size}").glob("*/summary.json")
        checks = json.loads(summary.read_text())["checks"]
        return {
            "size": size,
            "rc": done.returncode,
            "tail": (done.stdout + done.stderr).strip().splitlines()[-3:],
            # each node judged by the verdict its pod printed: its pod's check passed, and the node's checks came
            "verdicts_read": sum(c["id"] == CHECK_ID and c["status"] == "passed" for c in checks),
            "checks": dict(Counter(c["status"] for c in checks)),
            "lab_up_s": lab_up,
            "plugin_s": plugin,
            "same_work_floor_s": same_work["floor_pods_s"],
            "same_work_last_created_s": same_work["floor_last_created_s"],
            "same_work_last_finished_s": same_work["floor_last_finished_s"],
            "floor_pods_s": floor.get("floor_pods_s"),
            "floor_last_created_s": floor.get("floor_last_created_s"),
            "wall_s": wall,
            "cpu_s": cpu,
            "rss_mib": rss / 1024,
            "load_1min": load,
            "requests": sum(verbs.values()),
            "verbs": dict(verbs),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--no-vector-add-floor", dest="vector_add_floor", action="store_false")
    args = parser.parse_args()
    rows = measure_sizes(args.sizes, lambda size, root: measure(size, root, args.vector_add_floor))
    print(
        "\n| GPU nodes | lab up | pods floor (vector-add) | same-work pods floor | gpu-node --through kubernetes wall "
        "| CPU | peak RSS | API requests | verdicts read | load | exit | wall / pods floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        floor = r["floor_pods_s"]
        vector_add, ratio = (f"{floor:.1f} s", f"{r['wall_s'] / floor:.2f}x") if floor else ("-", "-")
        print(
            f"| {r['size']} | {r['lab_up_s']:.1f} s | {vector_add} | "
            f"{r['same_work_floor_s']:.1f} s | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['rss_mib']:.0f} MiB | "
            f"{r['requests']} ({', '.join(f'{n} {v}' for v, n in sorted(r['verbs'].items()))}) | "
            f"{r['verdicts_read']} | {r['load_1min']:.0f} | {r['rc']} | {ratio} |"
        )


if __name__ == "__main__":
    main()
