"""CEL timestamps and durations, natively: exact nanoseconds, the protobuf ranges, time zones by name or offset.

Why natively: an expression with `timestamp()` used to run on the reference library, which converts every
variable it reads (slow) and is not bounded by aiadmit's run-time step counter. Values are integers of
nanoseconds (Python ints: no rounding), checked against the ranges CEL takes from protobuf: timestamps from
0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z, durations within int64 nanoseconds (cel-go's range).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from webhook.cel.runtime import EvalError, overload, register_time
from webhook.model.lazyre import Lazy

_NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MIN_TS = -62135596800 * _NS
_MAX_TS = 253402300799 * _NS + 999_999_999
_MAX_DURATION = 2 ** 63 - 1  # cel-go holds a duration in int64 nanoseconds (about 292 years)
_RFC3339 = Lazy(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})")
_DURATION = Lazy(r"([-+]?)((?:\d+(?:\.\d*)?|\.\d+)(?:h|m|s|ms|us|µs|ns))+")
_UNIT = Lazy(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600 * _NS, "m": 60 * _NS, "s": _NS, "ms": 1_000_000, "us": 1000, "µs": 1000, "ns": 1}


class Timestamp:
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        if not _MIN_TS <= ns <= _MAX_TS:
            raise EvalError("timestamp out of range")
        self.ns = ns

    def __eq__(self, other: Any) -> bool:
        return type(other) is Timestamp and other.ns == self.ns

    def __hash__(self) -> int:
        return hash(("ts", self.ns))

    def __repr__(self) -> str:
        return f"timestamp({to_string(self)!r})"


class Duration:
    __slots__ = ("ns",)

    def __init__(self, ns: int):
        if abs(ns) > _MAX_DURATION:
            raise EvalError("duration out of range")
        self.ns = ns

    def __eq__(self, other: Any) -> bool:
        return type(other) is Duration and other.ns == self.ns

    def __hash__(self) -> int:
        return hash(("d", self.ns))

    def __repr__(self) -> str:
        return f"duration({to_string(self)!r})"


def timestamp(value: Any) -> Timestamp:
    if type(value) is Timestamp:
        return value
    if type(value) is int:
        return Timestamp(value * _NS)
    if type(value) is not str:
        raise overload("timestamp", value)
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise EvalError(f"timestamp() cannot parse {value!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        moment = datetime(year, month, day, hour, minute, min(second, 59), tzinfo=timezone.utc)
    except ValueError:
        raise EvalError(f"timestamp() cannot parse {value!r}") from None
    zone = match.group(8)
    offset = 0 if zone in "Zz" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    seconds = (moment - _EPOCH) // timedelta(seconds=1) - offset
    nanos = int((match.group(7) or "").ljust(9, "0") or 0)
    return Timestamp(seconds * _NS + nanos)


def duration(value: Any) -> Duration:
    if type(value) is Duration:
        return value
    if type(value) is not str:
        raise overload("duration", value)
    if value in ("0", "+0", "-0"):
        return Duration(0)
    if not _DURATION.fullmatch(value):
        raise EvalError(f"duration() cannot parse {value!r}")
    sign = -1 if value.startswith("-") else 1
    total = 0
    for number, unit in _UNIT.findall(value):
        whole, _, fraction = number.partition(".")
        scale = _UNITS[unit]
        total += int(whole or 0) * scale + (int(fraction) * scale // 10 ** len(fraction) if fraction else 0)
    return Duration(sign * total)


def to_string(value: Any) -> str:
    if type(value) is Timestamp:
        seconds, nanos = divmod(value.ns, _NS)
        text = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
        if nanos:
            text += "." + f"{nanos:09d}".rstrip("0")
        return text + "Z"
    sign = "-" if value.ns < 0 else ""
    seconds, nanos = divmod(abs(value.ns), _NS)
    return f"{sign}{seconds}" + (("." + f"{nanos:09d}".rstrip("0")) if nanos else "") + "s"


def to_int(value: Timestamp) -> int:
    return value.ns // _NS


def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is Duration and tb is Duration:
        return Duration(a.ns + b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns + b.ns)
    if ta is Duration and tb is Timestamp:
        return Timestamp(a.ns + b.ns)
    raise overload("+", a, b)


def subtract(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is Timestamp and tb is Timestamp:
        return Duration(a.ns - b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns - b.ns)
    if ta is Duration and tb is Duration:
        return Duration(a.ns - b.ns)
    raise overload("-", a, b)


def _zone(name: Any) -> Any:
    if type(name) is not str:
        raise overload("time zone", name)
    match = re.fullmatch(r"([+-]?)(\d{2}):(\d{2})", name)
    if match:
        sign = -1 if match.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(match.group(2)), minutes=int(match.group(3))))
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: only a rule naming a time zone needs the tz data

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise EvalError(f"unknown time zone {name!r}") from None


def _local(value: Any, zone: Any, name: str) -> datetime:
    if type(value) is not Timestamp:
        raise overload(name, value)
    moment = _EPOCH + timedelta(microseconds=value.ns // 1000)
    return moment.astimezone(_zone(zone)) if zone is not None else moment


def _getter(name: str, part):
    def call(value: Any, zone: Any = None) -> int:
        if type(value) is Duration:
            if zone is not None:
                raise overload(name, value, zone)
            return _duration_part(name, value)
        return part(_local(value, zone, name), value)
    return call


def _duration_part(name: str, value: Duration) -> int:
    total = value.ns
    sign = -1 if total < 0 else 1
    total = abs(total)
    if name == "getHours":
        return sign * (total // (3600 * _NS))
    if name == "getMinutes":
        return sign * (total // (60 * _NS))
    if name == "getSeconds":
        return sign * (total // _NS)
    if name == "getMilliseconds":
        return sign * ((total // 1_000_000) % 1000)
    raise overload(name, value)


GETTERS = {
    "getFullYear": _getter("getFullYear", lambda t, v: t.year),
    "getMonth": _getter("getMonth", lambda t, v: t.month - 1),
    "getDayOfYear": _getter("getDayOfYear", lambda t, v: t.timetuple().tm_yday - 1),
    "getDayOfMonth": _getter("getDayOfMonth", lambda t, v: t.day - 1),
    "getDate": _getter("getDate", lambda t, v: t.day),
    "getDayOfWeek": _getter("getDayOfWeek", lambda t, v: (t.weekday() + 1) % 7),
    "getHours": _getter("getHours", lambda t, v: t.hour),
    "getMinutes": _getter("getMinutes", lambda t, v: t.minute),
    "getSeconds": _getter("getSeconds", lambda t, v: t.second),
    "getMilliseconds": _getter("getMilliseconds", lambda t, v: (v.ns // 1_000_000) % 1000),
}


register_time(Timestamp, Duration, add, subtract, to_string)
