"""The package's layers: every import goes downward (or within a layer), no module imports itself back, no
module grows past about 400 lines, and no test module imports another (docs/architecture.md draws the layers).

Imports are read from the source with `ast`, wherever they stand: at the top, inside a function, or under
`if TYPE_CHECKING:`, so a function-local import cannot hide an upward arrow.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "webhook")
LAYERS = ("model", "k8s", "cel", "inputs", "language", "engine", "outputs", "app")  # bottom to top
MAX_LINES = 420  # "about 400": a module past it does more than one job


def _modules() -> dict[str, str]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for directory, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: str, dotted: str) -> set[str]:
    """The package's modules that `path` imports, each as the most specific module name that exists."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != dotted:
                out.add(name)
    # `from webhook.x import y` also names the package webhook.x: keep only the most specific of a chain
    return {name for name in out if not any(other.startswith(name + ".") for other in out)}


GRAPH = {dotted: _imports(path, dotted) for dotted, path in MODULES.items()}


def _rank(dotted: str) -> int:
    parts = dotted.split(".")
    if len(parts) == 1:
        return -1  # the package's face: its version and nothing else (it imports nothing)
    if parts[1] not in LAYERS:
        return len(LAYERS)  # __main__: above everything
    return LAYERS.index(parts[1])


def _layer(dotted: str) -> str:
    rank = _rank(dotted)
    return LAYERS[rank] if 0 <= rank < len(LAYERS) else ("top" if rank >= 0 else "face")


def test_every_module_belongs_to_a_layer():
    loose = [m for m in MODULES if m.count(".") == 1 and m.split(".")[1] not in LAYERS
             and m not in ("webhook.__main__", "webhook.policies")]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def test_the_package_face_imports_nothing():
    assert GRAPH["webhook"] == set()


def test_imports_only_go_downward():
    upward = [f"{module} ({_layer(module)}) imports {target} ({_layer(target)})"
              for module, targets in sorted(GRAPH.items()) for target in sorted(targets)
              if _rank(target) > _rank(module)]
    assert not upward, "\n".join(upward)


def test_no_module_imports_itself_back():
    cycles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    with open(MODULES[module], encoding="utf-8") as handle:
        lines = sum(1 for _ in handle)
    assert lines <= MAX_LINES, f"{module} has {lines} lines: split it by job"


def test_no_test_module_imports_another():
    here = os.path.dirname(os.path.abspath(__file__))
    offenders = []
    for directory, _, files in os.walk(here):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(directory, name)
                for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
                    targets = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                    offenders += [f"{os.path.relpath(path, here)} imports {t}" for t in targets
                                  if t.split(".")[-1].startswith("test_")]
    assert not offenders, "\n".join(offenders)


def test_the_checker_sees_an_upward_and_a_function_local_import(tmp_path, monkeypatch):
    # The test itself could pass by seeing nothing: a model module with a function-local import of the engine
    # must be reported, and so must the cycle it closes.
    source = "def f():\n    from webhook.engine.core import Engine\n    return Engine\n"
    path = tmp_path / "probe.py"
    path.write_text(source)
    monkeypatch.setitem(MODULES, "webhook.model.probe", str(path))
    found = _imports(str(path), "webhook.model.probe")
    assert found == {"webhook.engine.core"}
    assert _rank("webhook.engine.core") > _rank("webhook.model.probe")
