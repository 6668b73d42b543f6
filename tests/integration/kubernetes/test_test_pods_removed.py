"""A run's test pods are deleted in parts sent side by side, each one DELETECOLLECTION the real API server
serves inside its request timeout; the API server's audit log shows the requests gpuready's user sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.integration.kubernetes.conftest import LabCluster

pytestmark = pytest.mark.slow


def _audited(lab: LabCluster, run: str, names: list[str]) -> list[tuple[str, str]]:
    """(verb, requestURI) of gpuready's requests on this run's pods, by its label or their names."""
    log = lab.root / "kubernetes" / "logs" / "audit.log"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return [
        (e["verb"], e["requestURI"])
        for e in events
        if e["user"]["username"] == "gpuready"
        and e.get("objectRef", {}).get("resource") == "pods"
        and e["stage"] == "ResponseComplete"
        and (run in e["requestURI"] or e.get("objectRef", {}).get("name") in names)
    ]


def test_each_part_of_the_runs_pods_goes_in_one_request_and_none_is_left(
    lab: LabCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpuready.core.platforms import kube
    from gpuready.core.settings import Kubernetes
    from gpuready.validate import cluster

    settings = Kubernetes(kubeconfig=lab.state["kubeconfig"])
    client = kube.connect(settings)
    nodes = sorted(n["metadata"]["name"] for n in lab.kubectl.json("get", "nodes")["items"])
    assert len(nodes) == 3
    monkeypatch.setattr(cluster, "DELETE_BATCH", 2)  # 3 nodes: parts of 2 and 1 pods
    seen: dict[str, Any] = {}

    def build(host: str, run: str) -> dict[str, Any]:
        seen["run"] = run
        return cluster.cuda_vector_add_pod(host, settings.cuda_vector_add_image, run)

    def judge(ended: tuple[str, Any], events: Any = None) -> list[Any]:
        host, pod = ended
        seen.setdefault("parts", {})[host] = pod.metadata.labels[cluster.PART_LABEL]
        seen.setdefault("names", []).append(pod.metadata.name)
        return []

    cluster.pods_per_node(client, settings, nodes, build, judge, lambda: None, what="a test pod", timeout_s=1)
    run = seen["run"]
    assert seen["parts"] == {nodes[0]: "0", nodes[1]: "0", nodes[2]: "1"}
    left = lab.kubectl.json("get", "pods", "-A", "-l", f"gpuready.io/run={run}")["items"]
    assert left == []
    requests = _audited(lab, run, seen["names"])
    deletes = sorted(
        parse_qs(urlsplit(uri).query)["labelSelector"][0] for verb, uri in requests if verb == "deletecollection"
    )
    assert deletes == [f"gpuready.io/run={run},{cluster.PART_LABEL}={part}" for part in ("0", "1")], requests
    assert not [uri for verb, uri in requests if verb == "delete"], "no pod was deleted one by one"
