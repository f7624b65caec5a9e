"""What aiadmit's CEL checker found for one expression, by content: the key and the answer the bundle's record keeps.

Why: checking every expression of the built-in bundle (parse, declared names and types, the static cost) was
most of a bundle load (bench/RESULTS.md), and for the bundle as shipped it always gives the same answer. So the
record (policies/checked.json, language/record.py) keeps, for each expression, what the check found (the
variables it reads, whether it needs the reference engine, its type, the policy variables it reads by name), under a
key that digests everything the answer depends on: the source as written, the params, every declaration of its level
(types spelt out), the cost limits, and the source code of the CEL package and the declarations (so a checker that
changed never trusts an answer of the old one). A key that differs in any byte is not in the record, and the
expression is checked.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from typing import Any, Mapping, Optional

from webhook.cel.constants import Struct
from webhook.cel.limits import Limits
from webhook.cel.environment import CelError
from webhook.cel.stored import feed, package_hash
from webhook.language import declarations as _declarations
from webhook.model.valueclass import astuple

_DECLARATIONS = os.path.abspath(_declarations.__file__)  # after webhook/cel/ in sorted order (the key's formula)


@lru_cache(maxsize=1)
def checker_identity() -> str:
    """A digest of the code that decides a check: webhook/cel/*.py and language/declarations.py, in sorted order
    (each its file name, NUL, its text, NUL); the CEL files' part is cel/stored.py's, read once for both."""
    return feed(package_hash(), os.path.dirname(_DECLARATIONS), [_DECLARATIONS]).hexdigest()


def encode_type(kind: Any) -> Any:
    """A checker type as JSON: a name, ["t", ...] for a tuple type, ["s", name, open, {field: type}] for a struct."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, tuple):
        return ["t", *(encode_type(part) for part in kind)]
    if isinstance(kind, Struct):
        return ["s", kind.name, kind.open, {name: encode_type(kind.fields[name]) for name in sorted(kind.fields)}]
    raise TypeError(f"a checker type with no JSON form: {kind!r}")


def decode_type(data: Any) -> Any:
    if isinstance(data, str):
        return data
    if data[0] == "t":
        return tuple(decode_type(part) for part in data[1:])
    return Struct(data[1], {name: decode_type(kind) for name, kind in data[3].items()}, open=data[2])


# The level declarations are module constants: their types are spelt out once, by identity (the objects are kept).
_SPELT: dict[int, tuple[Any, str]] = {}


def _spelt(kind: Any) -> str:
    found = _SPELT.get(id(kind))
    if found is not None and found[0] is kind:
        return found[1]
    return json.dumps(encode_type(kind), sort_keys=True)


for _level in _declarations.LEVELS.values():
    for _kind in _level.values():
        _SPELT[id(_kind)] = (_kind, json.dumps(encode_type(_kind), sort_keys=True))


_DEFAULT_LIMITS = json.dumps(list(astuple(Limits())))


# Spelt-out parts of a key, by the identity of the object spelt (kept alive here, so an id is never reused while its
# entry stands). A bundle has a few hundred distinct params and declaration mappings, each shared by many
# expressions but not always in a row: spelling each once instead of once per change of object was a fifth of a
# bundle load (bench/RESULTS.md, issue 25). Like the single "last" memo this replaces, it trusts that params and
# declarations are not changed in place once compiling has begun; bounded, and emptied when full.
_SPELT_PARTS: dict[tuple[str, int], tuple[Any, str]] = {}
_MAX_PARTS = 2048
_dumps = json.dumps


def _part(kind: str, value: Any, spell: Any) -> str:
    """`json.dumps(spell(value))`: the JSON string of one part of the key, memoised by the value's identity."""
    found = _SPELT_PARTS.get((kind, id(value)))
    if found is not None and found[0] is value:
        return found[1]
    text = _dumps(spell(value))
    if len(_SPELT_PARTS) >= _MAX_PARTS:
        _SPELT_PARTS.clear()
    _SPELT_PARTS[(kind, id(value))] = (value, text)
    return text


def _params_text(params: Optional[dict]) -> str:
    return json.dumps(params, sort_keys=True, default=repr)


def _declarations_text(declarations: Optional[Mapping[str, Any]]) -> str:
    if declarations is None:
        return "(any name)"
    return "\0".join(f"{name}={_spelt(declarations[name])}" for name in sorted(declarations))


def _limits_text(limits: Any) -> str:
    return json.dumps(list(astuple(limits))) if limits is not None else _DEFAULT_LIMITS


def key(source: str, params: Optional[dict], declarations: Optional[Mapping[str, Any]], limits: Any,
        constants: Optional[Mapping[str, list]] = None) -> str:
    """The digest of everything a check of `source` depends on: sha256 of the JSON list [checker identity,
    source, params, declarations, limits] (each spelt as text; tests/test_celrecord.py holds the formula),
    assembled from the JSON strings of its parts; with the named variables that are constants of the params
    (`constants`, cel/patterns.py: each value and the param path it came from) as a sixth item when there are any."""
    extra = (", " + _dumps({name: [[value, _path_text(path)] for value, path in found]
                            for name, found in sorted(constants.items())}, sort_keys=True, default=repr)
             if constants else "")
    whole = "".join(("[", _dumps(checker_identity()), ", ", _dumps(source), ", ",
                     _part("p", params, _params_text), ", ", _part("d", declarations, _declarations_text), ", ",
                     _part("l", limits, _limits_text), extra, "]"))
    return hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()


def _path_text(path: Optional[tuple]) -> Any:
    """A param path as JSON: null for a literal, ["built", ...] for a value built from the param (cel/patterns.py)."""
    if path is None:
        return None
    return {"built": list(path)} if type(path) is not tuple else list(path)


def encode(found: tuple) -> list:
    variables, reference, kind, named = found
    return [sorted(variables), bool(reference), encode_type(kind), sorted(named)]


def encode_error(error: CelError) -> list:
    """A check that failed, kept as what it said: replaying it raises the same error at the same place."""
    return ["error", error.message, error.offset] + ([list(error.param)] if error.param else [])


def decode(data: list) -> tuple:
    if data[0] == "error":
        raise CelError(data[1], data[2], tuple(data[3]) if len(data) > 3 else None)
    return frozenset(data[0]), data[1], decode_type(data[2]), frozenset(data[3])
