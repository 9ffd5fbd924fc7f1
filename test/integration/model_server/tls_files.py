"""A self-signed server certificate for ``--ssl_config_file`` tests (``cryptography``)."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOST_NAME = "model-server.test"


@dataclasses.dataclass(frozen=True)
class ServerCertificate:
    key: str  # PEM
    certificate: str  # PEM, also the CA a client trusts (self-signed)


def make_server_certificate(directory: Path) -> ServerCertificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST_NAME)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(HOST_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = ServerCertificate(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
        certificate.public_bytes(serialization.Encoding.PEM).decode(),
    )
    (directory / "server.pem").write_text(files.certificate)
    return files


def escape(pem: str) -> str:
    """PEM text as the inside of a text-format string literal."""
    return pem.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
