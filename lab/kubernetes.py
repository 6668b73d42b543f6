"""Lab component ``kubernetes``: a real Kubernetes control plane on loopback, with kwok GPU nodes.

``gpuready lab up --components kubernetes`` starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler of one pinned release (built from the k8s.io/kubernetes module, see gomod/kubernetes),
with TLS and RBAC on, and kwok (sigs.k8s.io/kwok) to play the kubelets of simulated nodes and the
lifecycle of their pods. A small controller of ours (kube_devices) stands in for the kubelet's device
manager: it advertises ``nvidia.com/gpu`` on a node only while a device-plugin pod runs there.

Options (``--set kubernetes.KEY=VALUE``):
  flavour=kubernetes|openshift  openshift adds the SecurityContextConstraints API (openshift/api's CRD)
  nodes=N                       N GPU nodes (1 to 1000) instead of the TFJobs paper's two, plus one CPU node
  fail=F1,F2,...                GPU node i carries fault Fi (see FAULTS)
"""

from __future__ import annotations

import base64
import contextlib
import importlib.resources
import json
import logging
import os
import shutil
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuready.core.errors import BadInput, Unreachable
from gpuready.lab import Component, Lab, pid_alive, stop_in_reverse
from gpuready.lab import kwok as kwok_config
from gpuready.lab.gobuild import GoBuild, module_dir, module_file
from gpuready.lab.pki import Authority, signing_key, write_private

log = logging.getLogger(__name__)

KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.4"
KWOK_VERSION = "v0.7.0"
TRAINING_OPERATOR = "github.com/kubeflow/training-operator"
TRAINING_OPERATOR_VERSION = "v1.8.1"
MPI_OPERATOR = "github.com/kubeflow/mpi-operator"
MPI_OPERATOR_VERSION = "v0.6.0"
_MAJOR, _MINOR = KUBERNETES_VERSION[1:].split(".")[:2]
_VERSION_VARS = {"gitVersion": KUBERNETES_VERSION, "gitMajor": _MAJOR, "gitMinor": _MINOR, "gitTreeState": "clean"}
CONTROL_PLANE = GoBuild(
    name="kubernetes",
    version=f"{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}",
    wrapper="kubernetes",
    commands={
        "etcd": "go.etcd.io/etcd/server/v3",
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    },
    # What `make` in kubernetes sets (hack/lib/version.sh), so /version answers the release.
    ldflags=" ".join(
        f"-X k8s.io/{pkg}.{k}={v}"
        for pkg in ("client-go/pkg/version", "component-base/version")
        for k, v in _VERSION_VARS.items()
    ),
)
KWOK = GoBuild(
    name="kwok",
    version=KWOK_VERSION,
    module="sigs.k8s.io/kwok",
    commands={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    extras=[lambda work: kwok_config.copy_upstream(module_dir("sigs.k8s.io/kwok", KWOK_VERSION), work)],
)

FAULTS = kwok_config.FAULTS
OPTIONS = ("fail", "flavour", "nodes")
MAX_NODES = 1000
#: The Dell/Red Hat TFJobs paper's layout: two storage nodes with one T4 each, and one node without GPUs.
SEED_NODES = ["stor1.lab.local", "stor2.lab.local"]
CPU_NODE = "infra1.lab.local"
#: GPU profiles of the lab's nodes (model as the GPU feature discovery labels it, count, memory).
PROFILES = {"t4": {"product": "Tesla-T4", "model": "Tesla T4", "count": 1, "memory_gib": 16}}
SERVICE_RANGE = "10.96.0.0/16"
READY_TIMEOUT_S = 60
#: The longest the API server may take to turn ready while it makes progress (see wait_until_ready).
READY_MAX_S = 300
READY_POLL_S = 0.2
#: More time for the nodes to turn Ready per node: kwok marks 1000 nodes in minutes on a busy 2-core machine.
READY_S_PER_NODE = 0.5
#: kwokctl's --disable-qps-limits values (sigs.k8s.io/kwok pkg/consts DefaultUnlimitedQPS/Burst).
UNLIMITED_QPS = 5000
UNLIMITED_BURST = 10000
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": ["gpuready"]}, {"level": "None"}],
}


