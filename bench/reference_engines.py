"""Choosing the reference CEL engine (the differential oracle of tests/test_celnative.py and the fallback of
webhook/cel/environment.py) by measurement: the Rust-backed `common-expression-language` (a dependency today)
against Google's C++ `cel-expr-python`, in the same run.

    pip install cel-expr-python==0.1.3          # bench-only: not a dependency of aiadmit
    python3 bench/reference_engines.py [--seconds 2] [--skip-conformance] [--skip-hostile]

Measures, for each engine:
  - install size (the files of its distribution) and import time (a fresh interpreter, median of 5);
  - compile time per expression of the built-in bundle (cel-expr-python type-checks against declared dyn
    variables and aiadmit's functions declared with concrete overloads, as it cannot dispatch a dyn parameter);
  - evaluation time of the bundle's expressions over the variables the engine really binds while it evaluates
    bench/engine.py's objects (captured from the native runs), binding them afresh per run as the fallback does,
    and how many answers agree with aiadmit's compiled path;
  - pass counts on the CEL conformance files (tests/data/cel-spec, read with tests/celspec.py, skipped as
    tests/test_celconformance.py skips), each file in a subprocess so that a crash costs one file;
  - the hostile shapes of tests/test_celbounds.py and the deep `+` chains, each in a subprocess with a timeout:
    which answer, which raise, which crash the process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, os.path.join(REPO, "tests"), HERE]

ENGINES = ("rust", "cpp")
NAMES = {"rust": "common-expression-language (Rust)", "cpp": "cel-expr-python (C++)"}
DISTRIBUTIONS = {"rust": "common-expression-language", "cpp": "cel-expr-python"}
IMPORTS = {"rust": "from webhook.cel.reference import cel",
           "cpp": "from cel_expr_python import cel; from cel_expr_python.ext import ext_strings, ext_math, "
                  "ext_optional, ext_bindings"}
ERROR = object()  # an outcome: the engine raised or answered an error value


# ---------------------------------------------------------------------------------------------- the engines
class Rust:
    def __init__(self, names=()):
        from webhook.cel.library import CALLABLES
        from webhook.cel.reference import cel

        self.cel, self.functions = cel, CALLABLES

    def compile(self, source: str, disable_check: bool = False):
        return self.cel.compile(source)

    def run(self, program, variables: dict):
        context = self.cel.Context()
        for name, function in self.functions.items():
            context.add_function(name, function)
        for name, value in variables.items():
            context.add_variable(name, value)
        return program.execute(context)


def _cpp_kinds(cel, kind: str) -> list:
    dyn_list, dyn_map = cel.Type.List(cel.Type.DYN), cel.Type.Map(cel.Type.DYN, cel.Type.DYN)
    every = [cel.Type.STRING, cel.Type.INT, cel.Type.DOUBLE, cel.Type.BOOL, dyn_list, dyn_map]
    return {"string": [cel.Type.STRING], "int": [cel.Type.INT], "double": [cel.Type.DOUBLE],
            "number": [cel.Type.INT, cel.Type.UINT, cel.Type.DOUBLE], "quantity": [cel.Type.DOUBLE],
            "list": [dyn_list], "map": [dyn_map], "bool": [cel.Type.BOOL]}.get(kind, every)


class Cpp:
    """cel-expr-python with the extensions Kubernetes enables that it ships, aiadmit's functions declared."""

    def __init__(self, names=()):
        import itertools

        from cel_expr_python import cel
        from cel_expr_python.ext import ext_bindings, ext_math, ext_optional, ext_strings

        from webhook.cel.library import FUNCTIONS

        self.cel = cel
        self.extensions = [ext_strings.ExtStrings(), ext_math.ExtMath(), ext_optional.ExtOptional(),
                           ext_bindings.ExtBindings()]
        declared, self.undeclared, overload_counts = [], [], []
        for name, function in FUNCTIONS.items():
            overloads = []
            for shape in function.args:
                if "optional" in shape:
                    continue
                members = [True] if function.member is True or (function.member is None and len(shape) > 1) \
                    else [False] if function.member is False else [False, True]
                kinds = [_cpp_kinds(cel, kind) for kind in shape]
                if math.prod(len(k) for k in kinds) * len(members) > 100:
                    overloads = []
                    break
                for member in members:
                    for types in itertools.product(*kinds):
                        overloads.append(cel.Overload(f"{name}_{len(overloads)}", cel.Type.DYN, list(types),
                                                      is_member=member, impl=function.call))
            if not overloads or len(overloads) > 100:  # the checker's cost grows with the overloads' square
                self.undeclared.append(name)
                continue
            decl = cel.FunctionDecl(name, overloads)
            try:  # the C++ library may have the function already (strings, math): then its own is used
                cel.NewEnv(extensions=self.extensions, functions=[decl]).compile("1")
                declared.append(decl)
                overload_counts.append(overloads)
            except Exception:  # noqa: BLE001 - a clash with a built-in
                self.undeclared.append(name)
        start = time.perf_counter()
        self.env = cel.NewEnv(variables={name: cel.Type.DYN for name in names}, extensions=self.extensions,
                              functions=declared)
        self.env.compile("1")  # the environment is built on first use
        self.env_seconds = time.perf_counter() - start
        self.overloads = sum(len(d_overloads) for d_overloads in overload_counts)

    def compile(self, source: str, disable_check: bool = False):
        return self.env.compile(source, disable_check=disable_check)

    def run(self, program, variables: dict):
        value = program.eval(data=variables)
        if value.type() == self.cel.Type.ERROR:
            raise RuntimeError(str(value))
        return value.plain_value()


