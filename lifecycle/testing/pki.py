"""Certificates and keys for the real API server of the envtest tier.

:func:`issue` writes into a directory what a kube-apiserver on loopback needs,
as envtest prepares it: a certificate authority, a serving certificate for
``127.0.0.1``/``localhost`` and the in-cluster service names, a client
certificate for an administrator (group ``system:masters``) and the RSA key
pair that signs and verifies ServiceAccount tokens. Everything is made with
the ``cryptography`` package (the ``envtest`` extra); nothing is fetched.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import attrs

__all__ = ["Credentials", "issue"]

#: How long the certificates stay valid.
VALIDITY = datetime.timedelta(days=365)


@attrs.frozen
class Credentials:
    """The files :func:`issue` wrote (PEM), by purpose."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public: Path

    @classmethod
    def under(cls, directory: Path) -> Credentials:
        """The file names :func:`issue` uses in ``directory``."""
        return cls(*(directory / name for name in (
            "ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key",
            "sa.key", "sa.pub")))

    def complete(self) -> bool:
        """Whether every file exists (a directory prepared before is reused)."""
        return all(Path(p).is_file() for p in attrs.astuple(self))


def issue(directory: Path) -> Credentials:
    """Write a CA, serving and admin certificates and the ServiceAccount key pair.

    Files already complete in ``directory`` are kept (so a restarted server
    keeps its identity and the tokens it minted stay valid).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.asymmetric.types import (
        CertificateIssuerPrivateKeyTypes,
        CertificatePublicKeyTypes,
        PrivateKeyTypes,
    )
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    files = Credentials.under(directory)
    if files.complete():
        return files
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(common: str, org: str | None = None) -> x509.Name:
        parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
        if org:
            parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(parts)

    def certificate(subject: x509.Name, public: CertificatePublicKeyTypes, issuer: x509.Name,
                    signer: CertificateIssuerPrivateKeyTypes, *, ca: bool = False,
                    usage: list[x509.ObjectIdentifier] | None = None,
                    sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(public).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        if usage:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(signer, hashes.SHA256())

    def write_key(path: Path, private: PrivateKeyTypes) -> None:
        path.write_bytes(private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        path.chmod(0o600)

    def write_cert(path: Path, cert: x509.Certificate) -> None:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    ca_key = key()
    ca_name = name("lifecycle-envtest-ca")
    write_key(files.ca_key, ca_key)
    write_cert(files.ca_cert, certificate(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True))

    serving_key = key()
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local"]
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1", "10.0.0.1")]
    write_key(files.serving_key, serving_key)
    write_cert(files.serving_cert, certificate(
        name("kube-apiserver"), serving_key.public_key(), ca_name, ca_key,
        usage=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans))

    admin_key = key()
    write_key(files.admin_key, admin_key)
    write_cert(files.admin_cert, certificate(
        name("lifecycle-admin", "system:masters"), admin_key.public_key(), ca_name, ca_key,
        usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))

    signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_key(files.service_account_key, signing)
    files.service_account_public.write_bytes(signing.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return files
