"""gatecast/web imports one way: no cycle among its modules, counting the imports made
inside functions (a lazy import hides a cycle from Python, not from the reader)."""

from __future__ import annotations

import ast
from pathlib import Path

WEB = Path(__file__).resolve().parents[2] / "gatecast" / "web"


def _modules(web: Path) -> dict[str, Path]:
    found = {}
    for path in web.rglob("*.py"):
        parts = path.relative_to(web.parents[1]).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours ``name`` is, or lies in (``a.b.c`` -> ``a.b`` if only that is)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(web: Path = WEB) -> dict[str, set[str]]:
    """Each module of gatecast/web -> the modules of gatecast/web it imports anywhere in
    its body (a package's implicit import of its parent is not counted)."""
    modules = _modules(web)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*kept, base] if base else kept)
                targets = [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                known = _known(target, modules)
                if known is not None and known != name:
                    graph[name].add(known)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    """A lazy import of the kind that once hid a 14-module cycle is an edge here."""
    web = tmp_path / "gatecast" / "web"
    (web / "api").mkdir(parents=True)
    (web / "__init__.py").write_text("")
    (web / "api" / "__init__.py").write_text("")
    (web / "problems.py").write_text("def page():\n    from gatecast.web.api import routes\n")
    (web / "api" / "routes.py").write_text("from ..problems import page\n")
    graph = import_graph(web)
    assert graph["gatecast.web.problems"] == {"gatecast.web.api.routes"}
    assert graph["gatecast.web.api.routes"] == {"gatecast.web.problems"}
    assert cycles(graph) == [["gatecast.web.api.routes", "gatecast.web.problems"]]


def test_gatecast_web_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "\n".join(" -> ".join(c) for c in found)