def engine(name: str, names=()):
    return (Rust if name == "rust" else Cpp)(names)


def outcome(function, *args):
    try:
        return function(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - the Rust binding's panics derive from BaseException
        return ERROR


def plain(value):
    """A value in one comparable form: uint as int, a type as its name, lists and maps all the way down."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {(type(plain(k)).__name__, plain(k)): plain(v) for k, v in value.items()}
    name = getattr(value, "name", None)
    return ("type", name() if callable(name) else name) if name is not None else ("?", str(value))


def agree(a, b) -> bool:
    if a is ERROR or b is ERROR:
        return a is b
    a, b = plain(a), plain(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return a == b
    if isinstance(a, tuple) and isinstance(b, str):  # a type value: Rust answers its name as a string
        return a[1] == b
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------- the bundle
def captured() -> list:
    """(source, variables) of every expression run while the engine evaluates and mutates bench/engine.py's
    objects with the built-in bundle: the variables as bound, a policy's named `variables` as their values."""
    import copy

    from engine import GPU_POD, PLAIN_POD, PYTORCH_JOB
    from webhook.cel import environment
    from webhook.engine.core import Engine
    from webhook.model.resource import Resource

    runs, original, inside = [], environment.Expression.run, []

    def recording(self, context):
        if inside:  # a named variable evaluated while its reader is captured
            return original(self, context)
        inside.append(True)
        try:
            runs.append((self.compiled, bound_of(self, context)))
        finally:
            inside.pop()
        return original(self, context)

    def bound_of(self, context):
        bound = {}
        for name in self.variables:
            if name not in context:
                continue
            value = context[name]
            if name == "variables":
                value = {n: v for n in value.programs for v in [outcome(value.get, n)] if v is not ERROR}
            bound[name] = copy.deepcopy(value)
        return bound

    engine_ = Engine.load()
    environment.Expression.run = recording
    try:
        for obj in (GPU_POD, PYTORCH_JOB, PLAIN_POD):
            engine_.evaluate(Resource(copy.deepcopy(obj)))
            engine_.mutate(Resource(copy.deepcopy(obj)))
    finally:
        environment.Expression.run = original
    return runs


def bundle_sources() -> list:
    from webhook.language.bundle import BUILTIN_POLICY_DIR
    from webhook.language.config import Config
    from webhook.language.loader import load_policies

    return sorted({e.compiled for p in load_policies([BUILTIN_POLICY_DIR], Config().params()) for e in p.expressions()})


def timed(function, rounds: int = 5) -> float:
    """Median seconds of `rounds` calls (the machine is shared)."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure_bundle(seconds: float) -> dict:
    from webhook.cel.environment import FUNCTIONS
    from webhook.cel.compiler import compile_native

    sources, runs = bundle_sources(), captured()
    names = sorted({n for _, bound in runs for n in bound} | {"object", "oldObject", "request", "namespaceObject",
                                                              "workload", "templates", "cluster", "pod", "podMeta",
                                                              "template", "templateDevices", "podResources", "container",
                                                              "containerType", "containerName", "injected",
                                                              "envFrom", "variables", "params"})
    native = {s: compile_native(s, FUNCTIONS) for s in {s for s, _ in runs}}
    expected = [outcome(native[s].execute, dict(bound)) for s, bound in runs]
    out = {"expressions": len(sources), "evaluations": len(runs)}
    for name in ENGINES:
        this = engine(name, names)
        programs, failed = {}, []
        compile_times = []
        for source in sources:
            start = time.perf_counter()
            program = outcome(this.compile, source)
            compile_times.append(time.perf_counter() - start)
            (failed.append(source) if program is ERROR else programs.__setitem__(source, program))
        usable = [(s, b) for s, b in runs if s in programs]

        def run_all():
            for source, bound in usable:
                outcome(this.run, programs[source], bound)
        rounds = max(3, int(seconds / max(timed(run_all, 1), 1e-6)))
        per_run = timed(run_all, min(rounds, 15)) / max(len(usable), 1)
        answers = [outcome(this.run, programs[s], b) if s in programs else ERROR for s, b in runs]
        out[name] = {
            "compile_median_us": 1e6 * statistics.median(compile_times),
            "compile_total_ms": 1e3 * sum(compile_times),
            "compile_failures": len(failed), "failed_examples": failed[:3],
            "eval_per_run_us": 1e6 * per_run, "evaluated": len(usable),
            "agree_with_native": sum(agree(a, b) for a, b, (s, _) in zip(answers, expected, runs) if s in programs),
            "undeclared_functions": getattr(this, "undeclared", []),
        }
    return out


# ---------------------------------------------------------------------------------------------- install, import
def install(name: str) -> dict:
    distribution = metadata.distribution(DISTRIBUTIONS[name])
    size = sum(f.size or 0 for f in distribution.files or ())
    times = []
    for _ in range(5):
        code = f"import time; t = time.perf_counter(); {IMPORTS[name]}; print(time.perf_counter() - t)"
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        times.append(float(done.stdout.strip() or "nan"))
    return {"version": distribution.version, "install_mb": size / 1e6, "import_ms": 1e3 * statistics.median(times)}


# ---------------------------------------------------------------------------------------------- conformance
def conformance_file(name: str, path: str) -> dict:
    """Pass/fail/skip of one engine on one conformance file (run in a subprocess by `conformance`)."""
    import celspec
    from test_celconformance import skip_reason

    counts = {"pass": 0, "fail": 0, "skip": 0}
    document = celspec.parse(open(path, encoding="utf-8").read())
    tests = [t for section in document.get("section", []) for t in section.get("test", [])]
    declared = sorted({celspec._one(env, "name").decode() for t in tests for env in t.get("type_env", [])
                       if "ident" in env} | {celspec._one(b, "key").decode() for t in tests
                                             for b in t.get("bindings", [])})
    this = engine(name, declared)
    for test in tests:
        if skip_reason(test):
            counts["skip"] += 1
            continue
        try:
            bindings = {celspec._one(b, "key").decode(): celspec.value(celspec._one(celspec._one(b, "value"), "value"))
                        for b in test.get("bindings", [])}
            wants_error = "eval_error" in test or "any_eval_errors" in test
            expected = ERROR if wants_error else celspec.value(test["value"][0]) if "value" in test else True
        except celspec.Unrepresentable:
            counts["skip"] += 1
            continue
        source = test["expr"][0].decode("utf-8", "surrogatepass")
        unchecked = test.get("disable_check", ["false"])[0] == "true"
        program = outcome(this.compile, source, unchecked)
        got = program if program is ERROR else outcome(this.run, program, bindings)
        counts["pass" if agree(got, expected) else "fail"] += 1
    return counts


def conformance(timeout: float = 300) -> dict:
    import glob

    from test_celconformance import CORE, KUBERNETES_EXTENSIONS

    out: dict = {}
    paths = sorted(glob.glob(os.path.join(REPO, "tests", "data", "cel-spec", "testdata", "*.textproto")))
    for name in ENGINES:
        per_file = {}
        for path in paths:
            file = os.path.basename(path)[:-len(".textproto")]
            code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import reference_engines as r; "
                    f"print(json.dumps(r.conformance_file({name!r}, {path!r})))")
            try:
                done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                      timeout=timeout)
                per_file[file] = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {
                    "crashed": done.returncode}
            except subprocess.TimeoutExpired:
                per_file[file] = {"timeout": timeout}
            except (ValueError, IndexError):
                per_file[file] = {"crashed": "no output"}
        groups = {}
        for group, files in (("core", CORE), ("kubernetes ext", KUBERNETES_EXTENSIONS)):
            passed = sum(per_file.get(f, {}).get("pass", 0) for f in files)
            failed = sum(per_file.get(f, {}).get("fail", 0) for f in files)
            groups[group] = (passed, passed + failed)
        out[name] = {"files": per_file, "groups": groups,
                     "crashed": sorted(f for f, c in per_file.items() if "crashed" in c or "timeout" in c)}
    return out


# ---------------------------------------------------------------------------------------------- hostile shapes
def _hostile_sources() -> dict:
    from test_celbounds import DOUBLING, NESTED

    shapes = {f"+ chain of {n:,} terms": " + ".join(["1"] * n) for n in (30, 100, 1_000, 5_000, 15_000, 40_000)}
    shapes.update({"three nested all() over 400 containers": NESTED, "a string doubled 9 times": DOUBLING,
                   'matches("(a+)+$") over 27 characters': 'container.name.matches("(a+)+$")'})
    return shapes


def hostile_one(name: str, shape: str) -> None:
    """Compile then run one hostile shape, printing each stage as it ends (the parent reads how far it got)."""
    from test_celbounds import _context

    context = dict(_context())
    context["container"] = dict(context["container"], name="a" * 27 + "!")
    source = _hostile_sources()[shape]
    this = engine(name, ["pod", "container"])
    start = time.perf_counter()
    try:
        program = this.compile(source)
    except BaseException as exc:  # noqa: BLE001
        print(f"compile error ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})", flush=True)
        return
    print(f"compiled in {1e3 * (time.perf_counter() - start):.0f} ms", flush=True)
    start = time.perf_counter()
    try:
        value = this.run(program, {"pod": context["pod"], "container": context["container"]})
        print(f"ran in {1e3 * (time.perf_counter() - start):.0f} ms: {str(value)[:30]}", flush=True)
    except BaseException as exc:  # noqa: BLE001
        print(f"run error in {1e3 * (time.perf_counter() - start):.0f} ms ({type(exc).__name__}: "
              f"{str(exc).splitlines()[0][:80] if str(exc) else ''})", flush=True)


def hostile(timeout: float = 20) -> dict:
    out: dict = {}
    for shape in _hostile_sources():
        for name in ENGINES:
            code = (f"import sys; sys.path.insert(0, {HERE!r}); import reference_engines as r; "
                    f"r.hostile_one({name!r}, {shape!r})")
            try:
                done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                      timeout=timeout)
                stages = "; ".join(done.stdout.strip().splitlines())
                if done.returncode < 0:
                    stages += f"; CRASHED (signal {-done.returncode})"
                elif done.returncode:
                    stages += f"; exited {done.returncode}"
            except subprocess.TimeoutExpired as exc:
                text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                stages = "; ".join(text.strip().splitlines() + [f"still running after {timeout:.0f} s (killed)"])
            out.setdefault(shape, {})[name] = stages
    return out


# ---------------------------------------------------------------------------------------------- report
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--skip-conformance", action="store_true")
    parser.add_argument("--skip-hostile", action="store_true")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"{'':<40} {NAMES['rust']:>36} {NAMES['cpp']:>26}")
    sizes = {name: install(name) for name in ENGINES}
    for key, label in (("version", "version"), ("install_mb", "installed size, MB"), ("import_ms", "import, ms")):
        print(f"{label:<40} {sizes['rust'][key]:>36} {sizes['cpp'][key]:>26}" if key == "version" else
              f"{label:<40} {sizes['rust'][key]:>36.1f} {sizes['cpp'][key]:>26.1f}")
    bundle = measure_bundle(args.seconds)
    print(f"bundle: {bundle['expressions']} expressions; {bundle['evaluations']} evaluations captured")
    for key, label, form in (("compile_median_us", "compile, median µs per expression", ".0f"),
                             ("compile_total_ms", "compile, whole bundle, ms", ".1f"),
                             ("compile_failures", "expressions that do not compile", "d"),
                             ("eval_per_run_us", "evaluation with fresh binding, µs per run", ".1f"),
                             ("evaluated", "evaluations run", "d"),
                             ("agree_with_native", "answers equal to the compiled path's", "d")):
        print(f"{label:<40} {bundle['rust'][key]:>36{form}} {bundle['cpp'][key]:>26{form}}")
    print("cpp: functions left undeclared (a name the C++ library has, or too many overloads):",
          ", ".join(bundle["cpp"]["undeclared_functions"]))
    print("cpp: bundle expressions not compiled, e.g.:", *(s[:100].replace("\n", " ")
                                                         for s in bundle["cpp"]["failed_examples"]), sep="\n  ")
    if not args.skip_conformance:
        found = conformance()
        for group in ("core", "kubernetes ext"):
            cells = [f"{found[n]['groups'][group][0]}/{found[n]['groups'][group][1]}" for n in ENGINES]
            print(f"conformance {group + ', pass/runnable':<28} {cells[0]:>36} {cells[1]:>26}")
        for file in sorted(found["rust"]["files"]):
            cells = [found[n]["files"].get(file, {}) for n in ENGINES]
            text = [f"{c['pass']}/{c['pass'] + c['fail']}" if "pass" in c else str(c) for c in cells]
            print(f"  {file:<38} {text[0]:>36} {text[1]:>26}")
    if not args.skip_hostile:
        for shape, by_engine in hostile().items():
            print(f"hostile: {shape}")
            for name in ENGINES:
                print(f"  {name:<5} {by_engine[name]}")


if __name__ == "__main__":
    main()