class KubernetesLab(Component):
    name = "kubernetes"
    description = (
        f"Kubernetes {KUBERNETES_VERSION} control plane (etcd, kube-apiserver, controller-manager, "
        f"scheduler) with kwok {KWOK_VERSION} nodes; no containers run"
    )

    def up(self, lab: Lab, options: dict[str, str]) -> dict[str, Any]:
        plan = _plan(options)
        folder = lab.component_dir(self.name)
        shutil.rmtree(folder / "etcd-data", ignore_errors=True)
        control_plane, kwok_home = self.build()
        binaries = control_plane / "bin"
        pids: list[int] = []
        try:
            return _start(lab, folder, binaries, kwok_home, plan, pids)
        except BaseException:
            stop_in_reverse(pids)
            (folder / "pids").unlink(missing_ok=True)
            raise

    def build(self) -> list[Path]:
        return [CONTROL_PLANE.ensure(), KWOK.ensure()]

    def usage(self, lab: Lab, state: dict[str, Any]) -> list[str]:
        inventory = state.get("inventory", "?")
        return [
            f"# Kubernetes {KUBERNETES_VERSION} at {state.get('url')}; the inventory uses gpuready's least-privilege "
            "kubeconfig, kubectl the admin's:",
            f"export KUBECONFIG={state.get('admin_kubeconfig')}   # for kubectl ({state.get('kubectl')})",
            f"gpuready provision cluster -i {inventory}   # all of site.yml; kwok's nodes get the Kubernetes layer",
            f"gpuready validate cluster -i {inventory}",
        ]

    def status(self, lab: Lab, state: dict[str, Any]) -> str:
        line = super().status(lab, state)
        faults = ",".join(f"{n}={f}" for n, f in state.get("faults", {}).items()) or "none"
        return (
            f"{line}; {state.get('flavour', 'kubernetes')} {KUBERNETES_VERSION} at {state.get('url', '?')}; "
            f"{state.get('gpu_nodes', '?')} GPU node(s); faults {faults}"
        )


def _plan(options: dict[str, str]) -> dict[str, Any]:
    """The lab's shape from its options, checked before anything starts."""
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise BadInput(f"lab kubernetes: unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(OPTIONS)})")
    flavour = options.get("flavour", "kubernetes")
    if flavour not in ("kubernetes", "openshift"):
        raise BadInput(f"lab kubernetes: flavour must be kubernetes or openshift, not {flavour!r}")
    count_text = options.get("nodes", "")
    if count_text and not (count_text.isdigit() and 1 <= int(count_text) <= MAX_NODES):
        raise BadInput(f"lab kubernetes: nodes must be a number from 1 to {MAX_NODES}, not {count_text!r}")
    names = [f"gpu-{i:04d}.lab.local" for i in range(1, int(count_text) + 1)] if count_text else SEED_NODES
    faults = [f.strip() for f in options.get("fail", "").split(",") if f.strip()]
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        raise BadInput(f"lab kubernetes: unknown fail={','.join(bad)} (known: {', '.join(FAULTS)})")
    if len(faults) > len(names):
        raise BadInput(
            f"lab kubernetes: {len(faults)} faults for {len(names)} GPU node(s); GPU node i carries "
            "fault i, so add nodes=N"
        )
    nodes = [{"name": n, "profile": "t4", "fault": faults[i] if i < len(faults) else ""} for i, n in enumerate(names)]
    return {"flavour": flavour, "nodes": nodes}


def training_crds() -> list[Path]:
    """Kubeflow's job CRDs from their owners' modules: MPIJob v2beta1 from the mpi-operator, TFJob and
    PyTorchJob v1 from the training-operator. The training-operator's own MPIJob (v1) has the same name
    (mpijobs.kubeflow.org); Kubeflow pairs the mpi-operator with the training-operator's other kinds
    (training-operator's --enable-scheme), which is what the Kubernetes launcher submits."""
    return [
        module_file(MPI_OPERATOR, MPI_OPERATOR_VERSION, "manifests/base/kubeflow.org_mpijobs.yaml"),
        *(
            module_file(TRAINING_OPERATOR, TRAINING_OPERATOR_VERSION, f"manifests/base/crds/kubeflow.org_{plural}.yaml")
            for plural in ("tfjobs", "pytorchjobs")
        ),
    ]


