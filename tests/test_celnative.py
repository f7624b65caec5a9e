"""The native CEL compiler (webhook/cel/compiler.py), checked differentially against the reference CEL library.

Why: every policy runs on aiadmit's own CEL compiler (fast: it reads the admission objects in place,
bench/RESULTS.md), and a wrong answer there is a wrong admission decision. The reference library
(`common-expression-language`, Rust) stays the yardstick: each case runs on both and the outcomes must agree,
value AND Python type (bool is not int, int is not float), or both must raise. AGREE holds edge cases of the
language over a variable `x`; NATIVE_BUGS the known wrong native answers (strict xfails); SPEC where the engines
legitimately differ, with the reason and the result the CEL specification (and cel-go, its reference
implementation) prescribes; UNSUPPORTED what the native compiler leaves to the reference library (celenv.py falls
back), so no other case may raise Unsupported. Then every expression of the built-in policies runs on both over
every pod template and container of the manifest corpus and a few hand-made pods, and must compile natively.
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from functools import lru_cache

import pytest

from webhook.cel.reference import cel
from webhook.cel.environment import FUNCTIONS
from webhook.cel.library import CALLABLES
from webhook.cel.compiler import Unsupported, compile_native
from webhook.language.config import Config
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.inputs.sources import load_paths, load_text
from webhook.engine.binding import pod_resources
from webhook.k8s.workload import Container, PodTemplate, ShapeError, build_workload, template_devices

from testdata import CORPUS  # tests/data/corpus, in the repository
X = {"a": {"c": 1}, "n": None, "l": [1, 2], "fl": 2.0, "i": 7, "s": "héllo", "m": {"k": "v"}}
ERROR = Exception("any error")  # an expected outcome: the evaluation raises


def _outcome(run, *args):
    """The value, or the exception raised (any exception is a CEL error; no CEL value is an exception)."""
    try:
        return run(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the Rust binding's panics derive from BaseException
        return exc


def raised(outcome) -> bool:
    return isinstance(outcome, BaseException)


def reference_context(variables: dict):
    context = cel.Context()
    for name, function in CALLABLES.items():
        context.add_function(name, function)
    for name, value in variables.items():
        context.add_variable(name, value)
    return context


def reference(source: str, variables: dict):
    program = _outcome(cel.compile, source)
    return program if raised(program) else _outcome(program.execute, reference_context(variables))


def native(source: str, variables: dict):
    """The native outcome; Unsupported propagates (the caller says whether it was expected)."""
    program = _outcome(compile_native, source, FUNCTIONS)  # a syntax error: the reference rejects it too
    if isinstance(program, Unsupported):
        raise program
    return program if raised(program) else _outcome(program.execute, copy.deepcopy(variables))


def same(a, b) -> bool:
    """Both raised, or equal values of the same Python types all the way down."""
    if raised(a) or raised(b):
        return raised(a) and raised(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        keys = {(type(k), k) for k in a}
        return keys == {(type(k), k) for k in b} and all(same(v, b[k]) for k, v in a.items())
    return a == b


def uint(value: int):
    """The CEL uint `value`: an int of a type of its own, not a plain int."""
    return lambda result: isinstance(result, int) and type(result) not in (int, bool) and result == value


# ---------------------------------------------------------------------------------------------------- tables
AGREE = [
    # literals: hex, doubles, every quote style, escapes, raw strings, bytes, out-of-range literals
    "0x1F", "1.5e-2", ".5", "-9223372036854775808", "9223372036854775808", "18446744073709551616u", "'abc'",
    '"""a"b"""', "'''a'b'''", r'"\n\t\"\\"', r"'\x41\u00e9\U0001F600\101'", r'"\a\v\?\`"', r'"\303\277"',
    r'r"a\nb"', r"R'a\nb'", 'b"ÿ"', r'b"\303\277"', r'b"\xFF"',
    # arithmetic: overflow, division and modulo by zero, truncation toward zero, no mixed-type arithmetic
    "9223372036854775807 + 1", "-9223372036854775808 - 1", "9223372036854775807 * 2", "-9223372036854775808 / -1",
    "1 / 0", "1 % 0", "-7 / 2", "-7 % 2", "7 / -2", "7 % -2", "1.0 / 0.0", "0.1 + 0.2", "1u - 2u", "5u % 0u",
    "1 + 1.0", "1 + 1u", "x.fl + x.i", '"a" + 1', "[1] + 'a'", "-x.fl", '-"a"', "x.i / 2", "x.l + [3]",
    # heterogeneous equality and ordering, lists and maps
    "1 == 1.0", "1u < 2", "1 == '1'", "true == 1", "1.0 == 1u", '"é" > "z"', 'b"a" < b"b"', "true > false",
    "[1] < [2]", "x.n == null", "x.l == [1.0, 2.0]", "[1] == ['a']", "{'a': 1} == {'a': 1.0}",
    "{'a': 1} == {'b': 1}", "{'a': true} == {'a': 1}", 'double("nan") == double("nan")',
    # in; selection and indexing: missing keys, out of bounds, negative index, wrong types, selection on null
    "1.0 in [1, 2]", "'a' in [1, 'a']", "true in [1]", "'k' in x.m", "'z' in x.m", "true in {1: 'a'}", "x.a.z",
    "x.m['z']", "x['a']", "x.l[2]", "x.l[-1]", "x.l[1u]", "x.l['0']", "x.s[0]", "x.n.f", "x.i.f",
    "{1: 'a'}[true]", "unknown_var",
    # has(); logic with an error on either side, !, the ternary
    "has(x.a)", "has(x.z)", "has(x.a.z)", "has(x.n)", "has(x.n.f)", "has(x.l.f)", "false && (1/0 == 1)",
    "(1/0 == 1) && false", "(1/0 == 1) || true", "true || (1/0 == 1)", "(1/0 == 1) || false", "(1/0 == 1) && true",
    "unknown_var || true", "false || 1", "true && 1", "!1", "!(1 / 0 == 1)", "false ? 1 : 1/0", "1 ? 2 : 3",
    # macros on lists and maps (whose iteration order CEL leaves open), errors inside them
    "[1, 2, 3].all(v, v > 0)", "[1, 2, 3].exists_one(v, v > 1)", "[1, 2, 3].map(v, v > 1, v * 2)",
    "[1, 2, 3].filter(v, v % 2 == 1)", "{'a': 1, 'b': 2}.all(k, k != 'c')", "x.m.map(k, x.m[k])",
    "'b!' in {'a': 1, 'b': 2}.map(k, k + '!')", "{'a': 1, 'b': 2}.map(k, k == 'a', k + '?')",
    "{'a': 1, 'b': 2}.filter(k, k == 'a')", "[].all(v, false)", "[].exists(v, true)", "[1, 0].exists(v, 1 / v == 1)",
    "[1, 0].all(v, 1 / v == 5)", "[1, 0].exists_one(v, 1 / v == 1)", "[1, 2].map(v, v > 1, 1 / 0)",
    "[1, 'a'].all(v, v > 0)", "[1, 2].filter(v, v)", "x.n.all(v, true)",
    # nested comprehensions, and a comprehension variable shadowing a variable or an outer one
    "x.l.map(v, x.l.map(w, v * w))", "x.l.map(x, x * 2)", "[1, 2].exists(x, x == 2) && x.i == 7",
    "[[1]].all(v, v.all(v, v == 1))", "[{'i': 1}].map(x, x.i)",
    # size() and the string functions; conversions, dyn(), type(); list and map literals
    'size("abc")', "size({'a': 1})", r'size(b"\xff\xfe")', 'x.s.startsWith("hé")', '"hello".endsWith("lo")',
    '"hello".contains("ll")', '"abc".startsWith(1)', "int(-1.9)", 'int("x")', "int(1e19)", 'int(double("nan"))',
    "int(18446744073709551615u)", "int(true)", "uint(-1)", 'double("1.5")', "double(1u)", "string(1.0)",
    'string(b"abc")', "string(x.n)", "dyn(1) + 1", "type(x.l) == list", "type(x.m) == map", "type(x.m) == list",
    "type(null) == null_type", "type(int) == type", "[1, 'a', true]", "{'a': [1, {'b': null}]}", "{1.5: 1}",
    # the custom functions (webhook/cel/environment.py FUNCTIONS)
    'quantity("48Gi") > quantity("1Gi")', "quantity(1)", 'quantity("100m")', 'quantity("x")', "quantity(null)",
    'isQuantity("abc")', 'quantity("1Gi").isGreaterThan(quantity("1"))', 'asInteger(quantity("2k"))',
    "formatBytes(1073741824)", "least([], 0.0)", "[1.0, 2.5].sum()", "[1, 2].sum()", "['a'].sum()",
    'join(["a", 1], "-")', 'x.l.join("+")', 'glob("nvidia.com/gpu", "nvidia.com/*")', 'glob("x", ["a", "x*"])',
    'bytes("abc")', 'glob(1, "a")', '"abc".matches("c$")', 'matches(1, "a")', 'matches("a", "(")', r'matches("a\nb", "^b")',
    '"abc".matches("b")', 'matches("abc", "^a")',
    # the inline fast paths of +, the string methods and matches(), and the bool operands of the logic, each
    # beside the cases it leaves to the runtime (a non-str, an error, a non-bool)
    '"a" + x.s', 'x.s + "!"', 'x.i + "a"', '"a" + x.l', "x.l + x.l", "x.s + x.s", "x.l + x.s", "x.i + x.i",
    "x.s.startsWith(x.s)", 'x.s.endsWith("llo")', '"abc".contains(x.s)', "x.s.contains(x.i)", 'x.s.matches("^h")',
    "x.s.matches(x.s)", 'x.i.matches("1")', "x.i > 1 && 1 / 0 == 1", "1 / 0 == 1 && x.i > 100",
    "x.i > 100 || !(x.i > 100)", "!(x.i > 1) ? 1 : 2", "x.i > 1 ? 'a' : 1 / 0", "x.l.filter(v, v > 1 && v < 3)",
    "x.l.all(v, v > 0 || 1 / 0 == 1)", "x.a.c && true", "true && x.a.c", "x.a.c || false", "has(x.a) && x.a.c == 1",
    "!has(x.z) || x.z", "x.l.exists(v, has(x.a) && v == 2)", "x.l.exists(v, v)",
]


