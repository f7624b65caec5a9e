"""The declarations of Kubernetes' ip, cidr, url, format, semver, jsonpatch CEL libraries (and cel-go's lists
extension, which Kubernetes 1.34 enables), for cel/library.py.

Why a module of its own: library.py is the one function table (the checker, the compiler and the docs read it),
but these six libraries are 40 functions; their rows live here, in library.py's shape
(name, origin, argument kinds per arity, result type, implementation, member), and library.py takes them in.
The types are named as Kubernetes names them (`net.IP`, `kubernetes.Semver`, ...), so a type error reads as
Kubernetes' does: `no matching overload for isIP() applied to (net.CIDR)`.
`isGreaterThan`, `isLessThan` and `compareTo` are shared with the quantity library: `overloaded` wraps the
quantity implementation so that a semver receiver takes the semver one.
"""

from __future__ import annotations

from typing import Any, Callable

from webhook.cel import formats, lists, network as net, semver as sv, timestamps as ts, urls
from webhook.cel.runtime import overload, register_type

IP, CIDR, URL, SEMVER, FORMAT = "net.IP", "net.CIDR", "kubernetes.URL", "kubernetes.Semver", "kubernetes.NamedFormat"
for _kind in (net.IP, net.CIDR, urls.URL, sv.Semver, formats.Format):
    register_type(_kind)

# Names the parser reads as one global function (`ip.isCanonical(...)`), and qualified type names
NAMESPACED = frozenset({"ip.isCanonical", "format.named", "jsonpatch.escapeKey", "lists.range"} |
                       {f"format.{name}" for name in formats.FORMATS})
TYPE_NAMES = frozenset({IP, CIDR, URL, SEMVER, FORMAT})


def overloaded(name: str, quantity: Callable[[Any, Any], Any], semver: Callable[[int], Any]) -> Callable:
    """`a.compareTo(b)` and the like: the semver overload for a semver receiver, else the quantity one, with the
    common case (two quantities, carried as doubles) answered in place: these run in every review."""
    if name == "compareTo":
        def call(a: Any, b: Any) -> Any:
            if type(a) is float and type(b) is float:
                return (a > b) - (a < b)
            return semver(sv.compare(a, b, name)) if type(a) is sv.Semver else quantity(a, b)
    elif name == "isGreaterThan":
        def call(a: Any, b: Any) -> Any:
            if type(a) is float and type(b) is float:
                return a > b
            return semver(sv.compare(a, b, name)) if type(a) is sv.Semver else quantity(a, b)
    else:
        def call(a: Any, b: Any) -> Any:
            if type(a) is float and type(b) is float:
                return a < b
            return semver(sv.compare(a, b, name)) if type(a) is sv.Semver else quantity(a, b)
    return call


def sum_durations(items: list) -> Any:
    if any(type(item) is not ts.Duration for item in items):
        raise overload("sum", items)
    return ts.Duration(sum(item.ns for item in items))


def _ip_form(kinds: list, member: bool) -> Any:
    """Kubernetes has `ip(string)` and `cidr.ip()`, not `ip(cidr)` nor `string.ip()`."""
    if kinds and kinds[0] in ("string", CIDR) and (kinds[0] == CIDR) != member:
        return "write ip(string) or cidr.ip()"
    return None


def _element(kinds: list) -> Any:
    """The receiver list's element type when the checker knows it (a literal, a declared list), else None."""
    kind = kinds[0] if kinds else None
    if isinstance(kind, tuple) and kind[0] == "list" and kind[1] != "dyn":
        return kind[1]
    return None


def _summable(kinds: list, member: bool) -> Any:
    element = _element(kinds)
    if element is not None and element not in ("int", "uint", "double", "duration", "quantity"):  # quantity: a double
        return "sum() takes a list of int, uint, double or duration"
    return None


def _comparable(kinds: list, member: bool) -> Any:
    element = _element(kinds)
    if element is not None and (isinstance(element, tuple) or element in ("null", "optional")):
        return "the list's elements have no order"
    return None


def _sortable_keys(kinds: list, member: bool) -> Any:
    return _comparable(kinds[1:], member)  # sortBy's keys (cel/parser.py expands the macro)


def _same_element(kinds: list, member: bool) -> Any:
    element, item = _element(kinds), kinds[1] if len(kinds) > 1 else "dyn"
    if element is not None and item != "dyn" and str(element) != str(item) and \
            {str(element), str(item)} != {"quantity", "double"}:  # aiadmit carries a quantity as its double
        return f"the list holds {element}, not {item}"
    return None


# Kubernetes' overloads the argument kinds alone do not say (`function.check(kinds, member)`): the lists library's
# element types (what the checker knows of the elements must fit), and ip()'s two call forms
CHECKS: dict = {"sum": _summable, "min": _comparable, "max": _comparable, "isSorted": _comparable,
                "indexOf": _same_element, "lastIndexOf": _same_element, "ip": _ip_form, "sort": _comparable,
                "@sortByAssociatedKeys": _sortable_keys}


def _escape_key(key: Any) -> str:
    if type(key) is not str:
        raise overload("jsonpatch.escapeKey", key)
    return key.replace("~", "~0").replace("/", "~1")


