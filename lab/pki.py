"""A throwaway certificate authority for a lab component: serving and client certificates on loopback.

The lab's Kubernetes control plane runs with TLS everywhere and client-certificate authentication,
as kubeadm sets it up: one CA signs the API server's and etcd's serving certificates and one client
certificate per component (the user is the subject's CN, the groups its O entries).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import Any

VALID_DAYS = 30


def alternative_names(hosts: tuple[str, ...]) -> Any:
    """The subjectAltName extension of a serving certificate for ``hosts``: addresses as IP entries, the rest
    as DNS names."""
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def write_private(path: Path, data: bytes) -> Path:
    """A file only the owner can read: keys and kubeconfigs hold credentials."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


class Authority:
    """A CA kept in ``folder`` (ca.crt, ca.key) that issues certificates into the same folder."""

    def __init__(self, folder: Path, name: str = "gpuready-lab-ca (simulated)") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_path = folder / "ca.crt"
        self.ca_path.write_bytes(self._pem(self.cert))

    @staticmethod
    def _pem(cert: Any) -> bytes:
        from cryptography.hazmat.primitives import serialization

        pem: bytes = cert.public_bytes(serialization.Encoding.PEM)
        return pem

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        groups: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (0600); return their paths."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = dt.datetime.now(dt.timezone.utc)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [
                *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )
        usages = [
            *([ExtendedKeyUsageOID.SERVER_AUTH] if server else []),
            *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []),
        ]
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server:
            builder = builder.add_extension(alternative_names(hosts), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path = self.folder / f"{stem}.crt"
        cert_path.write_bytes(self._pem(cert))
        key_path = write_private(
            self.folder / f"{stem}.key",
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )
        return cert_path, key_path


def signing_key(folder: Path, stem: str = "sa") -> tuple[Path, Path]:
    """An RSA key pair for service-account tokens (``<stem>.key`` 0600, ``<stem>.pub``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = write_private(
        folder / f"{stem}.key",
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        ),
    )
    public = folder / f"{stem}.pub"
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public
