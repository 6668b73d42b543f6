"""gpuready.core.platforms.kube: kubeconfig lookup as kubectl does it, and errors translated once into one line."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from gpuready.core.errors import Unreachable
from gpuready.core.platforms import kube
from gpuready.core.settings import Kubernetes


def _kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters: [{{name: lab, cluster: {{server: "{server}"}}}}]
users: [{{name: admin, user: {{token: "{token}"}}}}]
contexts:
  - {{name: lab, context: {{cluster: lab, user: admin}}}}
  - {{name: other, context: {{cluster: lab, user: admin}}}}
""")
    return path


def test_kubeconfig_from_settings_then_env_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kube.kubeconfig_path(Kubernetes()) is None
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    assert kube.kubeconfig_path(Kubernetes()) == tmp_path / ".kube" / "config"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    assert kube.kubeconfig_path(Kubernetes()) == tmp_path / "a"
    assert kube.kubeconfig_path(Kubernetes(kubeconfig="~/x")) == tmp_path / "x"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not: [yaml", "kubeconfig"),
        ("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n", "kubeconfig"),
    ],
)
def test_broken_kubeconfig_is_one_unreachable_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(Unreachable) as e:
        kube.connect(Kubernetes(kubeconfig=str(path)))
    assert words in str(e.value) and "\n" not in str(e.value)


class _Answers(http.server.BaseHTTPRequestHandler):
    """An HTTP endpoint that answers 503 a given number of times, then an empty NodeList."""

    unavailable = 0
    requests: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        if type(self).unavailable > 0:
            type(self).unavailable -= 1
            code, body = (
                503,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 503,
                    "message": "the server is currently unable to handle the request",
                },
            )
        else:
            code, body = 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []}
        type(self).requests.append(code)
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[kube.Kube]:
    """A client of the _Answers endpoint, with 3 attempts and a short backoff."""
    monkeypatch.setattr(kube, "BACKOFF_FIRST_S", 0.01)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        yield kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "kc", url, "t0ken-abc")), api_retries=3))
    finally:
        server.shutdown()


def test_5xx_is_retried_with_backoff_then_given_up(flaky: kube.Kube) -> None:
    """Only the retry loop is under test here; real API answers are tested against the lab's control plane."""
    client = flaky
    _Answers.unavailable, _Answers.requests = 2, []
    assert client.call(lambda: client.core.list_node().items, "list nodes") == []  # third attempt answers
    assert _Answers.requests == [503, 503, 200]
    _Answers.unavailable = 3
    with pytest.raises(Unreachable, match="kept answering 503"):
        client.call(lambda: client.core.list_node(), "list nodes")


def test_an_api_server_that_stops_answering_is_one_unreachable_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    import time

    # Accepts the connection (the kernel's backlog does) and never answers: a stopped API server.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", (1, 1))
    try:
        client = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "kc", url, "t0ken-abc"))))
        started = time.monotonic()
        with pytest.raises(Unreachable, match=f"cannot reach the Kubernetes API at {url} to list nodes"):
            client.call(lambda: client.core.list_node(), "list nodes")
        assert time.monotonic() - started < 10
    finally:
        silent.close()


def test_plain_json_is_read_with_the_models_attribute_names() -> None:
    pod = kube.Obj(
        {
            "metadata": {"name": "p", "labels": {"app": "x"}},
            "spec": {"nodeName": "n1"},
            "status": {
                "containerStatuses": [{"restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
            },
        }
    )
    assert pod.spec.node_name == "n1" and pod.metadata.labels.get("app") == "x"
    (container,) = pod.status.container_statuses
    assert container.restart_count == 2 and container.state.waiting.reason == "CrashLoopBackOff"
    assert container.state.terminated is None and pod.status.conditions is None  # absent, as in the models
    assert not hasattr(pod, "__deepcopy__")


def test_plain_reads_go_through_the_same_retries(flaky: kube.Kube) -> None:
    client = flaky
    _Answers.unavailable, _Answers.requests = 1, []
    assert client.items(client.core.list_node, "list nodes") == []
    assert _Answers.requests == [503, 200]
    _Answers.unavailable = 3
    with pytest.raises(Unreachable, match="kept answering 503 to list nodes"):
        client.read(client.core.list_node, "list nodes")