def _bug(source: str, reason: str):
    return pytest.param(source, marks=pytest.mark.xfail(strict=True, reason=reason), id=source)


_BOOL_KEY = ("native cannot keep the map keys true and 1 apart (a Python dict) and raises; CEL keeps them apart "
             "(Rust does)")
NATIVE_BUGS = [
    _bug("{dyn(1): 'a', dyn(true): 'b'}[1]", _BOOL_KEY), _bug("size({dyn(1): 'a', dyn(true): 'b'})", _BOOL_KEY),
    _bug("{dyn(1): 'a', dyn(true): 'b'}[true]", _BOOL_KEY),
]
# Found by this file and fixed in the native compiler: they must keep agreeing.
FIXED = [
    "-9223372036854775808 % -1", "string(-0.0)", r"'\uD83D\uDE00'", 'int(" 1")', 'int("1_000")', 'int("١")',
    'uint("1_0")', 'double(" 1.5 ")', "int(-9.2233720368547758e18)",
    'double("nan") < 1.0', '1.0 > double("nan")', 'double("nan") <= double("nan")', '1 < double("nan")',
]

_SIZE = "size() counts code points (spec); Rust counts UTF-8 bytes"
_ABSORB = "the spec's all()/exists() absorb an error when another element decides; Rust does not"
_DOUBLE_KEY = "an integral double finds an int key (cel-go); Rust refuses a double key"
_MAP_KEYS = "numeric map keys compare as numbers (cel-go); Rust looks int and uint keys up apart"
_TEXT = "cel-go formats a double with %g (shortest); Rust spells it out without an exponent"
_UINT = "uint stays a uint natively; the Rust binding hands a uint back as a plain Python int"
SPEC = [  # (expression, the native result the spec prescribes: a value, ERROR or a predicate; why Rust differs)
    ("size(x.s)", 5, _SIZE), ("x.s.size()", 5, _SIZE), ("[0, 1].exists(v, 1 / v == 1)", True, _ABSORB),
    ("[0, 1].all(v, 1 / v == 5)", False, _ABSORB), ("['a', 1].exists(v, v > 0)", True, _ABSORB),
    ("-(-9223372036854775808)", ERROR, "negating the least int64 overflows (spec); Rust wraps around"),
    ("-true", ERROR, "unary minus takes an int or a double (spec); Rust answers false"),
    ("{'a': 1, 'a': 2}", ERROR, "duplicate map keys are an error (spec); Rust keeps the last"),
    (r'string(b"\xff")', ERROR, "bytes that are not UTF-8 have no string (cel-go); Rust substitutes U+FFFD"),
    ("string(1e21)", "1e+21", _TEXT), ("string(1e100)", "1e+100", _TEXT), ("1.0 in {1: 'a'}", True, _DOUBLE_KEY),
    ("1u in {1: 'a'}", True, _MAP_KEYS), ("{1: 'a'}[1u]", "a", _MAP_KEYS), ("{1u: 'a'}[1]", "a", _MAP_KEYS),
    ("{1: 'a'}[1.0]", "a", _DOUBLE_KEY), ('bool("true")', True, "cel-go has bool(string); Rust has none"), ("x.l[1.0]", 2, "an integral double indexes a list (conformance lists)"),
    pytest.param("string(true)", "true", "cel-go has string(bool); Rust has no such overload", id="string(true)",
                 marks=pytest.mark.xfail(strict=True, reason="native raises, as Rust does")),
    ("type(1)", lambda v: not isinstance(v, str) and str(v) == "int", "a type value (spec); Rust gives a str"),
    ("1u", uint(1), _UINT), ("0xFFu", uint(255), _UINT), ("uint(1)", uint(1), _UINT), ("uint(1.5)", uint(1), _UINT),
    ("5u / 2u", uint(2), _UINT), ("1u - 1u", uint(0), _UINT), ('uint("18446744073709551615")', uint(2**64 - 1), _UINT),
]

