"""Kubernetes' CEL `ip` and `cidr` libraries (k8s.io/apiserver pkg/cel/library ip.go, cidr.go), natively.

Why: a policy on Services, NetworkPolicies or webhooks checks addresses; a ValidatingAdmissionPolicy does it with
`ip(...)`, `cidr(...).containsIP(...)`, and aiadmit must answer exactly as Kubernetes does. Parsing is Python's
`ipaddress`, with Go's `netip` rules on top where they differ: a zone (`fe80::1%en0`) and an IPv4-mapped IPv6
address (`::ffff:1.2.3.4`) are rejected, as Kubernetes does; leading zeros in IPv4 (`010.0.0.1`) are rejected by
both. A CIDR keeps its address as written (`cidr('10.0.0.1/8').ip()` is 10.0.0.1); `masked()` clears the host bits.
The predicates follow Go's definitions (`isGlobalUnicast` is true for private addresses, as in Go), not Python's
`is_global`. Every operation is linear in its input's length.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Union

from webhook.cel.runtime import EvalError, overload

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_V4_LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
_V4_LINK_LOCAL_MULTICAST = ipaddress.ip_network("224.0.0.0/24")
_V6_LINK_LOCAL = ipaddress.ip_network("fe80::/10")
_V6_LINK_LOCAL_MULTICAST = ipaddress.ip_network("ff02::/16")
_MAX_TEXT = 64  # longer than any address Go's netip parses ("ffff:...:255.255.255.255%zone" aside): rejected early


class IP:
    """A CEL `net.IP`: one IPv4 or IPv6 address."""

    __slots__ = ("address",)
    cel_type = "net.IP"

    def __init__(self, address: Address):
        self.address = address

    def __eq__(self, other: object) -> bool:
        return type(other) is IP and other.address == self.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __repr__(self) -> str:
        return f"ip({str(self.address)!r})"

    def cel_string(self) -> str:
        return str(self.address)


class CIDR:
    """A CEL `net.CIDR`: an address (as written, host bits kept) and a prefix length."""

    __slots__ = ("address", "bits")
    cel_type = "net.CIDR"

    def __init__(self, address: Address, bits: int):
        self.address, self.bits = address, bits

    def __eq__(self, other: object) -> bool:
        return type(other) is CIDR and other.address == self.address and other.bits == self.bits

    def __hash__(self) -> int:
        return hash((self.address, self.bits))

    def __repr__(self) -> str:
        return f"cidr({self.cel_string()!r})"

    def cel_string(self) -> str:
        return f"{self.address}/{self.bits}"

    def network(self) -> Any:
        return ipaddress.ip_network((self.address, self.bits), strict=False)


def _parse_address(raw: str) -> Address:
    """Go's netip.ParseAddr, then Kubernetes' refusals; ValueError with Kubernetes' wording."""
    prefix = f"IP Address {_go_quote(raw)} parse error during conversion from string: ParseAddr({_go_quote(raw)})"
    if len(raw) > _MAX_TEXT:
        raise ValueError(f"{prefix}: unable to parse IP")
    if "%" in raw:
        body, _, zone = raw.partition("%")
        if ":" not in body:
            raise ValueError(f"{prefix}: unexpected character")
        if not zone:
            raise ValueError(f"{prefix}: zone must be a non-empty string")
        _address(body, prefix)
        raise ValueError(f"IP address {_go_quote(raw)} with zone value is not allowed")
    address = _address(raw, prefix)
    if address.version == 6 and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_go_quote(raw)} is not allowed")
    return address


def _address(raw: str, prefix: str) -> Address:
    if not raw:
        raise ValueError(f"{prefix}: unable to parse IP")
    if not all(c in "0123456789abcdefABCDEF.:" for c in raw):
        raise ValueError(f"{prefix}: unexpected character")
    try:
        if ":" in raw:
            return ipaddress.IPv6Address(raw)
        if raw.count(".") > 3:
            raise ValueError("IPv4 address too long")
        if raw.count(".") < 3:
            raise ValueError("IPv4 address too short")
        return ipaddress.IPv4Address(raw)
    except ValueError as exc:
        reason = str(exc)
        if "leading zero" in reason.lower() or "leading zeros" in reason.lower():
            reason = "IPv4 field has octet with leading zero"
        elif "too long" not in reason and "too short" not in reason:
            reason = reason.replace("'", '"')
        raise ValueError(f"{prefix}: {reason}") from None


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _str(value: Any, name: str) -> str:
    if type(value) is str:
        return value
    raise overload(name, value)


