"""Every command's `--help`: ends with one to three examples of that command,
shows arguments by their metavar alone (no typer type such as `<str>`, no
`[[KEY]]` or `{KEY}`), and says what `doctor --fix` does."""

from __future__ import annotations

import re

import pytest

from ledger_cli.cli.declarations import build_cli
from tests.cli_support import make_cli

COMMANDS = sorted(build_cli().commands)  # type: ignore[attr-defined]


def _help(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    out = make_cli(monkeypatch)(*args, "--help")
    assert out.code == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", COMMANDS)
def test_help_ends_with_examples_of_the_command(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(monkeypatch, name)
    _, sep, tail = text.rpartition("\n  Examples:\n\n")
    assert sep, f"`ledger {name} --help` has no Examples section"
    examples = tail.rstrip("\n").split("\n")
    assert 1 <= len(examples) <= 3, examples
    for line in examples:
        assert line.startswith("    "), line  # indented, as written (not re-wrapped)
        assert re.search(rf"\bledger .*\b{name}\b", line), line
    assert "\b" not in text


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_shows_no_type_placeholders(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(monkeypatch, *([name] if name else []))
    assert not re.search(r"<(str|int|float|bool|path|list\[\w+\])>", text), text
    assert "[[" not in text and "{KEY}" not in text, text


def test_optional_and_required_keys_read_as_usage_lines_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _help(monkeypatch, "run").startswith("Usage: ledger run [OPTIONS] [KEY]\n")
    assert _help(monkeypatch, "state").startswith("Usage: ledger state [OPTIONS] KEY\n")


def test_doctor_fix_says_what_it_repairs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(_help(monkeypatch, "doctor").split())
    for what in (
        "temporary files",
        "escaped block",
        "orphaned",
        "ready, dependents and live indexes",
    ):
        assert what in text
