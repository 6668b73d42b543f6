"""A TLS certificate that does not verify is "could not reach" (exit 3), never a finding about the machines."""

from __future__ import annotations

import datetime as dt
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
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path / "server.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
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