def free_ports(count: int) -> list[int]:
    """``count`` different free ports on 127.0.0.1. Each stays bound until all are chosen: a port let go at once
    can be the kernel's next choice too (two of four such choices were the same port in about 1 lab start in
    2,500, and etcd and kube-apiserver cannot share one)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    """A kubeconfig with embedded client certificate (mode 0600: it is a credential)."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "gpuready-lab",
            "clusters": [
                {"name": "gpuready-lab", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}
            ],
            "users": [{"name": user, "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
            "contexts": [{"name": "gpuready-lab", "context": {"cluster": "gpuready-lab", "user": user}}],
        },
        sort_keys=False,
    )
    return write_private(path, text.encode())


@dataclass(frozen=True)
class _Credentials:
    """What the lab's processes prove themselves with: one authority, a certificate for each server and
    client, the service-account signing pair, and a kubeconfig for each user (by the user's stem)."""

    ca: Authority
    etcd: tuple[Path, Path]
    etcd_client: tuple[Path, Path]
    apiserver: tuple[Path, Path]
    kubelet_client: tuple[Path, Path]
    kwok_serving: tuple[Path, Path]
    service_account: tuple[Path, Path]
    kubeconfigs: dict[str, Path]


@dataclass(frozen=True)
class _Ports:
    etcd: int
    etcd_peer: int
    api: int
    kwok: int

    @property
    def etcd_url(self) -> str:
        return f"https://127.0.0.1:{self.etcd}"

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api}"


#: The lab's users: their name in their certificate and the groups it carries.
_USERS = (
    ("admin", ("system:masters",)),
    ("system:kube-controller-manager", ()),
    ("system:kube-scheduler", ()),
    ("kwok", ("system:masters",)),
    ("gpuready-lab-device-manager", ("system:masters",)),
    ("gpuready", ()),
)
#: The processes _start starts, in order (the order of the pids it returns).
_PROCESSES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "devices")


def _start(
    lab: Lab, folder: Path, binaries: Path, kwok_home: Path, plan: dict[str, Any], pids: list[int]
) -> dict[str, Any]:
    """Start the lab's processes one stage after another, each pid put in ``pids`` as soon as it runs (the
    caller stops them if a later stage fails)."""
    ports = _Ports(*free_ports(4))
    credentials = _issue_credentials(folder, ports.api_url)
    configs = credentials.kubeconfigs
    audit_policy = _write_audit_policy(folder)
    pids.append(_spawn(lab, folder, "etcd", _etcd_argv(binaries, folder, ports, credentials)))
    _wait_port(ports.etcd, pids[-1], lab, "etcd")
    pids.append(
        _spawn(lab, folder, "kube-apiserver", _apiserver_argv(binaries, folder, ports, credentials, audit_policy))
    )
    pki = credentials.ca.folder
    _wait_ready(ports.api_url, credentials.ca.ca_path, pki / "admin.crt", pki / "admin.key", pids[-1], lab)
    pids.append(_spawn(lab, folder, "kube-controller-manager", _controller_manager_argv(binaries, credentials)))
    pids.append(_spawn(lab, folder, "kube-scheduler", _scheduler_argv(binaries, credentials)))

    kubectl = [str(binaries / "kubectl"), "--kubeconfig", str(configs["admin"])]
    _install_crds(lab, kubectl, kwok_home, plan)
    _grant_gpuready_roles(lab, kubectl)
    _create_nodes(lab, kubectl, folder, plan)

    logs = kwok_config.write_logs(folder / "kwok-logs")
    pids.append(_spawn(lab, folder, "kwok", _kwok_argv(folder, kwok_home, plan, logs, ports, credentials)))
    pids.append(_spawn(lab, folder, "devices", _device_manager_argv(folder, plan, logs, credentials)))
    _wait_nodes_ready(lab, kubectl, plan)
    _check_all_alive(lab, pids)

    inventory = lab.write_inventory("kubernetes", _hosts(plan), _settings(plan, configs["gpuready"]))
    return {
        "pids": pids,
        "inventory": str(inventory),
        "url": ports.api_url,
        "kubeconfig": str(configs["gpuready"]),
        "admin_kubeconfig": str(configs["admin"]),
        "kubectl": str(binaries / "kubectl"),
        "flavour": plan["flavour"],
        "gpu_nodes": len(plan["nodes"]),
        # Node verdicts put here as <node>.log are what that node's node-checks pods print (kube_devices).
        "node_verdicts": str(logs["plugin"].parent / kwok_config.NODE_VERDICTS),
        "faults": {n["name"]: n["fault"] for n in plan["nodes"] if n["fault"]},
    }


