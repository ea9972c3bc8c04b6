"""No import cycle in the package, lazy imports included (issue 36): an AST scan of every module.

import-linter's contracts (``test_layers.py``) keep the layers; this scan reads every ``import``
statement, at module level or inside a function (a *lazy* import, which breaks a cycle at import
time but not in the design), and finds the cycles among modules and among sibling packages.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import optcoll

PACKAGE = Path(optcoll.__file__).resolve().parent


class ImportGraph:
    """Module → the package modules it imports (module level and lazy), from the source alone."""

    def __init__(self, root: Path):
        self.files = {_name(p, root.parent): p for p in sorted(root.rglob("*.py"))}
        self.packages = {name for name, path in self.files.items() if path.name == "__init__.py"}
        self.edges: dict[str, set[str]] = {name: set() for name in self.files}
        self.lazy = 0  # import statements inside a function or a class, to a package module
        for name, path in self.files.items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            top = {id(node) for node in tree.body}
            for node in ast.walk(tree):
                targets = {t for t in self._targets(name, node) if t is not None and t != name}
                self.edges[name] |= targets
                if targets and id(node) not in top and not _guarded(tree, node):
                    self.lazy += 1

    def _module(self, dotted: str) -> str | None:
        while dotted and dotted not in self.files:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def _targets(self, name: str, node: ast.AST) -> Iterable[str | None]:
        if isinstance(node, ast.Import):
            return [self._module(a.name) for a in node.names if a.name.split(".")[0] == "optcoll"]
        if not isinstance(node, ast.ImportFrom):
            return []
        base = node.module or ""
        if node.level:
            package = name if name in self.packages else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        if base.split(".")[0] != "optcoll":
            return []
        return [self._module(f"{base}.{a.name}" if f"{base}.{a.name}" in self.files else base) for a in node.names]

    def cycles(self) -> list[list[str]]:
        """Every set of modules that import each other round a cycle (strongly connected, > 1)."""
        return _cycles(sorted(self.files), self.edges)

    def sibling_cycles(self) -> list[list[str]]:
        """Per package, the cycles among its subpackages (each taken whole, with what is under it)."""
        found = []
        for parent in sorted(self.packages):
            kids = [p for p in sorted(self.packages) if p.rpartition(".")[0] == parent]

            def unit(module: str) -> str | None:
                return next((k for k in kids if module == k or module.startswith(k + ".")), None)
            edges: dict[str, set[str]] = {k: set() for k in kids}
            for a, targets in self.edges.items():
                for b in targets:
                    ua, ub = unit(a), unit(b)
                    if ua is not None and ub is not None and ua != ub:
                        edges[ua].add(ub)
            found += _cycles(kids, edges)
        return found


def _name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _guarded(tree: ast.Module, node: ast.AST) -> bool:
    """An import under ``if TYPE_CHECKING:`` at module level (never run)."""
    return any(isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test) and node in ast.walk(top)
               for top in tree.body)


def _cycles(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, targets = work[-1]
            w = next(targets, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return found


GRAPH = ImportGraph(PACKAGE)


def test_no_module_is_in_an_import_cycle_lazy_imports_included():
    assert GRAPH.lazy > 100  # the scan reads imports inside functions (208 when written)
    assert GRAPH.cycles() == []


def test_no_two_sibling_packages_import_each_other():
    """E.g. ``producers.exact.timed`` and ``producers.exact.allreduce``: one builds on the other."""
    assert GRAPH.sibling_cycles() == []


def test_a_cycle_closed_by_a_lazy_import_is_found(tmp_path):
    root = tmp_path / "optcoll"
    (root / "low").mkdir(parents=True)
    (root / "high").mkdir()
    for package in (root, root / "low", root / "high"):
        (package / "__init__.py").write_text("")
    (root / "low" / "a.py").write_text("def f():\n    from optcoll.high import b\n    return b\n")
    (root / "high" / "b.py").write_text("from optcoll.low.a import f\n")
    graph = ImportGraph(root)
    assert graph.lazy == 1
    assert graph.cycles() == [["optcoll.high.b", "optcoll.low.a"]]
    assert graph.sibling_cycles() == [["optcoll.high", "optcoll.low"]]
    (root / "low" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from optcoll.high import b\n")
    assert ImportGraph(root).lazy == 0
