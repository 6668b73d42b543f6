"""A TLS certificate that does not verify is "could not reach" (exit 3), never a finding about the machines."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, provision_cluster
from tests.playbooks import site

LOCAL = ROOT / "inventories" / "local"


@pytest.fixture
def https_url(tmp_path: Path) -> Iterator[str]:
    """A real HTTPS server on loopback whose certificate no CA vouches for (self-signed)."""
    from gpuready.lab.vsphere import make_certificate

    cert, key = make_certificate(tmp_path / "tls")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_a_certificate_that_does_not_verify_is_exit_3_not_a_finding(https_url: str, tmp_path: Path) -> None:
    playbooks = site(
        tmp_path,
        {
            "name": "Api | Talk to an API over TLS",
            "hosts": "gpu_nodes",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Api | Read the API",
                    "check_mode": False,
                    "ansible.builtin.uri": {"url": https_url, "validate_certs": True},
                }
            ],
        },
    )
    runs = tmp_path / "runs"
    done = provision_cluster(
        LOCAL,
        runs,
        "--check",
        env={"GPUREADY_PLAYBOOKS": str(playbooks), "SSL_CERT_FILE": "", "REQUESTS_CA_BUNDLE": ""},
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [summary] = [json.loads(p.read_text()) for p in runs.glob("*/summary.json")]
    [check] = [c for c in summary["checks"] if c["host"] == "localhost"]
    assert check["status"] == "error" and "TLS certificate did not verify" in check["message"], check
    assert not any(c["status"] == "failed" for c in summary["checks"])
