"""The lab's stand-in for the kubelet's device manager on kwok nodes (kwok has none).

On a real node the NVIDIA device plugin registers with the kubelet, and the kubelet then
advertises ``nvidia.com/gpu`` in the node's capacity and allocatable. Here, for each lab GPU node:
while a device-plugin pod (NVIDIA's label name=nvidia-device-plugin-ds) is Running and Ready on
it, the node advertises its profile's GPU count (allocatable 0 when the profile's fault says the
plugin finds them unhealthy); otherwise allocatable is 0. It also points kwok at the failure log
for pods on nodes whose fault makes them log one (kwok's Logs objects, one per pod).

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
import time
from pathlib import Path
from typing import Any

from gpuready.lab.kwok import (
    GPU,
    NODE_CHECKS_CONTAINER,
    NODE_CHECKS_LABEL,
    NODE_VERDICTS,
    PLUGIN_CONTAINER,
    PLUGIN_LABEL,
    VECTOR_ADD_CONTAINER,
)

log = logging.getLogger("gpuready.lab.devices")
LOGS_API = ("kwok.x-k8s.io", "v1alpha1", "logs")


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
        self.pointed: set[tuple[str, str]] = set()

    def on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        node = pod["spec"].get("nodeName") or ""
        if kind == "DELETED":
            self.pods.pop(key, None)
            self._unpoint(meta["namespace"], meta["name"])
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
        fault = self.nodes.get(node, {}).get("fault")
        meta = pod["metadata"]
        if (meta["namespace"], meta["name"]) in self.pointed:
            return
        labels = meta.get("labels") or {}
        verdict = self.logs / NODE_VERDICTS / f"{node}.log"
        if node and all(labels.get(k) == v for k, v in NODE_CHECKS_LABEL.items()) and verdict.is_file():
            container, file = NODE_CHECKS_CONTAINER, str(verdict.relative_to(self.logs))
        elif not fault:
            return
        elif fault == "plugin-not-ready" and _is_plugin(pod):
            container, file = PLUGIN_CONTAINER, "plugin-fail.log"
        elif fault == "vector-add-fails" and _wants_gpu(pod):
            container, file = VECTOR_ADD_CONTAINER, "vector-add-fail.log"
        else:
            return
        group, version, plural = LOGS_API
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "Logs",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {"logs": [{"containers": [container], "logsFile": str(self.logs / file)}]},
        }
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.create_namespaced_custom_object(group, version, meta["namespace"], plural, body)
        except ApiException as e:
            if e.status != 409:
                raise
        self.pointed.add((meta["namespace"], meta["name"]))

    def _unpoint(self, namespace: str, name: str) -> None:
        if (namespace, name) not in self.pointed:
            return
        from kubernetes.client.exceptions import ApiException

        self.pointed.discard((namespace, name))
        group, version, plural = LOGS_API
        try:
            self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        except ApiException as e:
            if e.status != 404:
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
    devices = Devices(client.ApiClient(configuration), json.loads(Path(args.nodes).read_text()), Path(args.logs))
    devices.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
