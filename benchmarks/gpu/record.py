"""Record, raw, every command the node catalogue runs on this machine, ready to become fixtures.

Usage: python benchmarks/gpu/record.py OUT_DIR [--note TEXT]
       python benchmarks/gpu/record.py --inventory-only OUT_DIR

Writes, for each command of ``gpuready.validate.node.checks.PREFETCH`` (plus the journal fallback
for the kernel log and the Xid lines on their own), then for each command of the measuring batch
(``perf_commands``: DCGM's diagnostic at the inventory's level, nccl-tests, nvbandwidth, gpuready's
probe), ``NN-<slug>.out`` (stdout, byte for byte), ``NN-<slug>.err`` and ``NN-<slug>.rc``;
``commands.json`` (command -> files, exit status and batch); ``SOURCE.md`` (GPU, driver, CUDA, host,
kernel, date, the note: what tests/fixtures SOURCE files need); and ``inventory/``, a gpuready
inventory of this machine as localhost whose node class is what nvidia-smi reported, so
``gpuready validate gpu-node`` judges the checks' reading of a real machine, not its hardware.
``--inventory-only`` writes that inventory alone (from one ``nvidia-smi -q -x``, a second or two).
Exit 3 with one line when this machine has no working nvidia-smi.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: Xid lines only (NVIDIA's Xid catalogue: "NVRM: Xid (PCI:...): <code>, ..."), whichever log has them
XID_COMMAND = "(dmesg 2>/dev/null || journalctl -k -b --no-pager -q) | grep -E 'NVRM: Xid' || true"
EXTRA = [
    "journalctl -k -b --no-pager -q",
    XID_COMMAND,
    "nvidia-smi",
    "nvidia-smi -L",
    "nvidia-smi -q",
    "nvidia-smi topo -m",
    "cat /proc/driver/nvidia/version",
    "uname -a",
]
TIMEOUT_S = 120


def slug(command: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", command).strip("-")[:60] or "command"


Index = dict[str, dict[str, str | int]]


def catalogue() -> list[str]:
    from gpuready.validate.node.checks import PREFETCH
    from gpuready.validate.node.node import QUERY_COMMAND

    return list(dict.fromkeys([*PREFETCH, QUERY_COMMAND, *EXTRA]))


def measuring(inventory: Path) -> tuple[list[str], int]:
    """The measuring batch ``validate gpu-node`` sends to this machine under ``inventory``'s settings, and the
    seconds gpu-node gives the whole batch (each command also stops itself at its own limit)."""
    from gpuready.core.inventory import load
    from gpuready.validate.node.checks import perf_budget, perf_commands

    settings = load(inventory).settings
    return perf_commands(settings), perf_budget(settings)


def record(commands: list[str], out: Path, index: Index, batch: str, timeout: int = TIMEOUT_S) -> Index:
    """Run each command not yet in ``index`` with ``sh -c`` and save its answer; numbering goes on from ``index``."""
    for command in commands:
        if command in index:
            continue
        base = f"{len(index):02d}-{slug(command)}"
        try:
            done = subprocess.run(["sh", "-c", command], capture_output=True, timeout=timeout, check=False)
            rc, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as e:
            rc, stdout, stderr = 124, e.stdout or b"", (e.stderr or b"") + f"\n(stopped after {timeout}s)".encode()
        (out / f"{base}.out").write_bytes(stdout)
        (out / f"{base}.err").write_bytes(stderr)
        (out / f"{base}.rc").write_text(f"{rc}\n")
        index[command] = {"stdout": f"{base}.out", "stderr": f"{base}.err", "rc": rc, "batch": batch}
    (out / "commands.json").write_text(json.dumps(index, indent=1) + "\n")
    return index


def describe(smi_xml: str) -> dict[str, str | int]:
    """GPU model, count, driver and CUDA from ``nvidia-smi -q -x``."""
    root = ET.fromstring(smi_xml)
    gpus = root.findall("gpu")
    names = sorted({g.findtext("product_name", "").strip() for g in gpus})
    return {
        "gpu_model": names[0] if len(names) == 1 else " + ".join(names),
        "gpu_count": len(gpus),
        "driver": root.findtext("driver_version", "").strip(),
        "cuda": root.findtext("cuda_version", "").strip(),
        "memory": gpus[0].findtext("fb_memory_usage/total", "").strip() if gpus else "",
    }


def write_source(out: Path, facts: dict[str, str | int], index: Index, note: str = "") -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Source of these recordings",
        "",
        f"- GPU: {facts['gpu_count']}x {facts['gpu_model']} ({facts['memory']})",
        f"- driver: {facts['driver']}, CUDA (driver API): {facts['cuda']}",
        f"- host: {platform.node()}, kernel {platform.release()}, {platform.machine()}",
        f"- date: {now}",
        "- recorded by: benchmarks/gpu/record.py (gpuready's GPU runbook), each command run with `sh -c`,",
        "  stdout and stderr saved byte for byte, nothing edited",
        *([f"- state: {note}"] if note else []),
        "",
        "| file | command | batch | exit |",
        "|---|---|---|---:|",
    ]
    for command, files in index.items():
        # A pipe would end the table cell; the probe's command holds the probe's whole source, one line is enough.
        cell = command.replace("|", "\\|").split("\n")[0]
        lines.append(f"| `{files['stdout']}` | `{cell}` | {files.get('batch', 'prefetch')} | {files['rc']} |")
    (out / "SOURCE.md").write_text("\n".join(lines) + "\n")


def write_inventory(out: Path, facts: dict[str, str | int]) -> Path:
    """This machine as gpuready's localhost, described by what it reported (JSON is valid YAML)."""
    folder = out / "inventory"
    (folder / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    hosts = {
        "gpu_nodes": {"hosts": {"localhost": {"ansible_connection": "local", "gpuready_node_class": "this-machine"}}}
    }
    driver = str(facts["driver"])
    settings = {
        "gpuready": {
            "node_classes": {"this-machine": {"gpu_model": facts["gpu_model"], "gpu_count": facts["gpu_count"]}},
            "driver": {"branch": driver.split(".")[0], "version": driver},
            "container_runtime": "none",
            "selinux": {"expect": "any"},
        }
    }
    (folder / "hosts.yml").write_text("# written by benchmarks/gpu/record.py from nvidia-smi\n" + json.dumps(hosts))
    (folder / "group_vars" / "all" / "gpuready.yml").write_text(
        "# written by benchmarks/gpu/record.py from nvidia-smi\n" + json.dumps(settings, indent=1)
    )
    return folder


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="record.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, metavar="OUT_DIR")
    parser.add_argument("--note", default="", help="the machine's state while recording, for SOURCE.md")
    parser.add_argument("--inventory-only", action="store_true", help="write OUT_DIR/inventory alone")
    args = parser.parse_args(argv)
    out: Path = args.out
    probe = subprocess.run(
        ["sh", "-c", "nvidia-smi --query-gpu=index --format=csv,noheader"], capture_output=True, text=True, check=False
    )
    if probe.returncode or not probe.stdout.strip():
        why = (probe.stderr or probe.stdout).strip().splitlines()
        print(
            f"record: no working nvidia-smi here ({why[-1] if why else f'exit {probe.returncode}'}): "
            "run this on a GPU machine",
            file=sys.stderr,
        )
        return 3
    out.mkdir(parents=True, exist_ok=True)
    if args.inventory_only:
        smi = subprocess.run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        facts = describe(smi.stdout)
        print(f"record: inventory of {facts['gpu_count']}x {facts['gpu_model']} -> {write_inventory(out, facts)}")
        return 0
    index = record(catalogue(), out, {}, "prefetch")
    facts = describe((out / str(index["nvidia-smi -q -x"]["stdout"])).read_text())
    (out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    # Measured after the fixed batch, under the settings gpu-node reads from the same inventory, as gpu-node does.
    commands, budget = measuring(write_inventory(out, facts))
    fixed = len(index)
    record(commands, out, index, "perf", timeout=budget)
    write_source(out, facts, index, args.note)
    print(
        f"record: {fixed} fixed and {len(index) - fixed} measuring commands on {facts['gpu_count']}x "
        f"{facts['gpu_model']}, driver {facts['driver']} -> {out}"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")  # the tools' output as the parsers expect it, not localised
    sys.exit(main(sys.argv[1:]))
