"""Kubernetes' CEL `url` library (k8s.io/apiserver pkg/cel/library urls.go): Go's net/url rules, natively.

Why not urllib.parse: Kubernetes accepts what Go's `url.ParseRequestURI` accepts (an absolute URL or an absolute
path; `https://a:b:c/` and `../x` are refused) and answers `getHost`, `getEscapedPath`, `getQuery` as Go's
`url.URL` does (`getQuery` drops pairs with a `;` or a bad escape; the path is re-escaped Go's way). urllib.parse
accepts nearly anything and escapes differently, so the few rules that matter are written here after Go's
documented behaviour. One pass over the text per operation: linear time.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from webhook.cel.runtime import EvalError, expecting, overload
from webhook.model.lazyre import Lazy

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_USERINFO = _ALNUM | frozenset("-._:~!$&'()*+,;=%@")
_CONTROL = Lazy("[\x00-\x1f\x7f]")
# Go's host characters: these ASCII ones and everything from U+0080 on. Written as the class of the other ASCII
# characters: the same matches (tests/test_k8s_cel_library.py checks every code point), and compiled in 0.1 ms where
# a negated class reaching U+10FFFF took 5 ms at every start-up (issue 25).
_HOST_ASCII = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$&'()*+,;=:[]<>\"-_.~%")
_NOT_HOST = Lazy("[" + "".join(re.escape(chr(code)) for code in range(128)
                                     if chr(code) not in _HOST_ASCII) + "]")
_NOT_ENCODED = Lazy("[^A-Za-z0-9\\-_.~$&+,/:;=@!'()*\\[\\]%]")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class URL:
    """A CEL `kubernetes.URL`: the parts of Go's url.URL the library reads."""

    __slots__ = ("text", "scheme", "host", "path", "raw_path", "query", "opaque")
    cel_type = "kubernetes.URL"

    def __init__(self, text: str, scheme: str, host: str, path: str, raw_path: str, query: str, opaque: str):
        self.text, self.scheme, self.host, self.path = text, scheme, host, path
        self.raw_path, self.query, self.opaque = raw_path, query, opaque

    def __eq__(self, other: object) -> bool:
        return type(other) is URL and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"url({self.text!r})"


def _unescape(text: str, host: bool) -> str:
    """Go's unescape in path or host mode: every `%` must start two hex digits; a host allows only its own set."""
    at = text.find("%")
    while at != -1:
        if at + 2 >= len(text) or text[at + 1] not in _HEX or text[at + 2] not in _HEX:
            raise ValueError(f"invalid URL escape {_quote(text[at:at + 3])}")
        if host and int(text[at + 1], 16) < 8 and text[at:at + 3] != "%25":
            raise ValueError(f"invalid URL escape {_quote(text[at:at + 3])}")
        at = text.find("%", at + 3)
    bad = _NOT_HOST.search(text) if host else None
    if bad is not None:
        raise ValueError(f"invalid character {_quote(bad.group(0))} in host name")
    return unquote_to_bytes(text).decode("utf-8", "surrogateescape") if "%" in text else text


def _escape_path(path: str) -> str:
    """Go's escape in path mode: all but the unreserved characters and `$&+,/:;=@`, as %XX of the UTF-8 bytes."""
    return quote(path, safe="$&+,/:;=@", errors="surrogateescape")


def _valid_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= c <= "9" for c in port[1:]))


def _parse_host(host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise ValueError("missing ']' in host")
        if not _valid_port(host[close + 1:]):
            raise ValueError(f"invalid port {_quote(host[close + 1:])} after host")
    else:
        colon = host.rfind(":")
        if colon != -1 and not _valid_port(host[colon:]):
            raise ValueError(f"invalid port {_quote(host[colon:])} after host")
    return _unescape(host, True)


def _parse(raw: str, request: bool) -> URL:
    """Go's url.parse (after the fragment is cut off, for url.Parse); ValueError with Go's reason."""
    text = raw
    if _CONTROL.search(raw):
        raise ValueError("net/url: invalid control character in URL")
    if raw == "" and request:
        raise ValueError("empty url")
    if raw == "*":
        return URL(text, "", "", "*", "", "", "")
    scheme, rest = "", raw
    for position, char in enumerate(raw):
        if char in _ALNUM and not char.isdigit():
            continue
        if char.isdigit() or char in "+-.":
            if position == 0:
                break
            continue
        if char == ":":
            if position == 0:
                raise ValueError("missing protocol scheme")
            scheme, rest = raw[:position].lower(), raw[position + 1:]
        break
    query = ""
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    elif "?" in rest:
        rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return URL(text, scheme, "", "", "", query, rest)
        if request:
            raise ValueError("invalid URI for request")
        if ":" in rest.partition("/")[0]:
            raise ValueError("first path segment in URL cannot contain colon")
    host = ""
    if (scheme or (not request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, remainder = rest[2:].partition("/")
        rest = slash + remainder
        at = authority.rfind("@")
        if at >= 0 and not all(c in _USERINFO or c >= "\x80" for c in authority[:at]):
            raise ValueError("net/url: invalid userinfo")
        host = _parse_host(authority[at + 1:])
    path = _unescape(rest, False)
    raw_path = "" if _escape_path(path) == rest else rest
    return URL(text, scheme, host, path, raw_path, query, "")


def _error(raw: str, reason: Exception) -> EvalError:
    return EvalError(f"URL parse error during conversion from string: parse {_quote(raw)}: {reason}")


def url(value: Any) -> URL:
    if type(value) is not str:
        raise overload("url", value)
    try:
        _parse(value, True)
        return _parse(value.partition("#")[0], False)
    except ValueError as exc:
        raise _error(value, exc) from None


def is_url(value: Any) -> bool:
    if type(value) is not str:
        raise overload("isURL", value)
    try:
        _parse(value, True)
    except ValueError:
        return False
    return True


_url = expecting(URL)


def _split_host(host: str) -> tuple[str, str]:
    colon = host.rfind(":")
    name, port = host, ""
    if colon != -1 and _valid_port(host[colon:]):
        name, port = host[:colon], host[colon + 1:]
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, port


def get_scheme(value: Any) -> str:
    return _url(value, "getScheme").scheme


def get_host(value: Any) -> str:
    return _url(value, "getHost").host


def get_hostname(value: Any) -> str:
    return _split_host(_url(value, "getHostname").host)[0]


def get_port(value: Any) -> str:
    return _split_host(_url(value, "getPort").host)[1]


def get_escaped_path(value: Any) -> str:
    parsed = _url(value, "getEscapedPath")
    raw = parsed.raw_path
    if raw and not _NOT_ENCODED.search(raw):
        try:
            if _unescape(raw, False) == parsed.path:
                return raw
        except ValueError:
            pass
    if parsed.path == "*":
        return "*"
    return _escape_path(parsed.path)


def _query_part(text: str) -> str:
    return _unescape(text.replace("+", " "), False)


def get_query(value: Any) -> dict:
    """Go's url.ParseQuery, errors dropped: `k=v` pairs split on `&`; a pair with `;` or a bad escape is left out."""
    out: dict = {}
    for pair in _url(value, "getQuery").query.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, item = pair.partition("=")
        try:
            key, item = _query_part(key), _query_part(item)
        except ValueError:
            continue
        out.setdefault(key, []).append(item)
    return out
