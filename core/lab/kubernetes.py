"""Lab component ``kubernetes``: the simulated Kubernetes API (core/lab/kube_emulator) with GPU nodes.

``gpuready lab up --components kubernetes [--set kubernetes.fail=...] [--set kubernetes.flavour=openshift]``
starts it detached, writes a kubeconfig (a random token, file mode 0600) and an inventory whose
gpu_nodes are the emulated GPU nodes and whose kube_control_plane is the emulator.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from gpuready.core.errors import BadInput, Unreachable
from gpuready.lab import Component, Lab, pid_alive, wait_for_port
from gpuready.lab.kube_emulator.tls import make_certificates

FAULTS = ("plugin-not-ready", "allocatable-zero", "vector-add-fails", "vector-add-hangs", "permission-denied",
          "forbidden")
#: Seed 002's layout, scaled down: two storage nodes with one T4 each, and one node without GPUs.
NODES = [{"name": "stor1.lab.local", "gpus": 1, "gpu_product": "Tesla-T4"},
         {"name": "stor2.lab.local", "gpus": 1, "gpu_product": "Tesla-T4"},
         {"name": "infra1.lab.local", "gpus": 0, "gpu_product": ""}]
OPTIONS = ("fail", "flavour", "tick")


class KubernetesLab(Component):
    name = "kubernetes"
    description = "simulated Kubernetes API (HTTPS) with 2 GPU nodes and 1 CPU node; no containers run"

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise BadInput(f"lab kubernetes: unknown option(s) {', '.join(sorted(unknown))} (known: "
                           f"{', '.join(OPTIONS)})")
        faults = [f.strip() for f in options.get("fail", "").split(",") if f.strip()]
        bad = [f for f in faults if f not in FAULTS and not f.startswith("unavailable=")]
        if bad:
            raise BadInput(f"lab kubernetes: unknown fail={','.join(bad)} (known: {', '.join(FAULTS)}, unavailable=N)")
        flavour = options.get("flavour", "kubernetes")
        if flavour not in ("kubernetes", "openshift"):
            raise BadInput(f"lab kubernetes: flavour must be kubernetes or openshift, not {flavour!r}")
        folder = lab.component_dir(self.name)
        token = secrets.token_urlsafe(24)
        token_file = _private(folder / "token", token + "\n")
        nodes_file = folder / "nodes.json"
        nodes_file.write_text(json.dumps(NODES, indent=2) + "\n")
        url_file = folder / "url"
        url_file.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "gpuready.lab.kube_emulator", "--port", "0", "--port-file", str(url_file),
                "--token-file", str(token_file), "--nodes", str(nodes_file), "--tick", options.get("tick", "0.2")]
        if faults:
            argv += ["--fail", ",".join(faults)]
        if flavour == "openshift":
            argv.append("--openshift")
        # HTTPS with a CA of its own, which the kubeconfig carries: TLS is verified as on a real cluster.
        ca, cert, key = make_certificates(folder)
        argv += ["--cert", str(cert), "--key", str(key)]
        pid = lab.spawn(self.name, argv)
        url = _wait_for_url(url_file, pid, folder / f"{self.name}.log")
        address = urlparse(url)
        wait_for_port(address.hostname or "127.0.0.1", address.port or 80)
        kubeconfig = _private(folder / "kubeconfig", yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "gpuready-lab",
            "clusters": [{"name": "gpuready-lab", "cluster": {
                "server": url, "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}}],
            "users": [{"name": "gpuready-lab-admin", "user": {"token": token}}],
            "contexts": [{"name": "gpuready-lab", "context": {"cluster": "gpuready-lab",
                                                              "user": "gpuready-lab-admin"}}]}, sort_keys=False))
        gpu_hosts = {n["name"]: {"ansible_connection": "local"} for n in NODES if n["gpus"]}
        hosts = {"gpu_nodes": {"hosts": gpu_hosts},
                 "kube_control_plane": {"hosts": {"lab-kube-api": {"ansible_connection": "local"}}}}
        settings = {
            "node_classes": {"lab-t4": {"gpu_model": "Tesla T4", "gpu_count": 1, "gpu_memory_gib": 16}},
            "driver": {"branch": "550"},
            "container_runtime": "none",
            "kubernetes": {"flavour": flavour, "kubeconfig": str(kubeconfig), "context": "gpuready-lab",
                           "device_plugin": {"rollout_timeout_s": 20}, "pod_timeout_s": 30,
                           "poll_interval_s": 0.5},
        }
        inventory = lab.write_inventory(self.name, hosts, settings)
        return {"pids": [pid], "inventory": str(inventory), "url": url, "kubeconfig": str(kubeconfig),
                "flavour": flavour, "faults": faults}

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        inventory = state.get("inventory", "?")
        return [f"# simulated {state.get('flavour', 'kubernetes')} API at {state.get('url')}; the inventory names "
                "its kubeconfig:",
                f"export KUBECONFIG={state.get('kubeconfig')}   # for kubectl",
                f"gpuready provision cluster -i {inventory} --tags kubernetes",
                f"gpuready validate cluster -i {inventory}"]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        line = super().status(lab, state)
        faults = ",".join(state.get("faults", [])) or "none"
        return f"{line}; simulated {state.get('flavour', 'kubernetes')} API at {state.get('url', '?')}; faults {faults}"


def _private(path: Path, text: str) -> Path:
    """A file only the owner can read (the token and the kubeconfig hold a credential)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _wait_for_url(url_file: Path, pid: int, log: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if url_file.is_file() and url_file.read_text().strip():
            return url_file.read_text().strip()
        if not pid_alive(pid):
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
            raise Unreachable(f"lab kubernetes: the emulator exited: {tail[0] if tail else 'no output'} (see {log})")
        time.sleep(0.05)
    raise Unreachable(f"lab kubernetes: the emulator did not start within {timeout:.0f}s (see {log})")