def _issue_credentials(folder: Path, url: str) -> _Credentials:
    ca = Authority(folder / "pki")
    etcd = ca.issue("etcd", "etcd", server=True, client=True)
    etcd_client = ca.issue("apiserver-etcd-client", "kube-apiserver-etcd-client", client=True)
    apiserver = ca.issue(
        "apiserver",
        "kube-apiserver",
        server=True,
        hosts=("127.0.0.1", "localhost", "10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
    )
    kubelet_client = ca.issue(
        "apiserver-kubelet-client", "kube-apiserver-kubelet-client", groups=("kubeadm:cluster-admins",), client=True
    )
    kwok_serving = ca.issue("kwok-serving", "kwok", server=True)
    service_account = signing_key(ca.folder)
    configs = {}
    for user, groups in _USERS:
        stem = user.removeprefix("system:")
        cert, key = ca.issue(stem, user if user != "admin" else "gpuready-lab-admin", groups=groups, client=True)
        configs[stem] = kubeconfig(folder / f"{stem}.kubeconfig", url, ca.ca_path, cert, key, stem)
    return _Credentials(ca, etcd, etcd_client, apiserver, kubelet_client, kwok_serving, service_account, configs)


def _write_audit_policy(folder: Path) -> Path:
    """The API server's own record of every request gpuready's user makes (the benchmark counts them)."""
    audit_policy = folder / "audit-policy.yaml"
    audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
    return audit_policy


def _etcd_argv(binaries: Path, folder: Path, ports: _Ports, credentials: _Credentials) -> list[str]:
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    cert, key = credentials.etcd
    return [
        str(binaries / "etcd"),
        "--name",
        "lab",
        "--data-dir",
        str(folder / "etcd-data"),
        "--listen-client-urls",
        ports.etcd_url,
        "--advertise-client-urls",
        ports.etcd_url,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        f"lab={peer}",
        "--cert-file",
        str(cert),
        "--key-file",
        str(key),
        "--client-cert-auth",
        "--trusted-ca-file",
        str(credentials.ca.ca_path),
        # A throwaway lab: no fsync per write, so 1000 nodes' heartbeats do not wait on the disk.
        "--unsafe-no-fsync",
        "--quota-backend-bytes",
        str(4 * 1024**3),
    ]


def _apiserver_argv(
    binaries: Path, folder: Path, ports: _Ports, credentials: _Credentials, audit_policy: Path
) -> list[str]:
    ca = str(credentials.ca.ca_path)
    sa_key, sa_pub = credentials.service_account
    return [
        str(binaries / "kube-apiserver"),
        "--bind-address",
        "127.0.0.1",
        "--advertise-address",
        "127.0.0.1",
        "--secure-port",
        str(ports.api),
        "--etcd-servers",
        ports.etcd_url,
        "--etcd-cafile",
        ca,
        "--etcd-certfile",
        str(credentials.etcd_client[0]),
        "--etcd-keyfile",
        str(credentials.etcd_client[1]),
        "--tls-cert-file",
        str(credentials.apiserver[0]),
        "--tls-private-key-file",
        str(credentials.apiserver[1]),
        "--client-ca-file",
        ca,
        "--authorization-mode",
        "Node,RBAC",
        "--anonymous-auth=false",
        "--service-account-issuer",
        "https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file",
        str(sa_pub),
        "--service-account-signing-key-file",
        str(sa_key),
        "--service-cluster-ip-range",
        SERVICE_RANGE,
        "--allow-privileged=true",
        "--kubelet-client-certificate",
        str(credentials.kubelet_client[0]),
        "--kubelet-client-key",
        str(credentials.kubelet_client[1]),
        "--kubelet-preferred-address-types",
        "InternalIP",
        "--profiling=false",
        "--audit-policy-file",
        str(audit_policy),
        "--audit-log-path",
        str(folder / "logs" / "audit.log"),
        "--max-requests-inflight",
        "1000",
        "--max-mutating-requests-inflight",
        "500",
    ]


def _controller_manager_argv(binaries: Path, credentials: _Credentials) -> list[str]:
    # kwok renews up to 1000 node leases from one process on a small shared machine; a renewal that is late
    # under load is not a node failure here (the lab injects GPU faults itself), so --node-monitor-grace-period
    # gives it far longer than the default before pods are marked not Ready.
    flags = {
        "--service-account-private-key-file": str(credentials.service_account[0]),
        "--root-ca-file": str(credentials.ca.ca_path),
        "--kube-api-qps": "200",
        "--kube-api-burst": "400",
        "--concurrent-daemonset-syncs": "5",
        "--node-monitor-grace-period": "5m",
    }
    return _controller_argv(
        binaries / "kube-controller-manager",
        credentials.kubeconfigs["kube-controller-manager"],
        "--use-service-account-credentials=true",
        *_pairs(flags),
    )


def _scheduler_argv(binaries: Path, credentials: _Credentials) -> list[str]:
    # The default client limit (50 QPS, burst 100) paces the binding of 1000 test pods at 20 s or more;
    # kwok's own kwokctl lifts it (--disable-qps-limits) for clusters of this size.
    limits = {"--kube-api-qps": str(UNLIMITED_QPS), "--kube-api-burst": str(UNLIMITED_BURST)}
    return _controller_argv(binaries / "kube-scheduler", credentials.kubeconfigs["kube-scheduler"], *_pairs(limits))


def _pairs(flags: dict[str, str]) -> list[str]:
    """Flags with their values, in order, as argv."""
    return [arg for flag, value in flags.items() for arg in (flag, value)]


def _install_crds(lab: Lab, kubectl: list[str], kwok_home: Path, plan: dict[str, Any]) -> None:
    """kwok's Logs, Kubeflow's jobs and, for OpenShift, the SecurityContextConstraints; applied and Established."""
    crds = [kwok_home / "crds" / "kwok.x-k8s.io_logs.yaml", *training_crds()]
    if plan["flavour"] == "openshift":
        from gpuready.lab import openshift

        crds.append(openshift.scc_crd())
    _kubectl(lab, kubectl, ["apply", "--server-side", "--field-manager", "gpuready-lab", *_files(crds)], "install CRDs")
    _kubectl(
        lab,
        kubectl,
        ["wait", "--for", "condition=Established", "--timeout", "60s", *[f"crd/{_crd_name(c)}" for c in crds]],
        "wait for the CRDs",
    )


def _grant_gpuready_roles(lab: Lab, kubectl: list[str]) -> None:
    rbac = Path(str(importlib.resources.files("gpuready.core.platforms") / "kube_rbac.yaml"))
    _kubectl(
        lab,
        kubectl,
        ["apply", "--server-side", "--field-manager", "gpuready-lab", "-f", str(rbac)],
        "grant gpuready's ClusterRole and Roles",
    )


def _create_nodes(lab: Lab, kubectl: list[str], folder: Path, plan: dict[str, Any]) -> None:
    """The GPU nodes of the plan and the one CPU node, as Node objects kwok will manage."""
    manifests = folder / "manifests"
    manifests.mkdir(exist_ok=True)
    nodes_file = manifests / "nodes.yaml"
    nodes_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    *(kwok_config.node(n, PROFILES[n["profile"]]) for n in plan["nodes"]),
                    kwok_config.node({"name": CPU_NODE, "profile": "", "fault": ""}, None),
                ],
            }
        )
    )
    _kubectl(lab, kubectl, ["create", "-f", str(nodes_file)], "create the kwok nodes")


