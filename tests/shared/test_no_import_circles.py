"""No import circle among the project's modules, and no module of 700 lines or more.

The import graph is read from the source (``ast``), not from a running interpreter: every
``import`` counts, at the top of a module, under ``if TYPE_CHECKING:`` or inside a function
alike (a circle that only a lazy import keeps from failing is still a circle). Relative
imports are resolved, and ``from pkg import name`` points at ``pkg.name`` when that is a
module, else at ``pkg``. A circle is a strongly connected component of more than one module
(or a module importing itself); the test names each one found.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("core", "stores", "tui")
"""Whose import graph must hold no circle."""

LINE_CHECKED = ("core", "stores", "tui", "tests")
"""Whose Python modules must stay under ``MAX_LINES``."""

MAX_LINES = 700

Graph = dict[str, set[str]]


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name (a package by its own)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` itself when it is one of ``modules``, else its nearest known parent."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _base_of(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from … import`` in ``module`` (at ``path``) reads from."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The project modules ``module`` imports, wherever in it the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(module, path, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                targets.append(submodule if submodule in modules else _known(base, modules))
        found.update(target for target in targets if target is not None)
    return found


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """Each module of ``packages`` with the project modules it imports."""
    modules = module_files(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` that are circles (more than one
    module, or one importing itself), each sorted, in a stable order (Tarjan's algorithm,
    walked with an explicit stack: no recursion limit)."""
    edges = {node: sorted(set(targets) & graph.keys()) for node, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, next_edge = work.pop()
            if next_edge == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if next_edge < len(targets):
                work.append((node, next_edge + 1))
                target = targets[next_edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if work:  # back in the caller: it is as low as what it reached
                caller = work[-1][0]
                low[caller] = min(low[caller], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    found.append(sorted(component))
    return sorted(found)


def describe(circle: list[str], graph: Mapping[str, Iterable[str]]) -> str:
    """A circle as its modules and, for each, which of the others it imports."""
    members = set(circle)
    lines = [" ↔ ".join(circle)]
    for module in circle:
        inside = sorted(set(graph[module]) & members)
        lines.append(f"  {module} imports {', '.join(inside)}")
    return "\n".join(lines)


def long_modules(root: Path, folders: Iterable[str], limit: int) -> list[tuple[str, int]]:
    """The Python files under ``folders`` of ``limit`` lines or more, with their length."""
    found: list[tuple[str, int]] = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count >= limit:
                found.append((path.relative_to(root).as_posix(), count))
    return found


# ---------------------------------------------------------------------- the project


def test_no_import_circle_among_the_projects_modules() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 100, "the scan found too few modules to be looking at the project"
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(describe(c, graph) for c in found)


def test_every_module_is_under_the_line_limit() -> None:
    found = long_modules(ROOT, LINE_CHECKED, MAX_LINES)
    assert not found, f"modules of {MAX_LINES} lines or more: " + ", ".join(
        f"{path} ({count})" for path, count in found
    )


# ---------------------------------------------------------------------- the scan itself


def test_circles_finds_each_circle_and_nothing_else() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": set(),
        "f": {"f"},
        "g": {"h", "outside"},
        "h": {"g"},
    }
    assert circles(graph) == [["a", "b", "c"], ["f"], ["g", "h"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_circles_walks_a_long_chain_without_recursion() -> None:
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}
    chain["m5000"] = {"m0"}
    assert [len(c) for c in circles(chain)] == [5001]


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_circle_through_type_checking_relative_and_lazy_imports_is_found(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import thing\n",
            # ``from . import c``: the submodule, resolved from the relative import.
            "pkg/b.py": "from . import c\nthing = 1\n",
            "pkg/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n"
            ),
            "pkg/d.py": "def later():\n    import pkg.a\n",
            "pkg/sub/__init__.py": "from .e import e\n",
            "pkg/sub/e.py": "from .. import a\ne = 1\n",
            "other/__init__.py": "",
            "other/f.py": "import os\nfrom pkg import sub\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg", "other"])
    assert graph["pkg.b"] == {"pkg.c"}
    assert graph["pkg.sub.e"] == {"pkg.a"}
    assert graph["other.f"] == {"pkg.sub"}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.d"]]
    message = describe(circles(graph)[0], graph)
    assert message.splitlines()[0] == "pkg.a ↔ pkg.b ↔ pkg.c ↔ pkg.d"
    assert "  pkg.d imports pkg.a" in message


def test_a_package_importing_its_own_submodule_that_imports_it_is_a_circle(
    tmp_path: Path,
) -> None:
    """The rule for packages: a submodule imports its siblings, never its ``__init__``."""
    _write(
        tmp_path,
        {
            "store/__init__.py": "from store.packs import pack\n",
            "store/packs.py": "from store import helper\npack = 1\n",
            "store/helper.py": "x = 1\n",
        },
    )
    graph = import_graph(tmp_path, ["store"])
    assert graph["store.packs"] == {"store.helper"}  # a submodule: not the package
    _write(tmp_path, {"store/packs.py": "from store import pack_name\npack = 1\n"})
    assert circles(import_graph(tmp_path, ["store"])) == [["store", "store.packs"]]


@pytest.mark.parametrize(("lines", "long"), [(699, False), (700, True)])
def test_the_line_limit_counts_lines(tmp_path: Path, lines: int, long: bool) -> None:
    _write(tmp_path, {"pkg/m.py": "x = 1\n" * lines, "pkg/short.py": "x = 1\n"})
    expected = [("pkg/m.py", lines)] if long else []
    assert long_modules(tmp_path, ["pkg"], MAX_LINES) == expected
