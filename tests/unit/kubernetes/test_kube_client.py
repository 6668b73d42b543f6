"""gpuready.core.kube: kubeconfig lookup as kubectl does it, and errors translated once into one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.core import kube
from gpuready.core.errors import Unreachable
from gpuready.core.settings import Kubernetes
from gpuready.lab.kube_emulator import Emulator


@pytest.fixture
def emulator():
    emu = Emulator(token="unit-token-0123456789", tick=0.05)
    emu.start_in_thread()
    yield emu
    emu.stop()


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


def test_connect_and_list_over_http(emulator: Emulator, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", emulator.url, "unit-token-0123456789")
    client = kube.connect(Kubernetes(kubeconfig=str(path), context="other"))
    names = [n.metadata.name for n in client.call(lambda: client.core.list_node().items, "list nodes")]
    assert names == ["infra1.lab.local", "stor1.lab.local", "stor2.lab.local"]


@pytest.mark.parametrize(("text", "words"), [
    ("not: [yaml", "kubeconfig"),
    ("apiVersion: v1\nkind: Config\ncontexts: []\nclusters: []\nusers: []\n", "kubeconfig"),
])
def test_broken_kubeconfig_is_one_unreachable_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(Unreachable) as e:
        kube.connect(Kubernetes(kubeconfig=str(path)))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_unknown_context_is_unreachable(emulator: Emulator, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", emulator.url, "t0ken-abcdef")
    with pytest.raises(Unreachable, match="kubeconfig"):
        kube.connect(Kubernetes(kubeconfig=str(path), context="nope"))


def test_401_403_and_unreachable_are_one_line_without_the_token(emulator: Emulator, tmp_path: Path) -> None:
    wrong = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "a", emulator.url, "wrong-token-xyz"))))
    with pytest.raises(Unreachable, match=r"refused the credentials \(401\)") as e:
        wrong.call(lambda: wrong.core.list_node(), "list nodes")
    assert "wrong-token-xyz" not in str(e.value)
    client = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "b", emulator.url,
                                                                "unit-token-0123456789"))))
    emulator.api.faults.set(["forbidden"])
    with pytest.raises(Unreachable, match=r"not allowed to list nodes \(403 Forbidden\)"):
        client.call(lambda: client.core.list_node(), "list nodes")
    emulator.api.faults.active.clear()
    gone = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "c", "http://127.0.0.1:9", "t0ken-abc"))))
    with pytest.raises(Unreachable, match=r"cannot reach the Kubernetes API at http://127\.0\.0\.1:9"):
        gone.call(lambda: gone.core.list_node(), "list nodes")


def test_5xx_is_retried_with_backoff_then_given_up(emulator: Emulator, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube, "BACKOFF_FIRST_S", 0.01)
    client = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "kc", emulator.url,
                                                                "unit-token-0123456789")), api_retries=3))
    emulator.api.faults.unavailable = 2
    assert client.call(lambda: client.core.list_node().items, "list nodes")  # third attempt answers
    assert emulator.api.requests["503"] == 2
    emulator.api.faults.unavailable = 3
    with pytest.raises(Unreachable, match="kept answering 503"):
        client.call(lambda: client.core.list_node(), "list nodes")


def test_404_and_409_come_back_as_their_own_exceptions(emulator: Emulator, tmp_path: Path) -> None:
    client = kube.connect(Kubernetes(kubeconfig=str(_kubeconfig(tmp_path / "kc", emulator.url,
                                                                "unit-token-0123456789"))))
    with pytest.raises(kube.NotFound):
        client.call(lambda: client.core.read_node("nope"), "read node")
    from kubernetes.client import V1Namespace

    with pytest.raises(kube.Conflict):
        client.call(lambda: client.core.create_namespace(V1Namespace.from_dict({"metadata": {"name": "default"}})),
                    "create namespace")