def _ip(value: Any, name: str) -> IP:
    if type(value) is IP:
        return value
    raise overload(name, value)


def _cidr(value: Any, name: str) -> CIDR:
    if type(value) is CIDR:
        return value
    raise overload(name, value)


def ip(value: Any) -> IP:
    """`ip(string)`, and `cidr.ip()`: the CIDR's address."""
    if type(value) is CIDR:
        return IP(value.address)
    try:
        return IP(_parse_address(_str(value, "ip")))
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def is_ip(value: Any) -> bool:
    try:
        _parse_address(_str(value, "isIP"))
    except ValueError:
        return False
    return True


def is_canonical(value: Any) -> bool:
    text = _str(value, "ip.isCanonical")
    try:
        return str(_parse_address(text)) == text
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def family(value: Any) -> int:
    return _ip(value, "family").address.version


def is_unspecified(value: Any) -> bool:
    return _ip(value, "isUnspecified").address.is_unspecified


def is_loopback(value: Any) -> bool:
    return _ip(value, "isLoopback").address.is_loopback


def is_link_local_multicast(value: Any) -> bool:
    address = _ip(value, "isLinkLocalMulticast").address
    return address in (_V4_LINK_LOCAL_MULTICAST if address.version == 4 else _V6_LINK_LOCAL_MULTICAST)


def is_link_local_unicast(value: Any) -> bool:
    address = _ip(value, "isLinkLocalUnicast").address
    return address in (_V4_LINK_LOCAL if address.version == 4 else _V6_LINK_LOCAL)


def is_global_unicast(value: Any) -> bool:
    """Go's definition: not unspecified, the IPv4 broadcast, loopback, multicast or link-local unicast."""
    address = _ip(value, "isGlobalUnicast").address
    return not (address.is_unspecified or address == _BROADCAST or address.is_loopback or address.is_multicast
                or is_link_local_unicast(value))


def _parse_cidr(raw: str) -> CIDR:
    """Go's netip.ParsePrefix, then Kubernetes' refusal of IPv4-mapped addresses; ValueError with its wording."""
    where = f"netip.ParsePrefix({_go_quote(raw)})"
    outer = "network address parse error during conversion from string: "
    if len(raw) > _MAX_TEXT + 4:
        raise ValueError(f"{outer}{where}: no '/'")
    text, slash, bits_text = raw.rpartition("/")
    if not slash:
        raise ValueError(f"{outer}{where}: no '/'")
    if "%" in text:
        raise ValueError(f"{outer}{where}: IPv6 zones cannot be present in a prefix")
    try:
        address = _address(text, f"ParseAddr({_go_quote(text)})")
    except ValueError as exc:
        raise ValueError(f"{outer}{where}: {exc}") from None
    if not bits_text.isdigit() or not bits_text.isascii() or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise ValueError(f"{outer}{where}: bad bits after slash: {_go_quote(bits_text)}")
    bits = int(bits_text)
    if bits > address.max_prefixlen:
        raise ValueError(f"{outer}{where}: prefix length out of range")
    if address.version == 6 and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_go_quote(raw)} is not allowed")
    return CIDR(address, bits)


def cidr(value: Any) -> CIDR:
    try:
        return _parse_cidr(_str(value, "cidr"))
    except ValueError as exc:
        raise EvalError(f"network address parse error during conversion from string: {exc}") from None


def is_cidr(value: Any) -> bool:
    try:
        _parse_cidr(_str(value, "isCIDR"))
    except ValueError:
        return False
    return True


def contains_ip(value: Any, other: Any) -> bool:
    network = _cidr(value, "containsIP")
    address = (ip(other) if type(other) is str else _ip(other, "containsIP")).address
    return address.version == network.address.version and address in network.network()


def contains_cidr(value: Any, other: Any) -> bool:
    network = _cidr(value, "containsCIDR")
    inner = cidr(other) if type(other) is str else _cidr(other, "containsCIDR")
    if inner.address.version != network.address.version or network.bits > inner.bits:
        return False
    return inner.network().subnet_of(network.network())


def prefix_length(value: Any) -> int:
    return _cidr(value, "prefixLength").bits


def masked(value: Any) -> CIDR:
    network = _cidr(value, "masked")
    return CIDR(network.network().network_address, network.bits)
