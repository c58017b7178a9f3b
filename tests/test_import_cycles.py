"""No cycles of module-level imports among podsim's modules.

The graph: one node per module of ``src/podsim`` (a package is its ``__init__``); an edge for
every import that runs when the module is first imported -- at module level, in a class body,
or under a module-level ``if`` / ``try`` / ``with``, but not inside a function and not under
``if TYPE_CHECKING:``.  An import names its edges as Python loads them:

* ``import a.b.c`` and ``from a.b.c import x`` load ``a.b.c``, and first the packages ``a`` and
  ``a.b`` that hold it (their ``__init__`` runs before ``a.b.c``);
* ``from a.b import c`` also loads ``a.b.c`` when ``c`` is a module (``from . import x`` too);
* a module's own packages are no edges (Python runs them before the module itself), and
  neither is ``podsim.api`` as the package holding another module: ``podsim/__init__.py`` loads
  ``podsim.api`` before any other module can run, so reaching one of its submodules never starts
  it (``from podsim.api import name`` still is an edge: it needs a name the package defines).

A cycle in that graph is a module that can see another half-built, an order-dependent import
error waiting for the day someone moves an import.  The test lists every elementary cycle,
each from its first module in sorted order.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "podsim"

#: packages a module may reach without starting them (see the module docstring)
ALWAYS_STARTED = frozenset({"podsim.api"})

#: known cycles outside podsim's import rules, each ``a -> b -> ... -> a`` from its first module
#: in sorted order, with the reason it is allowed for now; the aim is an empty set
ALLOWED: dict[str, str] = {}

#: the most cycles listed (the search stops there)
MAX_CYCLES = 200


def _module(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (not those in functions, nor
    under ``if TYPE_CHECKING:``)."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return out


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the podsim modules its module-level imports load (rules: the module docstring)."""
    paths = {_module(p, src): p for p in sorted(src.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in module_level_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [(a.name, True) for a in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [(target, True)] + [(f"{target}.{a.name}", False) for a in node.names]
            for target, named in targets:
                if target.split(".")[0] != "podsim" or target not in paths and not named:
                    continue
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    loaded = ".".join(parts[:i])
                    if loaded not in paths or loaded == name or name.startswith(loaded + "."):
                        continue  # not a module, itself, or one of its own packages
                    if loaded != target and loaded in ALWAYS_STARTED:
                        continue  # a package podsim/__init__.py has started already
                    edges.add(loaded)
        graph[name] = edges
    return graph


def components(graph: dict[str, set[str]]) -> dict[str, int]:
    """Module -> its strongly connected component (Tarjan's algorithm, without recursion): a
    cycle never leaves one component, so the search for cycles stays inside each."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    comp: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp[x] = index[v]
                    if x == v:
                        break
    return comp


def cycles(graph: dict[str, set[str]], limit: int = MAX_CYCLES) -> list[list[str]]:
    """Every elementary cycle of ``graph`` (at most ``limit``), each from its smallest module:
    a depth-first search from each module through larger ones of its own strongly connected
    component only, so each cycle is found once (and an acyclic graph costs no search)."""
    comp = components(graph)
    found: list[list[str]] = []
    for start in sorted(graph):
        c = comp[start]
        path, on_path = [start], {start}
        stack = [iter(sorted(w for w in graph[start] if w >= start and comp.get(w) == c))]
        while stack and len(found) < limit:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
            elif nxt == start:
                found.append(list(path))
            elif nxt not in on_path:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(w for w in graph.get(nxt, ()) if w >= start and comp.get(w) == c)))
    return found


def _text(cycle: list[str]) -> str:
    return " -> ".join(cycle + cycle[:1])


def test_no_module_level_import_cycles() -> None:
    found = {_text(c) for c in cycles(import_graph())}
    new = sorted(found - set(ALLOWED))
    assert not new, "cycles of module-level imports:\n" + "\n".join(new)


def test_the_allow_list_holds_only_cycles_that_still_exist() -> None:
    found = {_text(c) for c in cycles(import_graph())}
    gone = sorted(set(ALLOWED) - found)
    assert not gone, "no longer cycles (remove them from ALLOWED):\n" + "\n".join(gone)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "podsim" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "podsim"


def test_the_graph_reads_relative_imports_packages_and_submodules(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "__init__.py": "from .api import run\n",
            "api/__init__.py": "from .run import run\nfrom .sweep import sweep\n",
            "api/run.py": "from ..engine import core\n\ndef run(): ...\n",
            "api/sweep.py": "from ..sweep.loop import loop\n\ndef sweep(): ...\n",
            "engine/__init__.py": "",
            "engine/core.py": "import typing\nif typing.TYPE_CHECKING:\n    from ..sweep import loop\n",
            "sweep/__init__.py": "",
            "sweep/loop.py": "from ..api.run import run\n\ndef loop():\n    from ..api import sweep\n",
        },
    )
    g = import_graph(src)
    assert g["podsim.api"] == {"podsim.api.run", "podsim.api.sweep"}
    assert g["podsim.api.run"] == {"podsim.engine", "podsim.engine.core"}  # from .. import x: the submodule
    assert g["podsim.engine.core"] == set()  # TYPE_CHECKING only
    assert g["podsim.sweep.loop"] == {"podsim.api.run"}  # the api package is started; the function's import is not
    assert cycles(g) == []


def test_a_cycle_is_found_once_whatever_module_it_starts_from(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from . import b\n",
            "b.py": "from .c import x\n",
            "c.py": "import podsim.a\nx = 1\n",
            "d.py": "from .pkg.e import y\n",
            "pkg/__init__.py": "from .. import d\n",
            "pkg/e.py": "y = 2\n",
        },
    )
    got = cycles(import_graph(src))
    # d loads pkg (its __init__ runs first), which loads d again
    assert got == [["podsim.a", "podsim.b", "podsim.c"], ["podsim.d", "podsim.pkg"]]
    assert _text(got[0]) == "podsim.a -> podsim.b -> podsim.c -> podsim.a"


@pytest.mark.parametrize(
    "first, second",
    [
        ("podsim.api.sweep", "podsim.sweep.runs"),
        ("podsim.sweep.runs", "podsim.api.sweep"),
        ("podsim.api.search", "podsim.sweep.search"),
        ("podsim.sweep.search", "podsim.api.search"),
        ("podsim.validation", "podsim.api.kernels"),
        ("podsim.api.kernels", "podsim.validation"),
    ],
)
def test_the_api_and_the_sweep_import_in_either_order(first: str, second: str) -> None:
    subprocess.run([sys.executable, "-c", f"import {first}; import {second}"], check=True, timeout=120)
