"""Every `--json` error code the package can emit is a row of
docs/reference.md's "Error codes" table, and every code an InputError is
raised with is in `inputs.INPUT_CODES` (the table's usage rows): a script that
reads `--json` errors meets no code the reference does not name. Found by
reading the package's source: each error class's code, each literal code given
to `output.error_object`, each InputError's literal code."""

from __future__ import annotations

import ast
from pathlib import Path

from ledger_cli.cli.inputs import INPUT_CODES

PACKAGE = Path(__file__).resolve().parents[2] / "ledger_cli"
REFERENCE = PACKAGE.parent / "docs" / "reference.md"
NEVER_EMITTED = {"ledger_error"}  # LedgerError's own: only its subclasses are raised


def _raised_codes() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "InputError"
            ):
                code = node.args[1] if len(node.args) > 1 else None
                if isinstance(code, ast.Constant) and isinstance(code.value, str):
                    found[code.value] = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
    return found


def test_every_input_error_code_is_documented() -> None:
    raised = _raised_codes()
    assert "bad_json" in raised and "too_large" in raised  # the search finds them
    missing = {c: where for c, where in raised.items() if c != "usage" and c not in INPUT_CODES}
    assert not missing, f"add these to inputs.INPUT_CODES: {missing}"


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _emitted_codes() -> dict[str, str]:
    """Each code with where it is set: `code = "x"` in a class body or
    `code="x"` in a class header, and `error_object("x", …)`."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            codes: list[str | None] = []
            if isinstance(node, ast.ClassDef):
                codes += [_literal(kw.value) for kw in node.keywords if kw.arg == "code"]
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign | ast.AnnAssign):
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        if any(isinstance(t, ast.Name) and t.id == "code" for t in targets):
                            codes.append(_literal(stmt.value))
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "error_object":
                    codes.append(_literal(node.args[0]))
            for code in codes:
                if code is not None:
                    found[code] = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
    return found


def _documented_codes() -> set[str]:
    text = REFERENCE.read_text(encoding="utf-8")
    table = text.split("\n## Error codes\n", 1)[1].split("\n## ", 1)[0]
    return {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}


def test_every_emitted_code_is_a_row_of_the_reference() -> None:
    emitted = _emitted_codes()
    assert {"conflict", "cannot_run", "internal", "fenced", "paused"} <= set(emitted)
    codes = set(emitted) | set(_raised_codes())
    missing = {c: emitted.get(c, "InputError") for c in codes - NEVER_EMITTED - _documented_codes()}
    assert not missing, f"error codes missing from docs/reference.md: {missing}"


def test_the_table_check_sees_rows() -> None:
    documented = _documented_codes()
    assert {"conflict", "no_key", "bad_json", "internal"} <= documented
    assert not documented - set(_emitted_codes()) - set(INPUT_CODES)  # no row for a lost code
