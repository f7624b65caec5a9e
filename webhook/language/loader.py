"""Loading policy files: read, validate against the language's schema, compile; all or nothing.

One bad file fails the whole set with every problem named by file, line and
field, so a half-loaded bundle can never serve. What compiles (language/compiler.py, mapload.py), what recalls
documents (parsed.py) and what places a problem (sourcemap.py) are imported where a load uses them: a run whose
bundle was kept whole (bundlecache.py) needs none of them.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional

from webhook.cel.limits import Limits
from webhook.inputs.sources import load_paths
from webhook.language.bundle import POLICY_SCHEMA_FILE
from webhook.language.checks import Checks
from webhook.language.policy import Policy, PolicyLoadError
from webhook.language.schemacheck import errors as schema_errors
from webhook.language.schemacheck import locate_error
from webhook.language import bundlecache
from webhook.language.vapload import InTree, is_intree, read_intree
from webhook.model import pointer as jp
from webhook.model.resource import Resource


def _format(resource: Resource, pointer: str, message: str, offset: Optional[int] = None,
            text: Optional[str] = None) -> str:
    """`file:line:col: field: message`; with `offset`, the column of that character of the field's expression."""
    from webhook.language.sourcemap import locate

    line, column = resource.origin.position(pointer)
    if offset is not None:
        value = jp.resolve(resource.obj, pointer)
        found = locate(resource.origin.node, resource.origin.base, pointer, value, offset, text) \
            if isinstance(value, str) else None
        if found is not None:
            line, column = found
    field_name = jp.to_dotted(pointer) or "(document)"
    return f"{resource.origin.file}:{line}:{column}: {field_name}: {message}"


