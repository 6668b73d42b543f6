"""A kubeconfig whose server is not the Kubernetes API (another JSON service, a web server) is one line, exit 3:
the server's answer is refused where it is read, never deep in a check as a traceback. The server is Python's own
http.server; its answers are a JSON document of another kind (the Ansible facts fixture of a RHEL 9 host,
tests/fixtures/facts/), a JSON list, and its own 404 page."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, gpuready, require
from tests.unit.core.test_bad_inputs import GOOD, make_inventory

FACTS = ROOT / "tests" / "fixtures" / "facts" / "rhel-9.json"


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A plain web server on a free port, serving the folder it returns."""
    root = tmp_path / "www"
    root.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", root
    finally:
        server.terminate()
        server.wait(timeout=30)


def cluster_inventory(
    tmp_path: Path, server: str, cluster: dict | None = None, user: dict | None = None, **kubernetes: object
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    hosts = {"gpu_nodes": {"hosts": {"gpu01": {"ansible_connection": "local"}}}}
    return make_inventory(
        tmp_path,
        hosts=hosts,
        settings={"gpuready": {**GOOD, "kubernetes": {"kubeconfig": str(kubeconfig), **kubernetes}}},
    )


@pytest.mark.parametrize("answer", ["facts", "list", "none"])
def test_a_server_that_is_not_the_kubernetes_api_is_one_line_and_exit_3(
    tmp_path: Path, web: tuple[str, Path], answer: str
) -> None:
    server, root = web
    nodes = root / "api" / "v1" / "nodes"  # what the first request (list nodes) reads
    nodes.parent.mkdir(parents=True)
    if answer == "facts":
        shutil.copy(FACTS, nodes)
    elif answer == "list":
        nodes.write_text("[1, 2]")
    inv = cluster_inventory(tmp_path, server)
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("gpuready: error:")]
    assert line.startswith(f"gpuready: error: the server at {server} is not the Kubernetes API"), line


def test_a_kubeconfig_that_skips_tls_verification_does_not_beat_verify_tls_true(tmp_path: Path) -> None:
    """insecure-skip-tls-verify in the kubeconfig and verify_tls: true written in the inventory contradict each
    other: one line, exit 2, before any request. Left out of the inventory, the kubeconfig's choice is said."""
    skip = {"insecure-skip-tls-verify": True}
    inv = cluster_inventory(tmp_path, "https://127.0.0.1:9", cluster=skip, verify_tls=True)
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "insecure-skip-tls-verify: true, and gpuready.kubernetes.verify_tls is true" in done.stderr
    (tmp_path / "default").mkdir()
    inv = cluster_inventory(tmp_path / "default", "https://127.0.0.1:9", cluster=skip)
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 3, done.stdout + done.stderr  # nothing listens on port 9 (discard)
    assert "TLS verification of https://127.0.0.1:9 is off" in done.stderr


def test_a_token_over_plain_http_is_said(tmp_path: Path, web: tuple[str, Path]) -> None:
    server, _ = web
    inv = cluster_inventory(tmp_path, server, user={"token": "not-a-real-token"})
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"the credentials of {server} go over plain http" in done.stderr
    assert "not-a-real-token" not in done.stdout + done.stderr


def test_a_client_key_tls_cannot_load_is_the_kubeconfigs_fault(tmp_path: Path) -> None:
    """A key and certificate made by openssl; the key then cut in half (a paste that lost its end). Refused as
    the kubeconfig's (exit 2), not "cannot reach the API" (exit 3); the whole pair passes that check."""
    require(shutil.which("openssl"), "no openssl (scripts/install-system-deps installs it)")
    key, cert = tmp_path / "client.key", tmp_path / "client.crt"
    make = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
    subprocess.run([*make, "-days", "1", "-subj", "/CN=gpuready-test"], check=True, capture_output=True)
    whole = {"client-certificate": str(cert), "client-key": str(key)}
    good = cluster_inventory(tmp_path, "https://127.0.0.1:9", user=whole)
    done = gpuready("validate", "cluster", "-i", str(good), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 3 and "cannot reach" in done.stderr, done.stderr  # nothing listens on port 9
    text = key.read_text()
    damaged = tmp_path / "damaged.key"
    damaged.write_text(text[: len(text) // 2])
    (tmp_path / "bad").mkdir()
    bad = cluster_inventory(tmp_path / "bad", "https://127.0.0.1:9", user={**whole, "client-key": str(damaged)})
    done = gpuready("validate", "cluster", "-i", str(bad), "--artifacts", str(tmp_path / "runs"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the user's client certificate or key cannot be loaded" in done.stderr


def test_an_exec_credential_plugin_that_never_answers_is_given_up(tmp_path: Path) -> None:
    """The Kubernetes client waits for a kubeconfig's exec plugin forever; gpuready gives it
    $GPUREADY_CREDENTIAL_TIMEOUT_S, ends it and says so (exit 3)."""
    seconds = str(3600 + os.getpid() % 1000)
    plugin = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sleep", "args": [seconds]}}
    inv = cluster_inventory(tmp_path, "https://127.0.0.1:9", user=plugin)
    env = {"GPUREADY_CREDENTIAL_TIMEOUT_S": "2"}
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"), env=env, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "credential plugin" in done.stderr and "did not answer within 2 s" in done.stderr
    left = subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True)
    assert left.stdout == "", "the plugin was left running"


def test_an_exec_credential_plugin_that_never_answers_its_refresh_is_given_up(
    tmp_path: Path, web: tuple[str, Path]
) -> None:
    """The client runs the plugin again before a request once its token is within 5 minutes of expiring, and
    waits for that call forever as well: gpuready bounds it like the first. The plugin answers once, with a token
    that expires in a minute, then never again."""
    import datetime

    server, _ = web
    seconds = str(3600 + os.getpid() % 1000)
    expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    credential = (
        '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
        f'"status": {{"token": "first-token", "expirationTimestamp": "{expires}"}}}}'
    )
    script = tmp_path / "plugin"
    script.write_text(f'#!/bin/sh\n[ -e "$0.ran" ] && exec sleep {seconds}\ntouch "$0.ran"\necho \'{credential}\'\n')
    script.chmod(0o755)
    plugin = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
    inv = cluster_inventory(tmp_path, server, user=plugin)
    env = {"GPUREADY_CREDENTIAL_TIMEOUT_S": "2"}
    done = gpuready("validate", "cluster", "-i", str(inv), "--artifacts", str(tmp_path / "runs"), env=env, timeout=120)
    assert (tmp_path / "plugin.ran").exists(), "the plugin's first answer was not asked for"
    assert done.returncode == 3, done.stdout + done.stderr
    assert "run again to refresh its token" in done.stderr and "did not answer within 2 s" in done.stderr
    assert "Traceback" not in done.stderr
    left = subprocess.run(["pgrep", "-f", f"sleep {seconds}"], capture_output=True, text=True)
    assert left.stdout == "", "the plugin was left running"
