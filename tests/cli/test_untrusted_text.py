"""Untrusted text shown on a terminal is never a terminal command: a command's
output (the last lines `state` shows), a payload and a key reach the screen
with their control characters escaped (cli/render.py `safe`). Fresh `ledger`
processes; stdout is a pipe, where rich adds no escape sequence of its own,
so any ESC in it came from the data."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_cli.cli.render import safe
from tests.cli_support import run_ledger

ESC = "\x1b"
HOSTILE = f"{ESC}]0;PWNED{ESC}\\{ESC}[2J{ESC}[31mred\u009b\u202e"


def test_state_escapes_command_output_and_payloads(tmp_path: Path) -> None:
    store = tmp_path / "s"
    task = json.dumps({"x": "a\u009bb\u202ec"}, ensure_ascii=False)
    assert run_ledger(store, "admit", "t", "--task", task).returncode == 0
    ran = run_ledger(
        store, "run", "t", "--owner", "w", "--lease", "30s", "--", "printf", "%s\\n", HOSTILE
    )
    assert ran.returncode == 0, ran.stderr
    assert HOSTILE in ran.stdout  # the command's own stdout passes through untouched
    shown = run_ledger(store, "state", "t")
    assert shown.returncode == 0, shown.stderr
    assert ESC not in shown.stdout and "\u009b" not in shown.stdout
    assert "\u202e" not in shown.stdout
    assert "\\x1b]0;PWNED" in shown.stdout  # shown, escaped
    assert '"a\\x9bb\\u202ec"' in shown.stdout


def test_safe_keeps_printable_text_and_line_breaks() -> None:
    assert safe("héllo wörld ✓\n\tnext") == "héllo wörld ✓\n\tnext"
    assert safe("a\x1b[2Jb\x7f\x00") == "a\\x1b[2Jb\\x7f\\x00"


def test_the_web_view_holds_back_a_character_still_being_written() -> None:
    """The live output poll returns whole UTF-8 characters only (its next poll
    starts at the held-back bytes): "héllo" is never shown as "h��llo"."""
    from ledger_cli.web.api import unfinished_char

    text = "héllo ✓ 𝄞".encode()
    for end in range(len(text) + 1):
        cut = unfinished_char(text[:end])
        text[: end - cut].decode("utf-8")  # whole characters: no error
        assert cut < 4
    assert unfinished_char("h\u00e9".encode()[:2]) == 1
    assert unfinished_char(b"plain") == 0