UNSUPPORTED = [  # (expression, why): compile_native raises Unsupported and webhook/cel/environment.py runs the reference
    ("nofunc(1)", "unknown function"),
    ("x.l.nomethod()", "unknown method"),
]


def _ids(table):
    return [case if isinstance(case, str) else getattr(case, "id", None) or case[0] for case in table]


@pytest.mark.parametrize("source", AGREE + FIXED + NATIVE_BUGS, ids=_ids(AGREE + FIXED + NATIVE_BUGS))
def test_native_agrees_with_reference(source):
    try:
        result = native(source, {"x": X})
    except Unsupported as exc:
        pytest.fail(f"the native compiler does not support {source!r} ({exc}): list it in UNSUPPORTED if intended")
    expected = reference(source, {"x": X})
    assert same(result, expected), f"{source}: native {result!r}, reference {expected!r}"


@pytest.mark.parametrize("source, expected, reason", SPEC, ids=_ids(SPEC))
def test_native_follows_the_spec_where_the_reference_differs(source, expected, reason):
    result = native(source, {"x": X})
    meets = raised(result) if expected is ERROR else not raised(result) and (
        expected(result) if callable(expected) else same(result, expected))
    assert meets, f"{source}: native {result!r}; the spec prescribes {expected!r} ({reason})"
    other = reference(source, {"x": X})
    assert not same(result, other), f"{source}: the reference now gives {other!r} too: move it to AGREE"