def _kwok_argv(
    folder: Path, kwok_home: Path, plan: dict[str, Any], logs: dict[str, Path], ports: _Ports, credentials: _Credentials
) -> list[str]:
    config_file = folder / "kwok.yaml"
    config_file.write_text(
        yaml.safe_dump_all(kwok_config.configuration(plan["nodes"], logs, kwok_home), sort_keys=False)
    )
    cert, key = credentials.kwok_serving
    return [
        str(kwok_home / "bin" / "kwok"),
        "--kubeconfig",
        str(credentials.kubeconfigs["kwok"]),
        "--config",
        str(config_file),
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={kwok_config.MANAGED}",
        "--server-address",
        f"127.0.0.1:{ports.kwok}",
        "--node-ip",
        "127.0.0.1",
        "--node-port",
        str(ports.kwok),
        "--tls-cert-file",
        str(cert),
        "--tls-private-key-file",
        str(key),
        "--enable-crds",
        "Logs",
        "--cidr",
        "10.128.0.0/14",
        "--node-lease-duration-seconds",
        "40",
    ]


def _device_manager_argv(
    folder: Path, plan: dict[str, Any], logs: dict[str, Path], credentials: _Credentials
) -> list[str]:
    """Our stand-in for the kubelets' device manager (kube_devices), told each GPU node's profile and fault."""
    profiles_file = folder / "gpu-nodes.json"
    profiles_file.write_text(
        json.dumps({n["name"]: {**PROFILES[n["profile"]], "fault": n["fault"]} for n in plan["nodes"]}, indent=1) + "\n"
    )
    return [
        sys.executable,
        "-m",
        "gpuready.lab.kube_devices",
        "--kubeconfig",
        str(credentials.kubeconfigs["gpuready-lab-device-manager"]),
        "--nodes",
        str(profiles_file),
        "--logs",
        str(logs["plugin"].parent),
    ]


