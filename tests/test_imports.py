"""Loupe's own import graph, built from the source with ast (imports inside functions
count): no cycles, and every edge points down the layers app -> annotate -> db -> agent,
training -> annotate, agent. The app calls no store method itself."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "db", "annotate", "app", "training", "bench", "commands")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module an import of `name` loads (a name inside a module maps to the module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, anywhere in its body (functions included).

    Importing `a.b.c` also runs `a` and `a.b`; those package edges are kept too, except a
    module's own parent packages (Python has already started them when it runs the module).
    """
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod if is_pkg else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                names = [f"{base}.{a.name}" for a in node.names] or [base]
            for name in names:
                target = _resolve(name, modules)
                if target is None or target == mod:
                    continue
                parents = {".".join(target.split(".")[:i]) for i in range(1, target.count(".") + 1)}
                own = {".".join(mod.split(".")[:i]) for i in range(1, mod.count(".") + 2)}
                for t in {target} | parents:
                    if t in modules and t not in own:
                        graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_imports_inside_functions():
    g = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert cycles(g) == [["a", "b"]]
    graph = import_graph()
    assert "agent.protocol" in graph["agent.trajectory"]
    assert "agent.formats" in graph["agent.refs"]  # imported inside a function


def test_no_import_cycle():
    bad = cycles(import_graph())
    assert not bad, "import cycles: " + "; ".join(" <-> ".join(c) for c in bad)


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m.split(".")[0] == "agent"))
def test_every_module_imports(module):
    importlib.import_module(module)


# package -> the packages its modules may import. `commands` (one thin module per command)
# may import anything; only launch.py and the tests import it. `bench` holds scripts.
MAY_IMPORT = {
    "agent": {"agent"},
    "db": {"db", "agent"},
    "annotate": {"annotate", "db", "agent"},
    "training": {"training", "annotate", "agent"},
    "app": {"app", "annotate", "db", "agent"},
    "bench": {"bench", "agent", "db", "annotate", "app", "training", "commands"},
    "commands": {"commands", "agent", "db", "annotate", "app", "training"},
}


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, imported module) pairs that point up the layers; a package started only
    on the way to one of its modules is left out (the module names the edge)."""
    bad = set()
    for mod, targets in graph.items():
        allowed = MAY_IMPORT[mod.split(".")[0]]
        for t in targets:
            deeper = any(u.startswith(t + ".") for u in targets)
            if t.split(".")[0] not in allowed and not deeper:
                bad.add((mod, t))
    return bad


def test_the_direction_check_sees_an_upward_import():
    graph = {"db.store.core": {"annotate.review"}, "annotate.review": {"db.store.core"}}
    assert upward_imports(graph) == {("db.store.core", "annotate.review")}


def test_imports_point_down_the_layers():
    bad = sorted(upward_imports(import_graph()))
    assert not bad, "imports against the layers: " + "; ".join(f"{a} -> {b}" for a, b in bad)


def test_the_app_calls_no_store_method():
    """Pages read through `ctx.read` (annotate.reads) and write through annotate; a call
    `<x>.store.<method>(...)` or `store.<method>(...)` in app/ bypasses both."""
    calls = []
    for path in sorted((REPO / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if name in ("store", "_store"):
                calls.append(f"{path.relative_to(REPO)}:{node.lineno} {name}.{node.func.attr}")
    assert not calls, "the app calls the store directly: " + ", ".join(calls)


def test_the_store_depends_on_no_policy():
    """The store ranks and keeps what it is given; no db module imports a policy's code."""
    graph = import_graph()
    users = {m for m, ts in graph.items() if m.startswith("db") and any(
        t.startswith("agent.policies") for t in ts)}  # fmt: skip
    assert users == set(), sorted(users)


def test_the_workflow_layer_shows_its_rooms():
    """annotate/'s top level reads as the workflow: a few modules and a package per stage,
    under 12 entries (its __init__ and caches aside), so a new module joins a room."""
    top = [p.name for p in (REPO / "annotate").iterdir()
           if p.name not in ("__init__.py", "__pycache__")]  # fmt: skip
    assert len(top) < 12, sorted(top)