_S, _B = "string", "bool"
SPECS: tuple = (
    # ip (Kubernetes 1.30)
    ("ip", "kubernetes", ((_S,), (CIDR,)), IP, net.ip, None, "`ip(string)`, and `cidr.ip()`"),
    ("isIP", "kubernetes", ((_S,),), _B, net.is_ip, False, ""),
    ("ip.isCanonical", "kubernetes", ((_S,),), _B, net.is_canonical, False, ""),
    ("family", "kubernetes", ((IP,),), "int", net.family, True, ""),
    ("isUnspecified", "kubernetes", ((IP,),), _B, net.is_unspecified, True, ""),
    ("isLoopback", "kubernetes", ((IP,),), _B, net.is_loopback, True, ""),
    ("isLinkLocalMulticast", "kubernetes", ((IP,),), _B, net.is_link_local_multicast, True, ""),
    ("isLinkLocalUnicast", "kubernetes", ((IP,),), _B, net.is_link_local_unicast, True, ""),
    ("isGlobalUnicast", "kubernetes", ((IP,),), _B, net.is_global_unicast, True, "Go's definition: private counts"),
    # cidr (Kubernetes 1.30)
    ("cidr", "kubernetes", ((_S,),), CIDR, net.cidr, False, ""),
    ("isCIDR", "kubernetes", ((_S,),), _B, net.is_cidr, False, ""),
    ("containsIP", "kubernetes", ((CIDR, IP), (CIDR, _S)), _B, net.contains_ip, True, ""),
    ("containsCIDR", "kubernetes", ((CIDR, CIDR), (CIDR, _S)), _B, net.contains_cidr, True, ""),
    ("masked", "kubernetes", ((CIDR,),), CIDR, net.masked, True, ""),
    ("prefixLength", "kubernetes", ((CIDR,),), "int", net.prefix_length, True, ""),
    # url (Kubernetes 1.24)
    ("url", "kubernetes", ((_S,),), URL, urls.url, False, "Go's url.ParseRequestURI rules"),
    ("isURL", "kubernetes", ((_S,),), _B, urls.is_url, False, ""),
    ("getScheme", "kubernetes", ((URL,),), _S, urls.get_scheme, True, ""),
    ("getHost", "kubernetes", ((URL,),), _S, urls.get_host, True, ""),
    ("getHostname", "kubernetes", ((URL,),), _S, urls.get_hostname, True, ""),
    ("getPort", "kubernetes", ((URL,),), _S, urls.get_port, True, ""),
    ("getEscapedPath", "kubernetes", ((URL,),), _S, urls.get_escaped_path, True, ""),
    ("getQuery", "kubernetes", ((URL,),), ("map", _S, ("list", _S)), urls.get_query, True, ""),
    # format (Kubernetes 1.31)
    ("format.named", "kubernetes", ((_S,),), "optional", formats.named, False, ""),
    ("validate", "kubernetes", ((FORMAT, _S),), "optional", formats.validate, True,
     "optional.none() or optional.of(the list of messages)"),
    *((f"format.{name}", "kubernetes", ((),), FORMAT, formats.constant(name), False, "")
      for name in formats.FORMATS),
    # semver (Kubernetes 1.31; the normalize argument since 1.33)
    ("semver", "kubernetes", ((_S,), (_S, _B)), SEMVER, sv.semver, False, "`semver(s, true)` normalizes"),
    ("isSemver", "kubernetes", ((_S,), (_S, _B)), _B, sv.is_semver, False, ""),
    ("major", "kubernetes", ((SEMVER,),), "int", sv.part("major"), True, ""),
    ("minor", "kubernetes", ((SEMVER,),), "int", sv.part("minor"), True, ""),
    ("patch", "kubernetes", ((SEMVER,),), "int", sv.part("patch"), True, ""),
    # cel-go's lists extension, version 3 (Kubernetes 1.34 enables it; `reverse` is in library.py, with strings')
    ("lists.range", "cel", (("int",),), ("list", "int"), lists.range_, False, ""),
    ("distinct", "cel", (("list",),), None, lists.distinct, True, ""),
    ("flatten", "cel", (("list",), ("list", "int")), ("list", "dyn"), lists.flatten, True,
     "one level, or as many as given"),
    ("slice", "cel", (("list", "int", "int"),), None, lists.slice_, True, ""),
    ("sort", "cel", (("list",),), None, lists.sort, True, ""),
    ("@sortByAssociatedKeys", "cel", (("list", "list"),), None, lists.sort_by, True,
     "what the `sortBy(e, key)` macro calls (cel/parser.py): ordered by the keys, stable"),
    # cel-go's optional library, version 2 (Kubernetes 1.34's optional types)
    ("first", "cel", (("list",),), "optional", lists.first, True, "optional.none() of an empty list"),
    ("last", "cel", (("list",),), "optional", lists.last, True, "optional.none() of an empty list"),
    # jsonpatch (Kubernetes 1.32, MutatingAdmissionPolicy's environment)
    ("jsonpatch.escapeKey", "kubernetes", ((_S,),), _S, _escape_key, False, "`~` to `~0`, `/` to `~1`"),
)