def _wait_nodes_ready(lab: Lab, kubectl: list[str], plan: dict[str, Any]) -> None:
    ready_s = READY_TIMEOUT_S + READY_S_PER_NODE * len(plan["nodes"])
    _kubectl(
        lab,
        kubectl,
        ["wait", "--for", "condition=Ready", "node", "--all", f"--timeout={ready_s:.0f}s"],
        "wait for the kwok nodes to be Ready",
        timeout=ready_s + 60,
    )


def _check_all_alive(lab: Lab, pids: list[int]) -> None:
    """A process that started and then exited (a port taken, a flag refused) fails the start, with its log's
    last line."""
    for pid, what in zip(pids, _PROCESSES, strict=True):
        if not pid_alive(pid):
            raise Unreachable(f"lab kubernetes: {what} exited: {_last_line(lab, what)}")


def _controller_argv(binary: Path, kubeconfig: Path, *extra: str) -> list[str]:
    """kube-controller-manager or kube-scheduler: one identity for the API and for checking callers, no
    serving port (nothing scrapes them here), no leader election (there is one of each)."""
    return [
        str(binary),
        *(
            arg
            for flag in ("--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig")
            for arg in (flag, str(kubeconfig))
        ),
        "--bind-address",
        "127.0.0.1",
        "--secure-port",
        "0",
        "--leader-elect=false",
        *extra,
    ]


def _spawn(lab: Lab, folder: Path, name: str, argv: list[str]) -> int:
    (folder / "logs").mkdir(exist_ok=True)
    return lab.spawn(name, argv, log=folder / "logs" / f"{name}.log", component="kubernetes")


def _files(paths: list[Path]) -> list[str]:
    return [arg for p in paths for arg in ("-f", str(p))]


def _crd_name(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["metadata"]["name"])


