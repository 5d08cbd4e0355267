"""docs/reference.md is what docs/make_reference.py writes from the CLI today:
every command, option, environment variable, exit code and --json shape. A
stale page fails with the command that rewrites it."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from ledger_cli.cli.declarations import build_cli
from tests.cli_support import ROOT

PAGE = ROOT / "docs" / "reference.md"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_reference", ROOT / "docs" / "make_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_is_current() -> None:
    fresh = _maker().render()
    assert PAGE.read_text(encoding="utf-8") == fresh, (
        "docs/reference.md is stale; run `.venv/bin/python docs/make_reference.py`"
    )


def test_reference_names_every_command_and_option() -> None:
    text = PAGE.read_text(encoding="utf-8")
    group = build_cli()
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert f"### `ledger {name}`" in text
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-") and opt not in ("-h", "--help"):
                    assert f"`{opt}`" in text, (name, opt)
    for code in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 70):
        assert re.search(rf"^\| {code} \|", text, re.M), code
