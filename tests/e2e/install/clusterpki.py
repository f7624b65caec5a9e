"""Certificates and kubeconfigs of the single-node test cluster: one CA, one key pair per component.

Each component authenticates as Kubernetes expects (the kubelet as system:node:<name> in system:nodes, so the
Node authorizer and NodeRestriction apply to it; the controller manager, scheduler and kube-proxy as the users
their bootstrap RBAC bindings name), so that the install under test meets real RBAC, not AlwaysAllow.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_PEM = serialization.Encoding.PEM


def _key_pem(key) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


class ClusterPKI:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc)
        self._not_before, self._not_after = now - dt.timedelta(minutes=5), now + dt.timedelta(days=2)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aiadmit-cluster-ca")])
        self._ca_name = name
        self._ca = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_cert = self.dir / "ca.crt"
        self.ca_key = self.dir / "ca.key"
        self.ca_cert.write_bytes(self._ca.public_bytes(_PEM))
        self.ca_key.write_bytes(_key_pem(self._ca_key))
        # The service-account token signing pair (API server signs, everyone verifies).
        sa = ec.generate_private_key(ec.SECP256R1())
        self.sa_key, self.sa_pub = self.dir / "sa.key", self.dir / "sa.pub"
        self.sa_key.write_bytes(_key_pem(sa))
        self.sa_pub.write_bytes(sa.public_key().public_bytes(_PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def issue(self, name: str, common_name: str, organizations=(), dns=(), ips=(), server=False,
              client=True) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self._ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before).not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        crt, k = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        crt.write_bytes(cert.public_bytes(_PEM))
        k.write_bytes(_key_pem(key))
        return crt, k

    def kubeconfig(self, name: str, server: str, common_name: str, organizations=()) -> Path:
        crt, key = self.issue(name, common_name, organizations)
        path = self.dir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": str(self.ca_cert)}}],
            "users": [{"name": "u", "user": {"client-certificate": str(crt), "client-key": str(key)}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }))
        return path
