"""The simulated cluster behind the API: seeded nodes, and the controllers a real cluster runs.

A DaemonSet controller, a scheduler, a kubelet and a garbage collector, each reduced to what
gpuready exercises: device-plugin pods on labelled GPU nodes (logging seed 002's lines), GPUs
advertised once a plugin is ready, and test pods that run to Succeeded or Failed with logs.
Everything here is simulated; no container runs.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from gpuready.lab.kube_emulator.server import Faults
from gpuready.lab.kube_emulator.store import ApiError, Store, now, put_internal

GPU = "nvidia.com/gpu"
# Seed 002: what the device plugin logs when it starts, and what cuda-vector-add prints.
PLUGIN_LOG = ["Loading NVML", "Fetching devices.", "Starting FS watcher.", "Starting OS watcher.",
              "Starting to serve on /var/lib/kubelet/device-plugins/nvidia.sock",
              "Registered device plugin with Kubelet"]
PLUGIN_FAIL_LOG = ["Loading NVML", "Failed to initialize NVML: could not load NVML library.",
                   "If this is a GPU node, did you set the docker default runtime to `nvidia`?",
                   "Shutdown of NVML returned: <nil>"]
VECTOR_ADD_LOG = ["[Vector addition of 50000 elements]", "Copy input data from the host memory to the CUDA device",
                  "CUDA kernel launch with 196 blocks of 256 threads",
                  "Copy output data from the CUDA device to the host memory", "Test PASSED", "Done"]
VECTOR_ADD_FAIL_LOG = ["[Vector addition of 50000 elements]",
                       "Failed to allocate device vector A (error code no CUDA-capable device is detected)!"]
PERMISSION_DENIED = ("failed to create containerd task: OCI runtime create failed: nvidia-container-cli: "
                     "initialization error: open failed: /dev/nvidiactl: permission denied: unknown")


@dataclass
class NodeSeed:
    name: str
    gpus: int = 0
    gpu_product: str = "Tesla-T4"


DEFAULT_NODES = [NodeSeed("stor1.lab.local", 1), NodeSeed("stor2.lab.local", 1), NodeSeed("infra1.lab.local", 0)]


def seed(store: Store, nodes: list[NodeSeed], openshift: bool) -> None:
    """What a fresh cluster has: system namespaces, priority classes, nodes (and OpenShift's SCCs)."""
    ns = store.by_kind("Namespace")
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        store.create(ns, None, {"metadata": {"name": name}}, "kube-apiserver")
    pc = store.by_kind("PriorityClass")
    for name, value in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)):
        store.create(pc, None, {"metadata": {"name": name}, "value": value,
                                "description": "Used for system critical pods that must not be moved."},
                     "kube-apiserver")
    for node in nodes:
        labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "node-role.kubernetes.io/worker": ""}
        spec: dict[str, Any] = {}
        if node.gpus:
            # GPU nodes carry the usual taint, so only pods that tolerate it land there.
            spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
        capacity = {"cpu": "40", "memory": "394863916Ki", "pods": "250", "ephemeral-storage": "936986972Ki"}
        store.create(store.by_kind("Node"), None, {
            "metadata": {"name": node.name, "labels": labels,
                         "annotations": {"gpuready.io/simulated": "true",
                                         "gpuready.io/simulated-gpus": f"{node.gpus}x{node.gpu_product}"}},
            "spec": spec,
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status (simulated)",
                                       "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
                       "nodeInfo": {"kubeletVersion": "v1.30.4", "kubeProxyVersion": "v1.30.4",
                                    "containerRuntimeVersion": "cri-o://1.30.4", "kernelVersion": "5.14.0-427.el9",
                                    "osImage": "Red Hat Enterprise Linux (simulated)", "architecture": "amd64",
                                    "operatingSystem": "linux", "bootID": str(uuid.uuid4()),
                                    "machineID": uuid.uuid4().hex, "systemUUID": str(uuid.uuid4())}}}, "kubelet")
    if openshift:
        scc = store.by_kind("SecurityContextConstraints")
        base = {"allowHostIPC": False, "allowHostNetwork": False, "allowHostPID": False, "allowHostPorts": False,
                "allowPrivilegeEscalation": True, "readOnlyRootFilesystem": False,
                "runAsUser": {"type": "MustRunAsRange"}, "seLinuxContext": {"type": "MustRunAs"},
                "fsGroup": {"type": "MustRunAs"}, "supplementalGroups": {"type": "RunAsAny"},
                "users": [], "groups": [], "volumes": ["configMap", "downwardAPI", "emptyDir",
                                                       "persistentVolumeClaim", "projected", "secret"]}
        store.create(scc, None, {"metadata": {"name": "restricted"}, **base, "allowHostDirVolumePlugin": False,
                                 "allowPrivilegedContainer": False, "groups": ["system:authenticated"],
                                 "priority": None}, "openshift-apiserver")
        store.create(scc, None, {"metadata": {"name": "privileged"}, **base, "allowHostDirVolumePlugin": True,
                                 "allowPrivilegedContainer": True, "volumes": ["*"],
                                 "runAsUser": {"type": "RunAsAny"}, "seLinuxContext": {"type": "RunAsAny"},
                                 "users": ["system:admin"], "groups": ["system:cluster-admins"], "priority": None},
                     "openshift-apiserver")


