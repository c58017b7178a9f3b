"""The house rules of docs/architecture.md, read from the code: which rooms may import which.

* ``cli/`` parses arguments, calls the API and prints a ``report/`` formatter: its modules
  import nothing of podsim but ``api/``, ``cli/``, ``report/`` and ``errors``.
* The front doors (``formats/``, ``capture/``, ``llm/``, ``parallelize/``) produce workloads
  and know nothing of the engine or the API.
* No two classes share a name; no docstring or comment cites an issue number (history
  belongs in git).

Every import counts, at module top or inside a function.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "podsim"


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def podsim_imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every podsim import in ``path``."""
    tree = ast.parse(path.read_text())
    package = _module(path) if path.name == "__init__.py" else _module(path).rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "podsim"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "podsim":
                continue
            if node.module is None or target == "podsim":  # from . import x: the submodules
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _files(room: str) -> list[Path]:
    return sorted((SRC / room).rglob("*.py"))


CLI_MAY_IMPORT = {"api", "cli", "report", "errors"}
FRONT_DOORS = ("formats", "capture", "llm", "parallelize")


@pytest.mark.parametrize("path", _files("cli"), ids=lambda p: p.name)
def test_the_cli_imports_only_the_api_and_the_report(path: Path) -> None:
    bad = [
        f"{path.name}:{line} imports {m}"
        for line, m in podsim_imports(path)
        if m not in ("podsim", "podsim.__version__") and _room(m) not in CLI_MAY_IMPORT
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("room", FRONT_DOORS)
def test_front_doors_know_neither_the_engine_nor_the_api(room: str) -> None:
    bad = [
        f"{p.relative_to(SRC)}:{line} imports {m}"
        for p in _files(room)
        for line, m in podsim_imports(p)
        if _room(m) in ("engine", "api")
    ]
    assert not bad, "\n".join(bad)


def test_no_two_classes_share_a_name() -> None:
    names: Counter[str] = Counter()
    where: dict[str, list[str]] = {}
    for p in SRC.rglob("*.py"):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                names[node.name] += 1
                where.setdefault(node.name, []).append(str(p.relative_to(SRC)))
    twice = {n: where[n] for n, c in names.items() if c > 1}
    assert not twice, twice


def test_no_issue_numbers_in_the_code() -> None:
    pattern = re.compile(r"\b[Ii]ssues? #?\d+|\(#\d+\)|\bIssue\s+#?\d+")
    bad = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in SRC.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not bad, "\n".join(bad)


def test_the_reader_finds_relative_imports() -> None:
    # the rules above rest on this reader: a relative import two floors up is resolved
    imports = dict((m, line) for line, m in podsim_imports(SRC / "cli" / "llm.py"))
    assert "podsim.api.train" in imports and "podsim.report.training" in imports