@pytest.mark.parametrize("source, reason", UNSUPPORTED, ids=_ids(UNSUPPORTED))
def test_unsupported_features_are_left_to_the_reference(source, reason):
    with pytest.raises(Unsupported):
        compile_native(source, FUNCTIONS)
    cel.compile(source)  # the reference library takes it, so the engine's fallback can run it


def test_tables_do_not_overlap():
    flat = [case for table in (AGREE, FIXED, NATIVE_BUGS, SPEC, UNSUPPORTED) for case in _ids(table)]
    assert len(flat) == len(set(flat)), sorted({case for case in flat if flat.count(case) > 1})


# ------------------------------------------------------------------------------------ the built-in policies
CLUSTER = {  # cluster facts, shaped as the engine binds them (webhook/engine/core.py _cluster)
    "namespace": {"name": "ml", "labels": {"aiadmit.dev/tier": "trusted"}},
    "resourceQuotas": [
        {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}, {"metadata": {"name": "-"}},
        {"metadata": {"name": "scoped"}, "spec": {"hard": {"requests.amd.com/gpu": "2"}, "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["ai-training"]}]}}}],
    "priorityClasses": ["ai-training", "ai-inference"], "runtimeClasses": ["gvisor", "nvidia"], "hpaTarget": {
        "kind": "Deployment", "name": "vllm", "classes": ["accelerated", "inference"], "devices": ["nvidia.com/gpu"]},
}

HANDMADE = """
{apiVersion: v1, kind: Pod,
 metadata: {name: gpu, namespace: ml, labels: {aiadmit.dev/tier: untrusted, kueue.x-k8s.io/queue-name: q}},
 spec: {priorityClassName: ai-training, runtimeClassName: gvisor,
   securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}},
   nodeSelector: {nvidia.com/gpu.product: A100, cloud.google.com/gke-spot: "true"},
   volumes: [{name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}, {name: host, hostPath: {path: /run}}],
   initContainers: [{name: fetch, image: "busybox@sha256:%s"}],
   containers: [{name: trainer, image: "nvcr.io/nvidia/pytorch:24.01-py3", args: ["--checkpoint-dir=/ckpt"],
     env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}, {name: CHECKPOINT_DIR, value: /ckpt}],
     resources: {requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "2", hugepages-2Mi: 1Gi, ephemeral-storage: 1Gi},
                 limits: {memory: 64Gi, nvidia.com/gpu: "2", hugepages-2Mi: 1Gi}},
     volumeMounts: [{name: dshm, mountPath: /dev/shm}], readinessProbe: {httpGet: {path: /, port: 8000}},
     livenessProbe: {exec: {command: [sh, -c, "true"]}, periodSeconds: 30, failureThreshold: 100},
     startupProbe: {tcpSocket: {port: 8000}, initialDelaySeconds: 60},
     securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [SYS_ADMIN]}}}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: bare}, spec: {containers: [{image: nginx}]}}
---
{apiVersion: v1, kind: Pod,
 metadata: {name: odd-but-valid, labels: null, annotations: {kubectl.kubernetes.io/default-container: odd}},
 spec: {nodeSelector: {nvidia.com/gpu.present: true, cloud.google.com/gke-spot: 1}, priorityClassName: 5,
   hostNetwork: "yes", automountServiceAccountToken: "false", volumes: null,
   containers: [{name: odd, image: 42, resources: null, args: [1, true], command: [python, 3],
     volumeMounts: [{name: dshm, mountPath: /dev/shm}], readinessProbe: {exec: {command: [1, 2]}, httpGet: null},
     startupProbe: {periodSeconds: "10", failureThreshold: 3.5},
     securityContext: {capabilities: {add: "ALL", drop: null}, privileged: "true", runAsNonRoot: 1}},
    {name: fractional, env: [{name: NVIDIA_VISIBLE_DEVICES}, {value: x}],
     resources: {limits: {nvidia.com/gpu: 1.5, memory: 1Gi}, requests: {nvidia.com/gpu: "1", cpu: 0.5}}}]}}
---
{apiVersion: v1, kind: Pod, metadata: {name: malformed}, spec: {securityContext: null, containers: [
   {name: env-string, env: "x", volumeMounts: "x", resources: {limits: "8"}},
   {name: args-string, args: "--checkpoint", readinessProbe: null}]}}
""" % ("0123456789abcdef" * 4)


@lru_cache(maxsize=None)
def policy_expressions() -> tuple:
    """(label, source) of each CEL expression of the built-in policies as compiled."""
    out = []
    for policy in load_policies([BUILTIN_POLICY_DIR], Config().params()):
        for rule in policy.rules:
            parts = [("when", rule.when), ("expression", rule.expression)]
            parts += [("message", part) for part in rule.message.parts if not isinstance(part, str)]
            out += [(f"{policy.id}/{rule.name}/{where}", e.compiled) for where, e in parts if e is not None]
        for mutation in policy.mutations:
            parts = [("when", mutation.when), ("value", mutation.value)]
            out += [(f"{policy.id}/{mutation.name} mutation/{where}", e.compiled) for where, e in parts if e]
    return tuple(out)


_POD = {"pod", "podMeta", "template", "templateDevices", "podResources"}
_CONTAINER = {"container", "containerType", "containerName", "injected"}


def _templates(resource, classification):
    """The workload and its pod templates; a Pod the workload view rejects (ShapeError) is read as it is."""
    try:
        workload = build_workload(resource, classification)
        return workload, (workload.templates if workload else [])
    except ShapeError:
        spec = resource.obj["spec"]
        items = [(s, c) for s in ("initContainers", "containers") for c in spec.get(s) or () if isinstance(c, dict)]
        return None, [PodTemplate("pod", spec, "/spec", resource.metadata, "/metadata",
                                  [Container(item, "", section) for section, item in items], 1)]


def sites(resources, classification):
    """(origin, level, variables) for each resource, each of its pod templates and each of their containers."""
    for resource in resources:
        workload, templates = _templates(resource, classification)
        variables = {  # shaped as webhook/engine/core.py _bind binds them, whole
            "object": resource.obj, "cluster": CLUSTER, "error": "must be a string",
            "workload": {"kind": resource.kind, "name": resource.name, "namespace": resource.namespace,
                         "labels": resource.labels, "annotations": resource.annotations,
                         "role": workload and workload.role or "", "tier": workload and workload.tier or "",
                         "classes": sorted(workload.classes) if workload else [], "devices": sorted(
                             workload.devices) if workload else [], "podCount": workload.pod_count if workload else 0},
            "templates": [{"name": t.name, "podCount": t.pod_count, "hasPodSpec": t.spec is not None,
                           "spec": t.spec if t.spec is not None else {}, "metadata": t.metadata,
                           "containers": [c.obj for c in t.containers]} for t in templates],
        }
        where = f"{resource.origin.file} #{resource.origin.document} {resource.describe()}"
        yield where, "object", variables
        for template in templates:
            at_pod = dict(variables, pod=template.spec if template.spec is not None else {},
                          podMeta=template.metadata, template=template.name,
                          templateDevices=template_devices(template, classification) if workload else [],
                          podResources=pod_resources(template))
            yield f"{where}, template {template.name!r}", "pod", at_pod
            for c in template.containers:
                yield (f"{where}, template {template.name!r}, {c.section} {c.name!r}", "container",
                       dict(at_pod, container=c.obj, containerType=c.section, containerName=c.name,
                            injected=c.injected))


MAP_ORDER = "a map's iteration order is unspecified (Rust's: hash order; native's: the document's)"
# (expression, site) where the spec's exists() absorbs an error that another element decides, and Rust raises it
ABSORBED = {("shm-sized/add-volume mutation/when", "Pod malformed")}  # one container's `volumeMounts: "x"`


def legit_difference(label: str, where: str, source: str, result, expected):
    """Why two different outcomes are both right (one of the known differences), or None."""
    ordered = isinstance(result, (str, list)) and type(result) is type(expected) and any(
        macro in source for macro in (".map(", ".filter("))
    if ordered and sorted(map(repr, result)) == sorted(map(repr, expected)):
        return MAP_ORDER  # a list taken out of a map, or a string joined from one, in another order
    if raised(expected) and isinstance(result, bool) and any(label == k and s in where for k, s in ABSORBED):
        return _ABSORB
    return None


def test_policy_expressions_agree_with_reference_over_the_corpus():
    programs = {"object": [], "pod": [], "container": []}
    for label, source in policy_expressions():  # each at the level of the variables it reads
        theirs = cel.compile(source)
        names = set(theirs.variables())
        level = "container" if names & _CONTAINER else "pod" if names & _POD else "object"
        programs[level].append((label, source, compile_native(source, FUNCTIONS), theirs))
    counts = {"evaluations": 0, True: 0, False: 0, "errors": 0, "object": 0, "pod": 0, "container": 0}
    mismatches, legit = [], {}
    resources = load_paths([CORPUS]).resources + load_text(HANDMADE, "<handmade>").resources  # unparseable: skipped
    for where, level, variables in sites(resources, Config().classification):
        counts[level] += 1
        context = reference_context(variables)  # one per site: every binding makes the reference convert again
        for label, source, mine, theirs in programs[level]:
            result, expected = _outcome(mine.execute, variables), _outcome(theirs.execute, context)
            counts["evaluations"] += 1
            if raised(result) or isinstance(result, bool):
                counts["errors" if raised(result) else result] += 1
            if same(result, expected):
                continue
            report = (f"{label} on {where}:\n    {source[:300]}\n    native {result!r:.300}\n"
                      f"    reference {expected!r:.300}")
            reason = legit_difference(label, where, source, result, expected)
            (mismatches if reason is None else legit.setdefault(reason, [])).append(report)
    for reason, reports in legit.items():  # in every run's warnings summary: known, never silent
        warnings.warn(f"{len(reports)} legitimate difference(s), {reason}; the first:\n{reports[0]}")
    assert not mismatches, f"{len(mismatches)} disagreements, the first ones:\n" + "\n".join(mismatches[:10])
    assert counts["evaluations"] > 5000 and counts[True] > 500 and counts[False] > 500, counts
    assert counts["container"] > 100 and counts["pod"] > 100, counts


def test_every_policy_expression_compiles_natively():  # Unsupported or a syntax error: the engine would fall back
    compiled = [(label, source, _outcome(compile_native, source, FUNCTIONS)) for label, source in policy_expressions()]
    problems = [f"{label}: {program!r}\n    {source[:200]}" for label, source, program in compiled if raised(program)]
    assert not problems, "\n".join(problems)
