"""Every code an InputError is raised with is in `inputs.INPUT_CODES`, the
table docs/reference.md's error codes are written from: a script that reads
`--json` errors meets no code the reference does not name. Found by reading
the package's source (the calls with a literal code)."""

from __future__ import annotations

import ast
from pathlib import Path

from ledger_cli.cli.inputs import INPUT_CODES

PACKAGE = Path(__file__).resolve().parents[2] / "ledger_cli"


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