def _kubectl(lab: Lab, kubectl: list[str], args: list[str], what: str, timeout: float = 300) -> None:
    import subprocess

    done = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=False, timeout=timeout)
    with (lab.component_dir("kubernetes") / "kubectl.log").open("a") as out:
        out.write(f"$ kubectl {' '.join(args)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unreachable(f"lab kubernetes: cannot {what}: {last}")


def _wait_port(port: int, pid: int, lab: Lab, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise Unreachable(f"lab kubernetes: {what} exited: {_last_line(lab, what)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise Unreachable(f"lab kubernetes: {what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def _last_line(lab: Lab, what: str) -> str:
    path = lab.component_dir("kubernetes") / "logs" / f"{what}.log"
    lines = path.read_text(errors="replace").strip().splitlines() if path.is_file() else []
    return f"{lines[-1][:200] if lines else 'no output'} (see {path})"


def _wait_ready(url: str, ca: Path, cert: Path, key: Path, pid: int, lab: Lab) -> None:
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(cert), str(key))

    def probe() -> tuple[bool, str]:
        try:
            with urllib.request.urlopen(f"{url}/readyz?verbose", context=context, timeout=5) as answer:
                return answer.status == 200, ""
        except urllib.error.HTTPError as e:
            return False, f"HTTP {e.code}: {_failing_checks(e.read().decode(errors='replace')) or e.reason}"
        except OSError as e:
            return False, str(e)

    wait_until_ready(probe, lambda: pid_alive(pid), lambda: _last_line(lab, "kube-apiserver"), url)


def _failing_checks(verbose: str) -> str:
    """The checks /readyz?verbose lists as failed ("[-]etcd failed: reason withheld", kubernetes.io's
    "Kubernetes API health endpoints"), by name."""
    failed = [line[3:].split(" failed")[0] for line in verbose.splitlines() if line.startswith("[-]")]
    return "failing " + ", ".join(failed) if failed else ""


def wait_until_ready(
    probe: Callable[[], tuple[bool, str]],
    alive: Callable[[], bool],
    log_tail: Callable[[], str],
    url: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait for the API server's /readyz. On a loaded machine its start-up hooks can take longer than
    READY_TIMEOUT_S, so each time the answer changes (another check passed, or it began to answer) the
    wait goes on for READY_TIMEOUT_S more, up to READY_MAX_S in all; an API server that exits, or stays
    on the same answer for READY_TIMEOUT_S, is one line with its answer and its log's last line. ``clock``
    and ``sleep`` keep the time (the tests' clock moves only when they sleep)."""
    started = clock()
    quiet_until = started + READY_TIMEOUT_S
    seen = None
    while True:
        if not alive():
            raise Unreachable(f"lab kubernetes: kube-apiserver exited: {log_tail()}")
        ready, answer = probe()
        if ready:
            return
        now = clock()
        if answer != seen:
            seen, quiet_until = answer, now + READY_TIMEOUT_S
        if now >= min(quiet_until, started + READY_MAX_S):
            raise Unreachable(
                f"lab kubernetes: kube-apiserver at {url} not ready after {now - started:.0f}s ({answer}); "
                f"its log ends: {log_tail()}"
            )
        sleep(READY_POLL_S)


def _hosts(plan: dict[str, Any]) -> dict[str, Any]:
    from gpuready.core.inventory import KUBE_ONLY_GROUP

    # kwok's nodes have no operating system to provision: gpuready reaches them only through the API, so a
    # `provision cluster` without tags runs the Kubernetes layer and no host layer against them.
    gpu_hosts = {n["name"]: {"ansible_connection": "local"} for n in plan["nodes"]}
    return {
        "gpu_nodes": {"children": {KUBE_ONLY_GROUP: {"hosts": gpu_hosts}}},
        "kube_control_plane": {"hosts": {"lab-kube-api": {"ansible_connection": "local"}}},
    }


def _settings(plan: dict[str, Any], config: Path) -> dict[str, Any]:
    profile = PROFILES["t4"]
    return {
        "node_classes": {
            "lab-t4": {
                "gpu_model": profile["model"],
                "gpu_count": profile["count"],
                "gpu_memory_gib": profile["memory_gib"],
            }
        },
        "driver": {"branch": "580"},
        "container_runtime": "none",
        # validate training submits Kubeflow jobs where gpuready's Role allows it (core/platforms/kube_rbac.yaml)
        "training": {"launcher": "kubernetes", "namespace": "gpuready-training"},
        "kubernetes": {
            "flavour": plan["flavour"],
            "kubeconfig": str(config),
            "context": "gpuready-lab",
            "device_plugin": {"rollout_timeout_s": 60},
            "pod_timeout_s": 60,
            "poll_interval_s": 0.5,
        },
    }


def admin_env(state: dict[str, Any]) -> dict[str, str]:
    """Environment for kubectl as the lab's administrator (tests, the benchmark)."""
    return {**os.environ, "KUBECONFIG": state["admin_kubeconfig"]}