def _gpus_of(node: dict[str, Any]) -> int:
    text = (node["metadata"].get("annotations") or {}).get("gpuready.io/simulated-gpus", "0x")
    return int(text.split("x")[0])


def _tolerates(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
    for taint in (node.get("spec") or {}).get("taints", []):
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_toleration_matches(t, taint) for t in pod_spec.get("tolerations", [])):
            return False
    return True


def _toleration_matches(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")


def _selects(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in (pod_spec.get("nodeSelector") or {}).items())


def _gpu_request(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod["spec"].get("containers", []):
        resources = c.get("resources") or {}
        total += int((resources.get("limits") or {}).get(GPU, (resources.get("requests") or {}).get(GPU, 0)))
    return total


def _is_plugin(pod: dict[str, Any]) -> bool:
    return any("k8s-device-plugin" in c.get("image", "") for c in pod["spec"].get("containers", []))


def _is_vector_add(pod: dict[str, Any]) -> bool:
    return any("vector-add" in c.get("image", "") or "vectoradd" in c.get("image", "")
               for c in pod["spec"].get("containers", []))


def _stamp(line: str) -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y/%m/%d %H:%M:%S ") + line


class Cluster:
    """Runs the emulated controllers every ``tick`` seconds."""

    def __init__(self, store: Store, faults: Faults, openshift: bool = False, tick: float = 0.2) -> None:
        self.store, self.faults, self.openshift, self.tick = store, faults, openshift, tick
        self.age: dict[str, int] = {}  # pod uid -> ticks since it was bound to a node
        self.crashes: dict[str, int] = {}  # pod uid -> restarts while a fault made it crash
        self.res = {k: store.by_kind(k) for k in ("Pod", "Node", "DaemonSet", "Event", "Namespace",
                                                  "ServiceAccount", "PriorityClass")}

    async def run(self) -> None:
        while True:
            try:
                self.step()
            except Exception:  # keep the cluster alive; the API keeps answering
                import logging

                logging.getLogger(__name__).exception("simulated controllers failed a step")
            await asyncio.sleep(self.tick)

    def step(self) -> None:
        self._daemonsets()
        self._garbage_collect()
        self._schedule()
        self._kubelet()
        self._device_plugins()

    # -- events
    def event(self, obj: dict[str, Any], reason: str, message: str, kind: str = "Normal",
              component: str = "kubelet") -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        self.store.create(self.res["Event"], namespace, {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {"kind": obj.get("kind", "Pod"), "namespace": namespace, "name": meta["name"],
                               "uid": meta.get("uid"), "apiVersion": obj.get("apiVersion", "v1")},
            "reason": reason, "message": message, "type": kind, "source": {"component": component},
            "firstTimestamp": now(), "lastTimestamp": now(), "count": 1}, component)

    # -- DaemonSet controller
    def _daemonsets(self) -> None:
        nodes = self.store.list(self.res["Node"])
        pods = self.store.list(self.res["Pod"])
        for ds in self.store.list(self.res["DaemonSet"]):
            meta = ds["metadata"]
            template = ds["spec"]["template"]
            digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
            owned = [p for p in pods if any(o.get("uid") == meta["uid"]
                                            for o in p["metadata"].get("ownerReferences", []))]
            eligible = [n for n in nodes if _selects(template["spec"], n) and _tolerates(template["spec"], n)]
            names = {n["metadata"]["name"] for n in eligible}
            for pod in owned:
                stale = pod["metadata"].get("labels", {}).get("controller-revision-hash") != digest
                if pod["spec"].get("nodeName") not in names or stale:
                    self.store.delete(self.res["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"])
            owned = [p for p in self.store.list(self.res["Pod"], meta["namespace"])
                     if any(o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences", []))]
            covered = {p["spec"].get("nodeName") for p in owned}
            for node in eligible:
                if node["metadata"]["name"] not in covered:
                    self._create_ds_pod(ds, template, digest, node["metadata"]["name"])
            owned = [p for p in self.store.list(self.res["Pod"], meta["namespace"])
                     if any(o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences", []))]
            ready = [p for p in owned if _pod_ready(p)]
            status = {"currentNumberScheduled": len(owned), "desiredNumberScheduled": len(eligible),
                      "numberMisscheduled": 0, "numberReady": len(ready), "updatedNumberScheduled": len(owned),
                      "numberAvailable": len(ready), "observedGeneration": meta.get("generation", 1)}
            if len(eligible) > len(ready):
                status["numberUnavailable"] = len(eligible) - len(ready)
            if status != {k: v for k, v in ds.get("status", {}).items()}:
                self.store.set_status(self.res["DaemonSet"], meta["namespace"], meta["name"], status,
                                      "kube-controller-manager")

    def _create_ds_pod(self, ds: dict[str, Any], template: dict[str, Any], digest: str, node: str) -> None:
        meta = ds["metadata"]
        pod = {"metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                            "labels": {**(template.get("metadata") or {}).get("labels", {}),
                                       "controller-revision-hash": digest},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": {**copy.deepcopy(template["spec"]), "nodeName": node}}
        try:
            self.admit(pod)
            self.store.create(self.res["Pod"], meta["namespace"], pod, "kube-controller-manager")
        except ApiError as e:
            recent = [ev for ev in self.store.list(self.res["Event"], meta["namespace"])
                      if ev["involvedObject"].get("uid") == meta["uid"] and ev["reason"] == "FailedCreate"]
            if not recent:
                self.event(ds, "FailedCreate", f"Error creating: {e.message}", "Warning", "daemonset-controller")

    def admit(self, pod: dict[str, Any]) -> None:
        """Admission a pod goes through: its service account and priority class must exist, and on
        OpenShift an SCC must allow what it asks for (host paths, privilege)."""
        spec, namespace = pod["spec"], pod["metadata"]["namespace"]
        account = spec.get("serviceAccountName") or "default"
        if account != "default" and self.store.find(self.res["ServiceAccount"], namespace, account) is None:
            raise ApiError(403, "Forbidden", f'pods "{pod["metadata"].get("generateName", "")}" is forbidden: '
                           f'error looking up service account {namespace}/{account}: serviceaccount "{account}" '
                           f"not found")
        priority = spec.get("priorityClassName")
        if priority and self.store.find(self.res["PriorityClass"], None, priority) is None:
            raise ApiError(403, "Forbidden", f"pods is forbidden: no PriorityClass with name {priority} was found")
        if not self.openshift:
            return
        host_path = any("hostPath" in v for v in spec.get("volumes", []))
        privileged = any((c.get("securityContext") or {}).get("privileged") for c in spec.get("containers", []))
        user = f"system:serviceaccount:{namespace}:{account}"
        groups = {"system:authenticated", "system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
        for scc in self.store.list(self.store.by_kind("SecurityContextConstraints")):
            if user not in (scc.get("users") or []) and not groups & set(scc.get("groups") or []):
                continue
            if host_path and not (scc.get("allowHostDirVolumePlugin") and
                                  {"hostPath", "*"} & set(scc.get("volumes") or [])):
                continue
            if privileged and not scc.get("allowPrivilegedContainer"):
                continue
            pod["metadata"].setdefault("annotations", {})["openshift.io/scc"] = scc["metadata"]["name"]
            return
        wants = "host path volumes" if host_path else "privileged containers" if privileged else "its settings"
        raise ApiError(403, "Forbidden", f"pods is forbidden: unable to validate against any security context "
                       f"constraint: [{wants} are not allowed to be used for {user}]")

    def _garbage_collect(self) -> None:
        live = {d["metadata"]["uid"] for d in self.store.list(self.res["DaemonSet"])}
        for pod in self.store.list(self.res["Pod"]):
            owners = [o for o in pod["metadata"].get("ownerReferences", []) if o.get("kind") == "DaemonSet"]
            if owners and not any(o["uid"] in live for o in owners):
                self.store.delete(self.res["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"])

    # -- scheduler
    def _schedule(self) -> None:
        nodes = self.store.list(self.res["Node"])
        pods = self.store.list(self.res["Pod"])
        for pod in pods:
            if pod["spec"].get("nodeName") or pod["status"].get("phase") != "Pending":
                continue
            reasons: list[str] = []
            fit = None
            for node in nodes:
                if not _selects(pod["spec"], node):
                    reasons.append("didn't match Pod's node affinity/selector")
                elif not _tolerates(pod["spec"], node):
                    reasons.append("had untolerated taint {nvidia.com/gpu: present}")
                elif _gpu_request(pod) > self._free_gpus(node, pods):
                    reasons.append(f"Insufficient {GPU}")
                else:
                    fit = node
                    break
            if fit is None:
                counts: dict[str, int] = {}
                for r in reasons:
                    counts[r] = counts.get(r, 0) + 1
                message = f"0/{len(nodes)} nodes are available: " + ", ".join(
                    f"{n} node(s) {r}" if not r.startswith("Insufficient") else f"{n} {r}"
                    for r, n in sorted(counts.items())) + "."
                conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": message, "lastTransitionTime": now()}]
                if pod["status"].get("conditions") != conditions and \
                        (pod["status"].get("conditions") or [{}])[0].get("message") != message:
                    self.store.set_status(self.res["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"],
                                          {**pod["status"], "conditions": conditions}, "kube-scheduler")
                    self.event(pod, "FailedScheduling", message, "Warning", "default-scheduler")
                continue
            pod["spec"]["nodeName"] = fit["metadata"]["name"]
            put_internal(self.store, self.res["Pod"], pod, "kube-scheduler")
            self.event(pod, "Scheduled", f"Successfully assigned {pod['metadata']['namespace']}/"
                       f"{pod['metadata']['name']} to {fit['metadata']['name']}", component="default-scheduler")

    def _free_gpus(self, node: dict[str, Any], pods: list[dict[str, Any]]) -> int:
        allocatable = int((node.get("status") or {}).get("allocatable", {}).get(GPU, 0))
        used = sum(_gpu_request(p) for p in pods if p["spec"].get("nodeName") == node["metadata"]["name"]
                   and p["status"].get("phase") in ("Pending", "Running"))
        return allocatable - used

    # -- kubelet
    def _kubelet(self) -> None:
        for pod in self.store.list(self.res["Pod"]):
            if not pod["spec"].get("nodeName") or pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            uid = pod["metadata"]["uid"]
            self.age[uid] = age = self.age.get(uid, 0) + 1
            if age == 1:
                self._set_pod(pod, "Pending", [_container(c, waiting="ContainerCreating")
                                               for c in pod["spec"]["containers"]])
                for c in pod["spec"]["containers"]:
                    self.event(pod, "Pulled", f'Container image "{c["image"]}" already present on machine')
            elif _is_plugin(pod):
                self._run_plugin(pod, age)
            elif _is_vector_add(pod) or pod["spec"].get("restartPolicy") == "Never":
                self._run_to_completion(pod, age)
            elif age == 2:
                self._start(pod, [""])

    def _start(self, pod: dict[str, Any], log: list[str], ready: bool = True) -> None:
        for c in pod["spec"]["containers"]:
            self.store.logs[(pod["metadata"]["namespace"], pod["metadata"]["name"], c["name"])] = \
                "".join(_stamp(line) + "\n" for line in log if line)
            self.event(pod, "Created", f"Created container {c['name']}")
            self.event(pod, "Started", f"Started container {c['name']}")
        self._set_pod(pod, "Running", [_container(c, running=True, ready=ready) for c in pod["spec"]["containers"]])

    def _run_plugin(self, pod: dict[str, Any], age: int) -> None:
        if "plugin-not-ready" in self.faults.active:
            if age % 3 == 2:
                uid = pod["metadata"]["uid"]
                self.crashes[uid] = restarts = self.crashes.get(uid, -1) + 1
                for c in pod["spec"]["containers"]:
                    self.store.logs[(pod["metadata"]["namespace"], pod["metadata"]["name"], c["name"])] = \
                        "".join(_stamp(line) + "\n" for line in PLUGIN_FAIL_LOG)
                self._set_pod(pod, "Running", [_container(c, waiting="CrashLoopBackOff", restarts=restarts,
                                                          message="back-off 10s restarting failed container")
                                               for c in pod["spec"]["containers"]])
                self.event(pod, "BackOff", "Back-off restarting failed container", "Warning")
            return
        if age == 2 or not _pod_ready(pod):
            self._start(pod, PLUGIN_LOG)

    def _run_to_completion(self, pod: dict[str, Any], age: int) -> None:
        vector_add = _is_vector_add(pod)
        if "permission-denied" in self.faults.active and vector_add:
            self._set_pod(pod, "Failed", [_container(c, exit_code=128, reason="StartError",
                                                     message=PERMISSION_DENIED) for c in pod["spec"]["containers"]])
            self.event(pod, "Failed", f"Error: {PERMISSION_DENIED}", "Warning")
            return
        if vector_add and "vector-add-hangs" in self.faults.active and age >= 2:
            if age == 2:
                self._start(pod, VECTOR_ADD_LOG[:1])
            return  # a kernel that never returns: Running until someone deletes the pod
        if age == 2:
            fails = vector_add and "vector-add-fails" in self.faults.active
            self._start(pod, (VECTOR_ADD_FAIL_LOG if fails else VECTOR_ADD_LOG) if vector_add else [])
        elif age >= 3:
            fails = vector_add and "vector-add-fails" in self.faults.active
            self._set_pod(pod, "Failed" if fails else "Succeeded",
                          [_container(c, exit_code=1 if fails else 0, reason="Error" if fails else "Completed")
                           for c in pod["spec"]["containers"]])

    def _set_pod(self, pod: dict[str, Any], phase: str, statuses: list[dict[str, Any]]) -> None:
        ready = phase == "Running" and all(s["ready"] for s in statuses)
        status = {**pod["status"], "phase": phase, "hostIP": "10.0.0.10", "podIP": "10.128.0.10",
                  "startTime": pod["status"].get("startTime") or now(), "containerStatuses": statuses,
                  "conditions": [{"type": "PodScheduled", "status": "True"},
                                 {"type": "Initialized", "status": "True"},
                                 {"type": "ContainersReady", "status": str(ready)},
                                 {"type": "Ready", "status": str(ready)}]}
        self.store.set_status(self.res["Pod"], pod["metadata"]["namespace"], pod["metadata"]["name"], status,
                              "kubelet")

    # -- device plugins register with the kubelet, which then advertises the GPUs
    def _device_plugins(self) -> None:
        pods = self.store.list(self.res["Pod"])
        for node in self.store.list(self.res["Node"]):
            gpus = _gpus_of(node)
            name = node["metadata"]["name"]
            registered = gpus and any(_is_plugin(p) and _pod_ready(p) and p["spec"].get("nodeName") == name
                                      for p in pods)
            status = copy.deepcopy(node["status"])
            if registered:
                status["capacity"][GPU] = str(gpus)
                status["allocatable"][GPU] = "0" if "allocatable-zero" in self.faults.active else str(gpus)
            elif GPU in status["capacity"]:
                status["allocatable"][GPU] = "0"  # the kubelet keeps capacity but nothing is allocatable
            if status != node["status"]:
                self.store.set_status(self.res["Node"], None, name, status, "kubelet")


def _pod_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"].get("conditions", []))


def _container(c: dict[str, Any], *, waiting: str = "", running: bool = False, ready: bool = False,
               exit_code: int | None = None, reason: str = "", message: str = "", restarts: int = 0) -> dict[str, Any]:
    if waiting:
        state: dict[str, Any] = {"waiting": {"reason": waiting, **({"message": message} if message else {})}}
    elif running:
        state = {"running": {"startedAt": now()}}
    else:
        state = {"terminated": {"exitCode": exit_code or 0, "reason": reason, "finishedAt": now(),
                                **({"message": message} if message else {})}}
    digest = hashlib.sha256(c["image"].encode()).hexdigest()
    return {"name": c["name"], "image": c["image"], "imageID": f"{c['image'].split(':')[0]}@sha256:{digest}",
            "containerID": f"cri-o://{digest[:32]}" if not waiting else None, "ready": ready and running,
            "restartCount": restarts, "started": running, "state": state}
