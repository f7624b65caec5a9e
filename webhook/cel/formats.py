"""Kubernetes' CEL `format` library (k8s.io/apiserver pkg/cel/library format.go), natively.

Why: `format.dns1123Label().validate(name)` is how a ValidatingAdmissionPolicy checks a name the way the API server
does, and its messages are the API server's own (k8s.io/apimachinery's validation: lengths, then the pattern, the
same wording); `uuid`, `byte`, `date`, `datetime` are the OpenAPI string formats (kube-openapi's strfmt), `uri`
is Go's url.ParseRequestURI. `validate` answers optional.none() when the string is valid, else optional.of(a list
of messages). Patterns run on RE2 (linear time).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import re2

from webhook.cel import urls
from webhook.cel.runtime import NONE, Optional as Opt, overload

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QUALIFIED + ")?"
_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
              "and end with an alphanumeric character")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                  "must start and end with an alphanumeric character")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
                "character, and end with an alphanumeric character")
_QUALIFIED_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_UUID = "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
_BASE64 = "^(?:[A-Za-z0-9+\\/]{4})*(?:[A-Za-z0-9+\\/]{2}==|[A-Za-z0-9+\\/]{3}=|[A-Za-z0-9+\\/]{4})$"
_TIME = "^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
_DATE = "^([0-9]{4})-([0-9]{2})-([0-9]{2})$"


@lru_cache(maxsize=None)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def _full(pattern: str, text: str) -> bool:
    return _compiled("^(?:" + pattern + ")$").search(text) is not None


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(length: int, unit: str = "characters") -> str:
    """apimachinery's MaxLenError: "characters" in util/validation (the DNS names), "bytes" in api/validate/content,
    which Kubernetes 1.37's qualifiedName (a label key) and labelValue come from (1.34: "characters" for all)."""
    return f"must be no more than {length} {unit}"


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's maskTrailingDash, as it is: a name ending in `-` loses its last two characters for an `a`."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def dns1123_label(text: str) -> list:
    errors = [_max_len(63)] if len(text.encode()) > 63 else []
    if not _full(_LABEL, text):
        errors.append("must not contain dots" if _full(_SUBDOMAIN, text)
                      else _regex_error(_LABEL_MSG, _LABEL, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(text: str, unit: str = "characters") -> list:
    errors = [_max_len(253, unit)] if len(text.encode()) > 253 else []
    if not _full(_SUBDOMAIN, text):
        errors.append(_regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN, "example.com"))
    return errors


def dns1035_label(text: str) -> list:
    errors = [_max_len(63)] if len(text.encode()) > 63 else []
    if not _full(_DNS1035, text):
        errors.append(_regex_error(_DNS1035_MSG, _DNS1035, "my-name", "abc-123"))
    return errors


def qualified_name(text: str) -> list:
    parts = text.split("/")
    errors: list = []
    if len(parts) > 2:
        return ["a valid label key " + _regex_error(_QUALIFIED_MSG, _QUALIFIED, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + message for message in dns1123_subdomain(parts[0], "bytes")]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append("name part " + _max_len(63, "bytes"))
    if not _full(_QUALIFIED, name):
        errors.append("name part " + _regex_error(_QUALIFIED_MSG, _QUALIFIED, "MyName", "my.name", "123-abc"))
    return errors


def label_value(text: str) -> list:
    errors = [_max_len(63, "bytes")] if len(text.encode()) > 63 else []
    if not _full(_LABEL_VALUE, text):
        errors.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def _uri(text: str) -> list:
    try:
        urls._parse(text, True)
    except ValueError as exc:
        return [f"parse {urls._quote(text)}: {exc}"]
    return []


def _is_date(text: str) -> bool:
    """Go's time.Parse("2006-01-02"): four-digit year (0 allowed), a real month and day."""
    found = _compiled(_DATE).search(text)
    if found is None:
        return False
    year, month, day = (int(part) for part in found.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    return 1 <= day <= days


def _is_datetime(text: str) -> bool:
    """kube-openapi's IsDateTime: a date, a `t`, then a time (hours to 23, minutes and seconds to 59) and zone."""
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    found = _compiled(_TIME).search(parts[1])
    return found is not None and found.group(1) <= "23" and found.group(2) <= "59" and found.group(3) <= "59"


def _check(test: Callable[[str], bool], message: str) -> Callable[[str], list]:
    return lambda text: [] if test(text) else [message]


class Format:
    """A CEL `kubernetes.NamedFormat`: one of the named string formats."""

    __slots__ = ("name", "check")
    cel_type = "kubernetes.NamedFormat"

    def __init__(self, name: str, check: Callable[[str], list]):
        self.name, self.check = name, check

    def __eq__(self, other: object) -> bool:
        return type(other) is Format and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"format.{self.name}()"


FORMATS: dict[str, Format] = {name: Format(name, check) for name, check in (
    ("dns1123Label", dns1123_label),
    ("dns1123Subdomain", dns1123_subdomain),
    ("dns1035Label", dns1035_label),
    ("qualifiedName", qualified_name),
    ("dns1123LabelPrefix", lambda text: dns1123_label(_mask_trailing_dash(text))),
    ("dns1123SubdomainPrefix", lambda text: dns1123_subdomain(_mask_trailing_dash(text))),
    ("dns1035LabelPrefix", lambda text: dns1035_label(_mask_trailing_dash(text))),
    ("labelValue", label_value),
    ("uri", _uri),
    ("uuid", _check(lambda text: _full(_UUID, text), "does not match the UUID format")),
    ("byte", _check(lambda text: _full(_BASE64, text), "invalid base64")),
    ("date", _check(_is_date, "invalid date")),
    ("datetime", _check(_is_datetime, "invalid datetime")),
)}


def named(name: Any) -> Opt:
    if type(name) is not str:
        raise overload("format.named", name)
    found = FORMATS.get(name)
    return NONE if found is None else Opt(found)


def constant(name: str) -> Callable[[], Format]:
    found = FORMATS[name]
    return lambda: found


def validate(kind: Any, text: Any) -> Opt:
    if type(kind) is not Format or type(text) is not str:
        raise overload("validate", kind, text)
    errors = kind.check(text)
    return Opt(errors) if errors else NONE
