"""The TLS context every outbound client shares (infercost/net/tls.py): made once, verifying,
trusting certifi's bundle and the system's store, which SSL_CERT_FILE replaces."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import certifi
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from infercost.net.tls import tls_context


def test_one_verifying_context_with_certifis_roots() -> None:
    context = tls_context()
    assert tls_context() is context
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    roots = Path(certifi.where()).read_text().count("BEGIN CERTIFICATE")
    assert len(context.get_ca_certs()) >= roots > 100


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _private_ca(tmp: Path) -> tuple[Path, Path, Path]:
    """A private CA (ca.pem) and a certificate it signed for 127.0.0.1 (cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("infercost test CA"))
        .issuer_name(_name("infercost test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https server on loopback whose certificate a private CA signed: (URL, ca.pem)."""
    ca, cert, key = _private_ca(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/", ca
    finally:
        server.shutdown()
        server.server_close()


FETCH = (
    "import sys, httpx; from infercost.net.tls import tls_context\n"
    "try:\n"
    "    print(httpx.get(sys.argv[1], verify=tls_context()).text)\n"
    "except httpx.ConnectError as exc:\n"
    "    print('refused:', exc)\n"
)


def _fetch(url: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", FETCH, url],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_private_ca_is_trusted_through_ssl_cert_file_and_unknown_ones_are_not(
    https_server: tuple[str, Path],
) -> None:
    url, ca = https_server
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # Neither the system's store nor certifi knows the test CA.
    refused = _fetch(url, {**base, "SSL_CERT_FILE": "/nonexistent.pem"})
    assert refused.startswith("refused:") and "CERTIFICATE_VERIFY_FAILED" in refused
    # The operator names its CA, as for any OpenSSL client.
    assert _fetch(url, {**base, "SSL_CERT_FILE": str(ca)}) == "ok"
