"""RFC 6901 JSON pointers: the one way every finding and patch names a field."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

_MISSING = object()


def escape(token: object) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def join(base: str, *tokens: object) -> str:
    """Append raw (unescaped) tokens to a pointer."""
    return base + "".join("/" + escape(t) for t in tokens)


def split(pointer: str) -> list[str]:
    return list(_split(pointer))


@lru_cache(maxsize=8192)
def _split(pointer: str) -> tuple[str, ...]:
    if not pointer:
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
    return tuple(unescape(t) for t in pointer[1:].split("/"))


def resolve(document: Any, pointer: str, default: Any = None) -> Any:
    """The value at `pointer`, or `default` when any step is missing or of the wrong type."""
    node = document
    for token in _split(pointer):
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return default
        if node is _MISSING:
            return default
    return node


@lru_cache(maxsize=8192)
def relative(base: str, rel: str) -> str:
    """Resolve a relative pointer such as ``template/spec`` or ``../../replicas`` against `base`."""
    tokens = split(base)
    for part in rel.split("/") if rel else []:
        if part == "..":
            tokens.pop()
        elif part not in ("", "."):
            tokens.append(unescape(part))
    return join("", *tokens)


def walk(document: Any, tokens: Iterable[str]) -> tuple[Any, int]:
    """The deepest node `tokens` reach in `document`, and how many of them it took to get there."""
    node, depth = document, 0
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            break
        depth += 1
    return node, depth


def deepest_existing(document: Any, pointer: str) -> str:
    """The longest prefix of `pointer` that exists in `document` (where a missing field's finding points)."""
    tokens = split(pointer)
    return join("", *tokens[:walk(document, tokens)[1]])


@lru_cache(maxsize=4096)  # reports ask for the same few dozen pointers thousands of times
def to_dotted(pointer: str) -> str:
    """``/spec/containers/0/image`` -> ``spec.containers[0].image`` for messages people read."""
    out = ""
    for token in split(pointer):
        out += f"[{token}]" if token.isdigit() else ("." + token if out else token)
    return out


def tokens_join(tokens: Iterable[str]) -> str:
    return join("", *tokens)
