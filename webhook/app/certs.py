"""TLS material for the webhook: a private CA and the serving pair it signs.

The API server calls the webhook over TLS and trusts exactly the CA placed in
the webhook configuration's `caBundle`; the serving certificate must carry
every DNS name the API server dials (`<service>.<namespace>.svc`, and the
shorter and longer forms some clients use). Keys are ECDSA P-256: small, fast
to handshake, and accepted by Go's TLS stack (the API server's client) and by
OpenSSL. The CA lives 5 years, the serving pair 1 year (`rotate` renews it from
the same CA without touching the `caBundle` of the cluster).

Files written in `--out DIR`: `ca.crt`, `ca.key` (kept so that `rotate` can
sign again; keep it out of the cluster), `tls.crt`, `tls.key`. Every file is
written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from typing import Iterable, Optional

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.outputs.atomicfile import write_atomic

CA_DAYS = 5 * 365
SERVING_DAYS = 365
RENEW_BEFORE_DAYS = 30  # `--dev` regenerates a serving pair that expires sooner than this
FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key")


class CertError(Exception):
    """TLS material that cannot be read or used, with the file concerned."""


@dataclass
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def service_names(service: Optional[str], namespace: Optional[str]) -> list[str]:
    """The DNS names a client inside the cluster may use for `service` in `namespace`."""
    if not service:
        return []
    namespace = namespace or "default"
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def new_ca(common_name: str = "aiadmit webhook CA", days: int = CA_DAYS) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))  # tolerate small clock skew
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return Pair(cert, key)


def _san(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    seen = set()
    for host in hosts:
        host = host.strip()
        if not host or host in seen:
            continue
        seen.add(host)
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def new_serving(ca: Pair, hosts: list[str], days: int = SERVING_DAYS) -> Pair:
    """A serving pair for `hosts` (DNS names or IP addresses), signed by `ca`."""
    sans = _san(hosts)
    if not sans:
        raise CertError("a serving certificate needs at least one host (--service or --host)")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    first = hosts[0].strip()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first[:64])]))
            .issuer_name(ca.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(min(now + dt.timedelta(days=days), ca.cert.not_valid_after_utc))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                           critical=False)
            .sign(ca.key, hashes.SHA256()))
    return Pair(cert, key)


def new_client(ca: Pair, common_name: str, days: int = SERVING_DAYS) -> Pair:
    """A client pair (TLS client authentication) named `common_name`, signed by `ca`: what the API server presents
    to the webhook when its admission kubeconfig names it (docs/operations.md, "Authenticating the API server")."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])]))
            .issuer_name(ca.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(min(now + dt.timedelta(days=days), ca.cert.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                           critical=False)
            .sign(ca.key, hashes.SHA256()))
    return Pair(cert, key)


# ---------------------------------------------------------------------- files
def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def write_pair(pair: Pair, cert_path: str, key_path: str) -> None:
    """Key first, then certificate: a reloading server that sees a new cert finds its key already there."""
    write_atomic(key_path, key_pem(pair.key), 0o600)
    write_atomic(cert_path, cert_pem(pair.cert), 0o644)


def read_pair(cert_path: str, key_path: str) -> Pair:
    try:
        with open(cert_path, "rb") as handle:
            cert = x509.load_pem_x509_certificate(handle.read())
    except (OSError, ValueError) as exc:
        raise CertError(f"{cert_path}: not a readable PEM certificate: {exc}") from None
    try:
        with open(key_path, "rb") as handle:
            key = serialization.load_pem_private_key(handle.read(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise CertError(f"{key_path}: not a readable unencrypted PEM private key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) and not hasattr(key, "public_key"):
        raise CertError(f"{key_path}: unsupported key type")
    if key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) \
            != cert.public_key().public_bytes(serialization.Encoding.DER,
                                              serialization.PublicFormat.SubjectPublicKeyInfo):
        raise CertError(f"{key_path}: key does not match the certificate {cert_path}")
    return Pair(cert, key)


def hosts_of(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in san.get_values_for_type(x509.DNSName)] + \
           [str(n) for n in san.get_values_for_type(x509.IPAddress)]


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def generate(out: str, hosts: list[str]) -> dict[str, str]:
    """A new CA and serving pair for `hosts` in `out`; returns the paths written."""
    os.makedirs(out, exist_ok=True)
    ca = new_ca()
    serving = new_serving(ca, hosts)
    paths = {name: os.path.join(out, name) for name in FILES}
    write_pair(ca, paths["ca.crt"], paths["ca.key"])
    write_pair(serving, paths["tls.crt"], paths["tls.key"])
    return paths


CLIENT_FILES = ("client-ca.crt", "client-ca.key", "client.crt", "client.key")


def generate_client(out: str, name: str = "kube-apiserver") -> dict[str, str]:
    """A CA of its own for the API server's webhook client certificate, and that certificate, in `out`.

    Its own CA, not the serving CA and not the cluster's: the webhook then accepts exactly the certificates this CA
    signs, and the cluster CA's many client certificates (every kubelet, every admin) are not among them."""
    os.makedirs(out, exist_ok=True)
    ca = new_ca("aiadmit webhook clients CA")
    paths = {file: os.path.join(out, file) for file in CLIENT_FILES}
    write_pair(ca, paths["client-ca.crt"], paths["client-ca.key"])
    write_pair(new_client(ca, name), paths["client.crt"], paths["client.key"])
    return paths


def rotate(out: str, hosts: Optional[list[str]] = None) -> dict[str, str]:
    """A new serving pair from the CA in `out`, for `hosts` or else the names of the current certificate."""
    paths = {name: os.path.join(out, name) for name in FILES}
    ca = read_pair(paths["ca.crt"], paths["ca.key"])
    if not hosts:
        try:
            with open(paths["tls.crt"], "rb") as handle:
                hosts = hosts_of(x509.load_pem_x509_certificate(handle.read()))
        except (OSError, ValueError) as exc:
            raise CertError(f"{paths['tls.crt']}: cannot read the current names ({exc}); "
                            f"give --service/--host") from None
    write_pair(new_serving(ca, hosts), paths["tls.crt"], paths["tls.key"])
    return paths


def usable(out: str, hosts: list[str], renew_before_days: int = RENEW_BEFORE_DAYS) -> Optional[str]:
    """None when `out` holds a CA and a serving pair it signed, valid for `hosts` well beyond today; else why not."""
    paths = {name: os.path.join(out, name) for name in FILES}
    try:
        ca = read_pair(paths["ca.crt"], paths["ca.key"])
        serving = read_pair(paths["tls.crt"], paths["tls.key"])
    except CertError as exc:
        return str(exc)
    if not signed_by(serving.cert, ca.cert):
        return f"{paths['tls.crt']} is not signed by {paths['ca.crt']}"
    limit = _now() + dt.timedelta(days=renew_before_days)
    for path, cert in ((paths["ca.crt"], ca.cert), (paths["tls.crt"], serving.cert)):
        if cert.not_valid_after_utc < limit or cert.not_valid_before_utc > _now():
            return f"{path} is not valid until {limit.date()}"
    missing = sorted(set(hosts) - set(hosts_of(serving.cert)))
    if missing:
        return f"{paths['tls.crt']} does not name {', '.join(missing)}"
    return None


def ca_bundle(ca_cert_path: str) -> str:
    """The base64 PEM the API server expects in `clientConfig.caBundle`."""
    with open(ca_cert_path, "rb") as handle:
        data = handle.read()
    try:
        x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertError(f"{ca_cert_path}: not a PEM certificate: {exc}") from None
    return base64.b64encode(data).decode("ascii")
