"""One name, one meaning: no two modules of the package define a public class of the same name
(a reader who meets ``Plan`` or ``Finding`` should not have to ask which one). Names still shared
are listed here with the reason; the list only shrinks."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import optcoll

PACKAGE = Path(optcoll.__file__).resolve().parent

#: Public class names defined in more than one module, and why that is allowed for now.
SHARED: dict[str, str] = {
    "Row": "analysis/expect (a prediction row) and interop/nccltests (a parsed output row): both are "
           "a colleague's area in flight; rename when it lands",
}


def public_classes() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(PACKAGE)))
    return where


def test_no_public_class_name_is_defined_twice():
    shared = {name: paths for name, paths in public_classes().items() if len(paths) > 1}
    assert {name: paths for name, paths in shared.items() if name not in SHARED} == {}
    assert not set(SHARED) - set(shared), "a listed name is no longer shared: drop it from SHARED"
