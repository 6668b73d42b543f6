"""The lab's stand-in for the kubelet's device manager on kwok nodes (kwok has none).

On a real node the NVIDIA device plugin registers with the kubelet, and the kubelet then
advertises ``nvidia.com/gpu`` in the node's capacity and allocatable. Here, for each lab GPU node:
while a device-plugin pod (NVIDIA's label name=nvidia-device-plugin-ds) is Running and Ready on
it, the node advertises its profile's GPU count (allocatable 0 when the profile's fault says the
plugin finds them unhealthy); otherwise allocatable is 0. It also points kwok at the failure log
for pods on nodes whose fault makes them log one, and a node-checks pod at its node's verdict (kwok's
Logs objects, one per pod: kwok v0.7.0 picks a pod's log by the pod's name and namespace only, and
gpuready's pods get generated names, so nothing can be pointed before the pod exists).

Pointing is the kubelet's log writing: a real container's output is on disk before the container
ends. So a node-checks pod is let end only once its log is pointed (the annotation ``LOG_HANDLED``,
which the lab's kwok Stage for its completion waits for); the pointing runs ``POINTERS`` requests at
once beside the watch, and each Logs object is owned by its pod, so the garbage collector removes it
with the pod. At 1000 pods created at once, one request at a time behind the watch fell behind kwok.

Everything else (scheduling, the DaemonSet, pod phases) is done by Kubernetes and kwok themselves.
Run by `gpuready lab up` as ``python -m gpuready.lab.kube_devices``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpuready.lab.kwok import (
    GPU,
    LOG_HANDLED,
    NODE_CHECKS_CONTAINER,
    NODE_CHECKS_LABEL,
    NODE_VERDICTS,
    PLUGIN_CONTAINER,
    PLUGIN_LABEL,
    VECTOR_ADD_CONTAINER,
)

log = logging.getLogger("gpuready.lab.devices")
LOGS_API = ("kwok.x-k8s.io", "v1alpha1", "logs")
#: API requests in flight at once for pointing logs (as gpuready's own PARALLEL_REQUESTS): enough to keep up with
#: 1000 pods bound in a burst on a 2-core machine, few enough not to crowd the API server.
POINTERS = 16


def _is_plugin(pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in PLUGIN_LABEL.items())


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _wants_gpu(pod: dict[str, Any]) -> bool:
    return any(GPU in ((c.get("resources") or {}).get("limits") or {}) for c in pod["spec"].get("containers", []))


class Devices:
    def __init__(self, api_client: Any, nodes: dict[str, dict[str, Any]], logs: Path) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.nodes = nodes
        self.logs = logs
        self.pods: dict[str, dict[str, Any]] = {}
        self.advertised: dict[str, tuple[str, str] | None] = {}
        #: Pods whose log is pointed or being pointed (by namespace and name).
        self.pointed: set[tuple[str, str]] = set()
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=POINTERS, thread_name_prefix="point-logs")

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        node = pod["spec"].get("nodeName") or ""
        if kind == "DELETED":
            self.pods.pop(key, None)
            with self.lock:
                self.pointed.discard((meta["namespace"], meta["name"]))
        else:
            self.pods[key] = pod
            self._point_logs(pod, node)
        if node in self.nodes and _is_plugin(pod):
            self.reconcile(node)

    def reconcile(self, node: str) -> None:
        profile = self.nodes[node]
        registered = any(_is_plugin(p) and _ready(p) and p["spec"].get("nodeName") == node for p in self.pods.values())
        want: tuple[str, str] | None
        before = self.advertised.get(node)
        if registered:
            count = str(profile["count"])
            want = (count, "0" if profile.get("fault") == "allocatable-zero" else count)
        else:
            # The kubelet keeps a resource's capacity once a plugin registered it, but nothing is allocatable.
            want = (before[0], "0") if before else None
        if want == self.advertised.get(node, None):
            return
        status: dict[str, Any] = {
            "capacity": {GPU: want[0] if want else None},
            "allocatable": {GPU: want[1] if want else None},
        }
        self.core.patch_node_status(node, {"status": status})
        self.advertised[node] = want
        log.info("%s: %s capacity %s allocatable %s", node, GPU, *(want or ("none", "none")))

    def _point_logs(self, pod: dict[str, Any], node: str) -> None:
        """Hand the pod's log to the pointers once it is on a node, if it has one to point or is to be let end."""
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        if not node or key in self.pointed:
            return
        labels = meta.get("labels") or {}
        node_checks = all(labels.get(k) == v for k, v in NODE_CHECKS_LABEL.items())
        target = self._log_of(pod, node, node_checks)
        if target is None and not node_checks:
            return
        with self.lock:
            self.pointed.add(key)
        self.pool.submit(self._point, pod, target, node_checks)

    def _log_of(self, pod: dict[str, Any], node: str, node_checks: bool) -> tuple[str, Path] | None:
        """The container and the log file kwok is to serve for it, or None where kwok's defaults serve."""
        fault = self.nodes.get(node, {}).get("fault")
        verdict = self.logs / NODE_VERDICTS / f"{node}.log"
        if node_checks:
            # No verdict for the node: nothing is pointed and its log reads as empty, as a pod that printed none.
            return (NODE_CHECKS_CONTAINER, verdict) if verdict.is_file() else None
        if fault == "plugin-not-ready" and _is_plugin(pod):
            return PLUGIN_CONTAINER, self.logs / "plugin-fail.log"
        if fault == "vector-add-fails" and _wants_gpu(pod):
            return VECTOR_ADD_CONTAINER, self.logs / "vector-add-fail.log"
        return None

    def _point(self, pod: dict[str, Any], target: tuple[str, Path] | None, let_end: bool) -> None:
        """Create the pod's Logs object (owned by the pod), then, for a pod that waits for it, mark it handled.
        A few tries, a second apart: a pointer that gives up leaves the pod to be handled on its next event."""
        meta = pod["metadata"]
        for attempt in range(3):
            try:
                if target:
                    self._create_logs(meta, *target)
                if let_end and LOG_HANDLED not in (meta.get("annotations") or {}):
                    self._mark_handled(meta, "pointed" if target else "none")
                return
            except Exception as e:  # the API server under load, or restarting: try again
                log.warning("%s/%s: pointing its log: %s: %s", meta["namespace"], meta["name"], type(e).__name__, e)
                time.sleep(1 + attempt)
        with self.lock:
            self.pointed.discard((meta["namespace"], meta["name"]))

    def _create_logs(self, meta: dict[str, Any], container: str, file: Path) -> None:
        from kubernetes.client.exceptions import ApiException

        group, version, plural = LOGS_API
        owner = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "Logs",
            # kwok finds a pod's Logs by the pod's name and namespace; the garbage collector removes it with its pod.
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "ownerReferences": [owner]},
            "spec": {"logs": [{"containers": [container], "logsFile": str(file)}]},
        }
        try:
            self.custom.create_namespaced_custom_object(group, version, meta["namespace"], plural, body)
        except ApiException as e:
            if e.status != 409:
                raise

    def _mark_handled(self, meta: dict[str, Any], how: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.patch_namespaced_pod(
                meta["name"], meta["namespace"], {"metadata": {"annotations": {LOG_HANDLED: how}}}
            )
        except ApiException as e:
            if e.status != 404:  # a pod deleted meanwhile needs no log
                raise

    def run(self) -> None:
        """Watch all pods for ever; on a broken or expired watch, list again and carry on."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        while True:
            try:
                # Without preloading, the client returns the raw urllib3 response (its .data), not a V1PodList.
                listing: Any = self.core.list_pod_for_all_namespaces(_preload_content=False)
                items = json.loads(listing.data)
                self.pods = {}
                for pod in items["items"]:
                    self.on_pod("ADDED", pod)
                for node in self.nodes:
                    self.reconcile(node)
                version = items["metadata"]["resourceVersion"]
                stream = watch.Watch().stream(
                    self.core.list_pod_for_all_namespaces,
                    resource_version=version,
                    timeout_seconds=300,
                    _preload_content=False,
                )
                for event in stream:
                    self.on_pod(event["type"], event["raw_object"])
            except ApiException as e:
                if e.status != 410:
                    log.warning("API error %s, listing again in 1s", e.status)
                    time.sleep(1)
            except Exception as e:  # keep standing in for the kubelet: connection drops, apiserver restarts
                log.warning("%s: %s; listing again in 1s", type(e).__name__, e)
                time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuready.lab.kube_devices")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--nodes", required=True, help="JSON: GPU node name -> profile (count, fault)")
    parser.add_argument("--logs", required=True, help="folder of the failure logs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    # Nothing to clean up: exit at once, not after the interpreter's teardown of the Kubernetes client.
    signal.signal(signal.SIGTERM, lambda *_: (sys.stdout.flush(), os._exit(0)))
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    # One connection per pointer and one for the watch loop (the client's default pool is 5 per CPU).
    configuration.connection_pool_maxsize = POINTERS + 1
    devices = Devices(client.ApiClient(configuration), json.loads(Path(args.nodes).read_text()), Path(args.logs))
    devices.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
