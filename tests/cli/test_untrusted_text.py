"""Untrusted text shown on a terminal is never a terminal command: a command's
output (the last lines `state` shows), a payload and a key reach the screen
with their control characters escaped (cli/render.py `safe`). Fresh `ledger`
processes; stdout is a pipe, where rich adds no escape sequence of its own,
so any ESC in it came from the data."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
from pathlib import Path

from ledger_cli.cli.render import safe
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.go_support import go_db, go_row

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
    assert f"all of it: ledger --store {store} output t" in shown.stdout  # this store's


def test_state_shows_at_most_4_kib_of_the_last_lines(tmp_path: Path) -> None:
    """A megabyte with no newline is one "line": `state` shows its last
    4,096 bytes and says so; a run that kept nothing points at nothing."""
    store = tmp_path / "s"
    for key in ("long", "straight"):
        assert run_ledger(store, "admit", key).returncode == 0
    ran = run_ledger(
        store, "run", "long", "--owner", "w", "--lease", "30s", "--",
        "sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    shown = run_ledger(store, "state", "long")
    assert shown.returncode == 0, shown.stderr
    assert "last 4,096 bytes of attempt 1:" in shown.stdout
    assert "x" * 4096 in shown.stdout and len(shown.stdout) < 12_000
    # A line escaped past the width (4,096 in a pipe) is not wrapped into two.
    assert run_ledger(store, "admit", "wide").returncode == 0
    line = "A" * 4090 + "\u202e" + "Z"
    ran = run_ledger(store, "run", "wide", "--owner", "w", "--lease", "30s", "--", "echo", line)
    assert ran.returncode == 0, ran.stderr
    shown = run_ledger(store, "state", "wide")
    assert "A" * 4090 + "\\u202eZ\n" in shown.stdout, shown.stdout[-200:]
    ran = run_ledger(
        store, "run", "straight", "--owner", "w", "--lease", "30s", "--keep-output", "0",
        "--", "echo", "hi",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    shown = run_ledger(store, "state", "straight")
    assert "all of it" not in shown.stdout and "last lines" not in shown.stdout


def test_safe_keeps_printable_text_and_line_breaks_where_asked() -> None:
    assert safe("héllo wörld ✓\n\tnext", lines=True) == "héllo wörld ✓\n\tnext"
    assert safe("héllo wörld ✓\n\tnext") == "héllo wörld ✓\\n\\tnext"
    assert safe("a\x1b[2Jb\x7f\x00") == "a\\x1b[2Jb\\x7f\\x00"


FORGED = "deploy\nrelease   completed    1  w1   1"


def test_a_stored_key_with_a_newline_stays_on_its_row(tmp_path: Path) -> None:
    """A key the command line refuses but a Go service may have written: in
    `list`, `tree` and `state` it is one escaped line, never a forged row."""
    db = tmp_path / "go.db"
    with contextlib.closing(go_db(db)) as conn:
        go_row(conn, key=FORGED, status="failed")
        go_row(conn, key="after", status="blocked", needs=json.dumps([FORGED]), blocked_by=FORGED)
        conn.commit()
    store = f"sqlite:///{db}"
    escaped = FORGED.replace("\n", "\\n")
    for args in (("list",), ("tree",), ("state", FORGED)):
        shown = run_ledger(store, *args)
        assert shown.returncode == 0, (args, shown.stderr)
        assert escaped in shown.stdout, (args, shown.stdout)
        assert not any(line.startswith("release") for line in shown.stdout.splitlines()), args


def test_blocked_escapes_the_blocking_key_on_a_terminal_only(tmp_path: Path) -> None:
    db = tmp_path / "go.db"
    with contextlib.closing(go_db(db)) as conn:
        go_row(conn, key=f"evil{ESC}[2J\u202e", status="failed")
        go_row(conn, key="victim", status="blocked", blocked_by=f"evil{ESC}[2J\u202e")
        conn.commit()
    store = f"sqlite:///{db}"
    piped = run_ledger(store, "blocked", "victim")
    assert (piped.returncode, piped.stdout) == (0, f"evil{ESC}[2J\u202e\n")  # as stored
    main, other = pty.openpty()
    try:
        done = subprocess.run(
            [*ledger_cmd(), "--store", store, "blocked", "victim"],
            stdout=other,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
            timeout=60,
            check=False,
        )
        os.close(other)
        got = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
            while chunk := os.read(main, 4096):
                got += chunk
    finally:
        os.close(main)
    assert done.returncode == 0, done.stderr
    assert got.decode().strip() == "evil\\x1b[2J\\u202e"


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
