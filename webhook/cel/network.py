"""Kubernetes' CEL `ip` and `cidr` libraries (k8s.io/apiserver pkg/cel/library ip.go, cidr.go), natively.

Why: a policy on Services, NetworkPolicies or webhooks checks addresses; a ValidatingAdmissionPolicy does it with
`ip(...)`, `cidr(...).containsIP(...)`, and aiadmit must answer exactly as Kubernetes does. Text is parsed by Go's
netip rules, step for step (`_go_parse`), so that what is accepted and every error message are Kubernetes' (Python's
`ipaddress` accepts other forms); then Kubernetes' refusals: a zone (`fe80::1%en0`) and an IPv4-mapped IPv6
address (`::ffff:1.2.3.4`). The value is an `ipaddress` address, which prints as Go does (RFC 5952). A CIDR keeps
its address as written (`cidr('10.0.0.1/8').ip()` is 10.0.0.1); `masked()` clears the host bits. The predicates
follow Go's definitions (`isGlobalUnicast` is true for private addresses; `isLinkLocalMulticast` is ffX2::/16 for
any flags), not Python's `is_global`. Every operation is linear in its input's length.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Union

from webhook.cel.runtime import EvalError, expecting

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_V4_LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
_V4_LINK_LOCAL_MULTICAST = ipaddress.ip_network("224.0.0.0/24")
_V6_LINK_LOCAL = ipaddress.ip_network("fe80::/10")


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
    try:
        address, zone = _go_parse(raw)
    except ValueError as exc:
        raise ValueError(f"IP Address {_go_quote(raw)} parse error during conversion from string: {exc}") from None
    if zone:
        raise ValueError(f"IP address {_go_quote(raw)} with zone value is not allowed")
    if address.version == 6 and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_go_quote(raw)} is not allowed")
    return address


def _fail(raw: str, message: str, at: str = "") -> ValueError:
    return ValueError(f"ParseAddr({_go_quote(raw)}): {message}" + (f" (at {_go_quote(at)})" if at else ""))


def _go_parse(raw: str) -> tuple:
    """Go's netip.ParseAddr, step for step (its acceptance and its messages): (address, zone)."""
    for char in raw:
        if char == ".":
            return ipaddress.IPv4Address(bytes(_ipv4_fields(raw, raw))), ""
        if char == ":":
            return _ipv6(raw)
        if char == "%":
            raise _fail(raw, "missing IPv6 address")
    raise _fail(raw, "unable to parse IP")


def _ipv4_fields(raw: str, text: str) -> list:
    fields, value, digits = [], 0, 0
    for position, char in enumerate(text):
        if "0" <= char <= "9":
            if digits == 1 and value == 0:
                raise _fail(raw, "IPv4 field has octet with leading zero")
            value, digits = value * 10 + ord(char) - 48, digits + 1
            if value > 255:
                raise _fail(raw, "IPv4 field has value >255")
        elif char == ".":
            if position == 0 or position == len(text) - 1 or text[position - 1] == ".":
                raise _fail(raw, "IPv4 field must have at least one digit", text[position:])
            if len(fields) == 3:
                raise _fail(raw, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _fail(raw, "unexpected character", text[position:])
    if len(fields) < 3:
        raise _fail(raw, "IPv4 address too short")
    return fields + [value]


def _ipv6(raw: str) -> tuple:
    text, zone = raw, ""
    if "%" in raw:
        text, _, zone = raw.partition("%")
        if not zone:
            raise _fail(raw, "zone must be a non-empty string")
    out, ellipsis = [], -1  # bytes so far; where `::` stands (a byte index)
    if text.startswith("::"):
        ellipsis, text = 0, text[2:]
        if not text:
            return ipaddress.IPv6Address(0), zone
    while len(out) < 16:
        digits = 0
        while digits < len(text) and text[digits] in "0123456789abcdefABCDEF":
            if digits > 3:
                raise _fail(raw, "each group must have 4 or less digits", text)
            digits += 1
        if digits == 0:
            raise _fail(raw, "each colon-separated field must have at least one digit", text)
        if digits < len(text) and text[digits] == ".":
            if ellipsis < 0 and len(out) != 12:
                raise _fail(raw, "embedded IPv4 address must replace the final 2 fields of the address", text)
            if len(out) + 4 > 16:
                raise _fail(raw, "too many hex fields to fit an embedded IPv4 at the end of the address", text)
            out += _ipv4_fields(raw, text)
            text = ""
            break
        value = int(text[:digits], 16)
        out += [value >> 8, value & 0xFF]
        text = text[digits:]
        if not text:
            break
        if text[0] != ":":
            raise _fail(raw, "unexpected character, want colon", text)
        if len(text) == 1:
            raise _fail(raw, "colon must be followed by more characters", text)
        text = text[1:]
        if text[0] == ":":
            if ellipsis >= 0:
                raise _fail(raw, "multiple :: in address", text)
            ellipsis, text = len(out), text[1:]
            if not text:
                break
    if text:
        raise _fail(raw, "trailing garbage after address", text)
    if len(out) < 16:
        if ellipsis < 0:
            raise _fail(raw, "address string too short")
        out = out[:ellipsis] + [0] * (16 - len(out)) + out[ellipsis:]
    elif ellipsis >= 0:
        raise _fail(raw, "the :: must expand to at least one field of zeros")
    return ipaddress.IPv6Address(bytes(out)), zone


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_str = expecting(str)


_ip = expecting(IP)


_cidr = expecting(CIDR)


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
    """Go's definition: 224.0.0.0/24, and IPv6 ffX2::/16 whatever the flags X."""
    address = _ip(value, "isLinkLocalMulticast").address
    if address.version == 4:
        return address in _V4_LINK_LOCAL_MULTICAST
    return (int(address) >> 112) & 0xFF0F == 0xFF02


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
    where = f"network address parse error during conversion from string: netip.ParsePrefix({_go_quote(raw)}): "
    text, slash, bits_text = raw.rpartition("/")
    if not slash:
        raise ValueError(f"{where}no '/'")
    try:
        address, zone = _go_parse(text)
    except ValueError as exc:
        raise ValueError(f"{where}{exc}") from None
    if zone:
        raise ValueError(f"{where}IPv6 zones cannot be present in a prefix")
    bad = f"{where}bad bits after slash: {_go_quote(bits_text)}"
    if (len(bits_text) > 1 and not "1" <= bits_text[0] <= "9") or not bits_text.lstrip("+-").isdigit() or \
            not bits_text.isascii() or len(bits_text) > 19:
        raise ValueError(bad)
    bits = int(bits_text)
    if not 0 <= bits <= address.max_prefixlen:
        raise ValueError(f"{where}prefix length out of range")
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
    if type(other) is str:
        try:
            other = IP(_parse_address(other))
        except ValueError:
            raise EvalError("no such overload") from None  # what Kubernetes answers for a string that is no IP
    address = _ip(other, "containsIP").address
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
