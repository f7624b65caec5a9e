"""Kubernetes' CEL `semver` library (k8s.io/apiserver pkg/cel/library semverlib.go), natively.

Why: a policy on image or chart versions compares versions; Kubernetes parses them with blang/semver v4 (strict
`MAJOR.MINOR.PATCH[-pre][+build]`, no leading zeros, no `v`) and, since 1.33, `semver(s, true)` normalizes first
(drops a leading `v`, pads `1.2` to `1.2.0`, strips leading zeros). Equality and order ignore build metadata and
rank prereleases as semver.org says. The rules and error messages are that library's. Linear in the text.
"""

from __future__ import annotations

from typing import Any

from webhook.cel.runtime import EvalError, overload

_DIGITS = frozenset("0123456789")
_ALNUM = _DIGITS | frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_UINT64 = 2 ** 64


class Semver:
    """A CEL `kubernetes.Semver`: major, minor, patch, the prerelease identifiers, the build identifiers."""

    __slots__ = ("major", "minor", "patch", "pre", "build")
    cel_type = "kubernetes.Semver"

    def __init__(self, major: int, minor: int, patch: int, pre: tuple, build: tuple):
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    def compare(self, other: "Semver") -> int:
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for a, b in zip(self.pre, other.pre):
            if a != b:
                if type(a) is not type(b):
                    return -1 if type(a) is int else 1  # a numeric identifier ranks below an alphanumeric one
                return 1 if a > b else -1
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> bool:
        return type(other) is Semver and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(map(str, self.pre))
        if self.build:
            text += "+" + ".".join(self.build)
        return f"semver({text!r})"


def _number(text: str, what: str) -> int:
    if any(c not in _DIGITS for c in text):
        raise ValueError(f"Invalid character(s) found in {what} number {_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{what.capitalize()} number must not contain leading zeroes {_quote(text)}")
    if not text:
        raise ValueError('strconv.ParseUint: parsing "": invalid syntax')
    if len(text) > 20 or int(text) >= _UINT64:
        raise ValueError(f"strconv.ParseUint: parsing {_quote(text)}: value out of range")
    return int(text)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse(text: str) -> Semver:
    """blang/semver v4's Parse; ValueError with its message."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, build, pre = parts[2], [], []
    if "+" in rest:
        rest, _, tail = rest.partition("+")
        build = tail.split(".")
    if "-" in rest:
        rest, _, tail = rest.partition("-")
        pre = tail.split(".")
    patch = _number(rest, "patch")
    identifiers: list = []
    for part in pre:
        if not part:
            raise ValueError("Prerelease is empty")
        if all(c in _DIGITS for c in part):
            if len(part) > 1 and part[0] == "0":
                raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_quote(part)}")
            identifiers.append(_number(part, "prerelease"))
        elif all(c in _ALNUM for c in part):
            identifiers.append(part)
        else:
            raise ValueError(f"Invalid character(s) found in prerelease {_quote(part)}")
    for part in build:
        if not part:
            raise ValueError("Build meta data is empty")
        if any(c not in _ALNUM for c in part):
            raise ValueError(f"Invalid character(s) found in build meta data {_quote(part)}")
    return Semver(major, minor, patch, tuple(identifiers), tuple(build))


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes' normalization (semver(s, true)): no leading `v`, missing minor/patch as 0, no leading zeros."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for position, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in _DIGITS:
                part = "0" + part
            parts[position] = part
    if len(parts) < 3:
        if any(c in "+-" for c in parts[-1]):
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _read(value: Any, normalize: Any, name: str) -> Semver:
    if type(value) is not str or type(normalize) is not bool:
        raise overload(name, value, normalize)
    return normalize_and_parse(value) if normalize else parse(value)


def semver(value: Any, normalize: Any = False) -> Semver:
    try:
        return _read(value, normalize, "semver")
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def is_semver(value: Any, normalize: Any = False) -> bool:
    try:
        _read(value, normalize, "isSemver")
    except ValueError:
        return False
    return True


def _int64(number: int) -> int:
    return number - _UINT64 if number >= 2 ** 63 else number  # Go's int64(uint64): as Kubernetes answers


def part(name: str) -> Any:
    def call(value: Any) -> int:
        if type(value) is not Semver:
            raise overload(name, value)
        return _int64(getattr(value, name))
    return call


def compare(a: Semver, b: Any, name: str) -> int:
    if type(b) is not Semver:
        raise overload(name, a, b)
    return a.compare(b)