def policy_files(paths: Iterable[str]) -> list[str]:
    """Policy files of the given files/directories; the language's schema file is not a policy."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if name.endswith((".yaml", ".yml")):
                    out.append(os.path.join(path, name))
        else:
            out.append(path)
    return out


def load_policies(paths: Iterable[str], params: Optional[dict[str, dict]] = None,
                  checks: Optional[Checks] = None, limits: Optional[Limits] = None) -> list[Policy]:
    """Load, validate and compile every policy in `paths`; raise PolicyLoadError on any problem."""
    return load_all(paths, params, checks, limits)[0]


def load_all(paths: Iterable[str], params: Optional[dict[str, dict]] = None,
             checks: Optional[Checks] = None, limits: Optional[Limits] = None) -> tuple[list[Policy], InTree]:
    """aiadmit's policies and the in-tree ones (ValidatingAdmissionPolicies, their bindings and param objects:
    language/vapload.py) in `paths`; raise PolicyLoadError on any problem of either."""
    files = policy_files(paths)
    cache = checks.cache if checks is not None else None
    kept_as = None
    if cache is not None and hasattr(cache, "recall_documents") and all(map(os.path.isfile, files)):
        # the command line's cache: the whole bundle as loaded before, else the documents of files read before
        # (stdin and directories are read as always)
        whole = checks.noted is None and files and hasattr(cache, "recall_bundle")  # bundlerecord notes each check
        kept_as = bundlecache.key(files, params, limits, checks) if whole else None
        found = bundlecache.recall(cache, kept_as, checks) if kept_as is not None else None
        if found is not None:
            return found
        from webhook.language import parsed

        loaded, recalled = parsed.load(files, cache)
        policies, intree, problems = _compile(loaded, params, checks, limits)
        if problems and recalled:  # a problem's position needs the YAML nodes: read every file as the webhook does
            policies, intree, problems = _compile(load_paths(files, templates=False), params, checks, limits)
    else:
        policies, intree, problems = _compile(load_paths(files, templates=False), params, checks, limits)
    if not files:
        problems.append("no policy files given")
    elif not policies and not intree and not problems:
        problems.append(f"no Policy documents found in {', '.join(files)}")
    if problems:
        raise PolicyLoadError(problems)
    if kept_as is not None:
        bundlecache.remember(cache, kept_as, policies, intree)
    return policies, intree


def compile_loaded(loaded, params: Optional[dict[str, dict]] = None, checks: Optional[Checks] = None,
                   limits: Optional[Limits] = None, texts: Optional[dict[str, str]] = None,
                   prepare=None) -> tuple[list[Policy], list[str]]:
    """Check and compile every Policy document `loaded` holds: (policies, problems as file:line:col).

    `texts`: the text each document's file holds, when it is not a file on disk (a cluster object's rendering);
    `prepare(resource)`: the document the schema sees (a cluster object less the metadata the API server adds).
    In-tree policies are read from files only (load_all): one here is a problem, never silently dropped.
    """
    policies, intree, problems = _compile(loaded, params, checks, limits, texts, prepare)
    if intree:
        problems.append("ValidatingAdmissionPolicies are read from policy files, not from here")
    return policies, problems


def _compile(loaded, params, checks, limits, texts=None, prepare=None) -> tuple[list[Policy], InTree, list[str]]:
    from webhook.language import mapload
    from webhook.language.compiler import Problems, compile_policy

    checks = checks or Checks()
    problems = [f"{e.file}:{e.line}:{e.column}: {e.message}" for e in loaded.errors + loaded.skipped]
    texts = dict(texts or {})
    policies: list[Policy] = []
    seen: dict[str, str] = {}
    ours, intree_docs, others = [], [], []
    for resource in loaded.resources:
        doc = prepare(resource) if prepare is not None else resource.obj
        if is_intree(doc):
            intree_docs.append(resource)
        elif doc.get("kind") != "Policy" and not str(doc.get("apiVersion", "")).startswith("aiadmit.dev/"):
            others.append(resource)
        else:
            ours.append((resource, doc))
    intree, others, intree_problems = read_intree(intree_docs, others, limits, mapload.read)
    for resource, pointer, message, offset in intree_problems:
        path = resource.origin.file or ""
        if offset is not None and path not in texts:
            texts[path] = _text_of(path)
        problems.append(_format(resource, pointer, message, offset, texts.get(path)))
    for resource in others:
        problems.append(_format(resource, "/kind", f"not a Policy document (kind {resource.obj.get('kind')!r})"))
    for resource, doc in ours:
        path = resource.origin.file or ""
        if path not in texts:
            texts[path] = _text_of(path)
        errors = schema_errors(POLICY_SCHEMA_FILE, doc, texts[path], str(resource.origin.document), checks)
        if errors:
            for error in errors:
                problems.append(_format(resource, *_schema_problem(error)))
            continue
        name = doc["metadata"]["name"]
        if name in seen:
            problems.append(_format(resource, "/metadata/name", f"policy {name!r} is already defined in {seen[name]}"))
            continue
        seen[name] = resource.origin.file or "?"
        try:
            policies.append(compile_policy(doc, resource.origin.file or "?", (params or {}).get(name), checks, limits))
        except Problems as exc:
            origins = getattr(params, "origins", {})
            for problem in exc.problems:
                where = origins.get((name, *problem[3])) if len(problem) > 3 and problem[3] else None
                if where is not None:  # a config override's value: the mistake is in the config file
                    problems.append(f"{where}: policies.{name}.{jp.to_dotted(problem[0])}: {problem[1]}")
                    continue
                problems.append(_format(resource, problem[0], problem[1], problem[2] if len(problem) > 2 else None,
                                        texts[path]))
    return policies, intree, problems


def _text_of(path: str) -> Optional[str]:
    """The text a policy document was loaded from, which names it for the schema-check cache; None if unknown."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None  # then it is simply checked, every time


def _schema_problem(error) -> tuple[str, str]:
    if error.validator == "oneOf" and "expression" in str(error.schema):
        return jp.join("", *error.absolute_path), "a rule has exactly one of `expression` or `schema`"
    return locate_error(error)
