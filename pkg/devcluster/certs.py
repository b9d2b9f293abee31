"""Certificates for a throwaway control plane and its nodes.

One CA signs the apiserver's serving certificate, an admin client certificate in
``system:masters`` and, per real node, the kubelet's client certificate (``system:node:<name>`` in
``system:nodes``, so the Node authorizer and NodeRestriction treat it as that node) and its serving
certificate (the apiserver checks it when it proxies logs). A separate RSA key pair signs
service-account tokens. Keys are small-but-safe (RSA 2048, one-day validity): the cluster lives
for one test session.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class CertPaths:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: x509.Name, issuer: x509.Name, public_key: rsa.RSAPublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


def generate(directory: Path) -> CertPaths:
    """Writes every key and certificate the control plane needs into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(
        *(
            directory / name
            for name in (
                "ca.crt",
                "ca.key",
                "apiserver.crt",
                "apiserver.key",
                "admin.crt",
                "admin.key",
                "sa.key",
                "sa.pub",
            )
        )
    )
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-control-plane-dev-ca")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(paths.ca_key, ca_key)
    _write_cert(paths.ca_cert, ca_cert)

    serving_key = _key()
    sans: list[x509.GeneralName] = [
        x509.DNSName(name)
        for name in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "10.0.0.1")]
    serving = (
        _builder(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
            ca_name,
            serving_key.public_key(),
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(paths.serving_key, serving_key)
    _write_cert(paths.serving_cert, serving)

    admin_key = _key()
    admin_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    admin = (
        _builder(admin_name, ca_name, admin_key.public_key())
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(paths.admin_key, admin_key)
    _write_cert(paths.admin_cert, admin)

    sa_key = _key()
    _write_key(paths.sa_key, sa_key)
    paths.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return paths


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _load_ca(pki: CertPaths) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return cert, key


def issue(
    pki: CertPaths,
    directory: Path,
    name: str,
    *,
    common_name: str,
    organizations: tuple[str, ...] = (),
    client: bool = False,
    server_ips: tuple[str, ...] = (),
    server_names: tuple[str, ...] = (),
) -> KeyPair:
    """A key and a certificate signed by the cluster CA, for a client, a server or both."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _load_ca(pki)
    key = _key()
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    builder = _builder(subject, ca_cert.subject, key.public_key())
    if server_ips or server_names:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        sans: list[x509.GeneralName] = [x509.DNSName(dns) for dns in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(ca_key, hashes.SHA256())
    pair = KeyPair(cert=directory / f"{name}.crt", key=directory / f"{name}.key")
    _write_key(pair.key, key)
    _write_cert(pair.cert, cert)
    return pair
