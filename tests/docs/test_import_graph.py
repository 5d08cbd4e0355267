"""The layer rule (CONTRIBUTING.md), checked on the source: no import circles,
and no arrow from the engine to the stores or the CLI, nor from the stores to
the CLI.

Every import counts: module level, inside a function, and under
`if TYPE_CHECKING:`, since a circle of any of them is a knot a reader must
untie. The graph is built from the AST of every module of the package
(`from . import x` and `from pkg import module` resolve to that module;
`from pkg import name` to the package), so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "ledger_cli"

Graph = dict[str, set[str]]


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph(root: Path = PACKAGE) -> Graph:
    mods = _modules(root)
    graph: Graph = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name in mods}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    module = f"{base}.{alias.name}"  # `from pkg import module`
                    if module in mods:
                        graph[name].add(module)
                    elif base in mods:  # `from module import name`
                        graph[name].add(base)
        graph[name].discard(name)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
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


FORBIDDEN = {
    "ledger_cli.engine": ("ledger_cli.stores", "ledger_cli.cli"),
    "ledger_cli.stores": ("ledger_cli.cli",),
}


def upward_arrows(graph: Graph) -> list[str]:
    bad = []
    for src, targets in sorted(graph.items()):
        for layer, above in FORBIDDEN.items():
            if src == layer or src.startswith(f"{layer}."):
                bad += [f"{src} -> {t}" for t in sorted(targets) if t.startswith(above)]
    return bad


def test_the_package_has_no_import_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_arrow_points_back_up_a_layer() -> None:
    assert upward_arrows(import_graph()) == []


def test_the_graph_sees_every_kind_of_import() -> None:
    """The checks can fail: a function-level import, a relative one and a
    TYPE_CHECKING one each make an edge."""
    graph = import_graph()
    assert "ledger_cli.cli.inputs" in graph["ledger_cli.cli.commands.renew"]  # module level
    assert "ledger_cli.cli.execute" in graph["ledger_cli.cli.declarations.base"]  # in a def
    assert "ledger_cli.engine.store" in graph["ledger_cli.cli.blockwrites"]  # TYPE_CHECKING


@pytest.mark.parametrize(
    ("files", "expect_cycle", "expect_up"),
    [
        (
            {
                "engine/a.py": "from ledger_cli.engine import b",
                "engine/b.py": "import ledger_cli.engine.a",
            },
            True,
            False,
        ),
        (
            {"engine/a.py": "def f():\n    from ledger_cli.cli import c", "cli/c.py": ""},
            False,
            True,
        ),
        (
            {"engine/a.py": "from . import b", "engine/b.py": "if X:\n    from .a import f"},
            True,
            False,
        ),
        ({"stores/s.py": "from ledger_cli.engine import a", "engine/a.py": ""}, False, False),
    ],
)
def test_the_checks_catch_a_planted_fault(
    tmp_path: Path, files: dict[str, str], expect_cycle: bool, expect_up: bool
) -> None:
    root = tmp_path / "ledger_cli"
    for pkg in ("", "engine", "stores", "cli"):
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        (root / rel).write_text(text + "\n")
    graph = import_graph(root)
    assert bool(cycles(graph)) is expect_cycle
    assert bool(upward_arrows(graph)) is expect_up
