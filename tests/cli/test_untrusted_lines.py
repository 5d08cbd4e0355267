"""The plain lines that name untrusted text (docs/design.md §5.3 "Bad input"):
a key a Go service stored with ESC, a newline and a bidirectional override
in it. On a terminal every result line shows them as escapes; into a pipe
the result lines a script reads (`claim --next`'s `KEY FENCE`, `admitted
KEY`, `cancelled KEY`) keep the key's exact bytes, while the lines of
`log` and `doctor` and the error lines on stderr escape them always, so a
newline in a key never forges a line. `--json` is JSON's own escaping.
Fresh `ledger` processes; a terminal is a pty (`pty.openpty`)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
from pathlib import Path

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.go_support import go_db, go_row

ESC = "\x1b"
EVIL = f"job{ESC}[31m\nforged\u202e"
"""A key only another writer can store: ESC, a newline, a bidi override."""
EVIL_SHOWN = "job\\x1b[31m\\nforged\\u202e"
BIDI = "root\u202e"
"""A key the command line admits (a format character, no control)."""
BIDI_SHOWN = "root\\u202e"
RAW = (ESC, "\u202e")


def go_store(tmp_path: Path, *rows: dict[str, str]) -> str:
    """A SQLite store holding `rows` as the Go service writes them."""
    db = tmp_path / "go.db"
    with contextlib.closing(go_db(db)) as conn:
        for row in rows:
            go_row(conn, **{"status": "pending", **row})
        conn.commit()
    return f"sqlite:///{db}"


def on_terminal(store: str, *args: str, stdin: str = "") -> tuple[int, str, str]:
    """`ledger --store STORE ARGS` with its stdout on a terminal: its exit
    status, what the terminal received (its CRLFs as LFs) and its stderr."""
    main, other = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*ledger_cmd(), "--store", store, *args],
            stdin=subprocess.PIPE,
            stdout=other,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
        os.close(other)
        other = -1
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
        got = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's other end is closed
            while chunk := os.read(main, 4096):
                got += chunk
        err = proc.stderr.read().decode()
        proc.stderr.close()
        code = proc.wait(timeout=60)
    finally:
        os.close(main)
        if other >= 0:
            os.close(other)
    return code, got.decode().replace("\r\n", "\n"), err


def test_claim_next_prints_the_key_exact_into_a_pipe_and_escaped_on_a_terminal(
    tmp_path: Path,
) -> None:
    second = f"two{ESC}[31m\n\u202e"
    store = go_store(tmp_path, {"key": EVIL}, {"key": second})
    piped = run_ledger(store, "claim", "--next", "--owner", "w", "--lease", "1h")
    assert (piped.returncode, piped.stdout) == (0, f"{EVIL} 1\n"), piped.stderr  # as stored
    code, shown, err = on_terminal(store, "claim", "--next", "--owner", "w", "--lease", "1h")
    assert (code, shown) == (0, "two\\x1b[31m\\n\\u202e 1\n"), err
    # A refusal names the key on stderr, one line, escaped even into a pipe.
    refused = run_ledger(store, "complete", EVIL, "--owner", "w", "--fence", "7")
    assert refused.returncode == 5
    assert (
        refused.stderr == f"ledger: fence token is stale (the current fence of {EVIL_SHOWN} is 1)\n"
    )


def test_log_escapes_every_key_wherever_it_goes(tmp_path: Path) -> None:
    store = go_store(tmp_path, {"key": EVIL})
    assert run_ledger(store, "claim", EVIL, "--owner", "w", "--lease", "1h").returncode == 0
    for code, out in (
        (lambda r: (r.returncode, r.stdout))(run_ledger(store, "log")),
        on_terminal(store, "log")[:2],
    ):
        assert code == 0
        assert not any(c in out for c in RAW), out
        (entry,) = out.splitlines()  # the newline in the key forged no line
        assert f" ledger.claimed {EVIL_SHOWN} 1 key {EVIL_SHOWN} claimed by w" in entry
    as_json = run_ledger(store, "--json", "log")
    assert json.loads(as_json.stdout)[0]["key"] == EVIL  # JSON's own escapes


def test_doctor_escapes_the_key_a_note_names(tmp_path: Path) -> None:
    store = go_store(tmp_path, {"key": EVIL, "needs": json.dumps(["never"])})
    checked = run_ledger(store, "doctor")
    assert checked.returncode == 0, checked.stderr
    assert not any(c in checked.stdout for c in RAW), checked.stdout
    assert f"note: {EVIL_SHOWN}: needs never, which was never admitted\n" in checked.stdout
    assert all(line.startswith(("store ", "note: ")) for line in checked.stdout.splitlines()), (
        checked.stdout
    )


def test_cancel_and_retry_lines_escape_on_a_terminal_only(tmp_path: Path) -> None:
    store = go_store(tmp_path, {"key": BIDI}, {"key": EVIL, "needs": json.dumps([BIDI])})
    code, shown, err = on_terminal(store, "cancel", BIDI)
    assert (code, shown) == (0, f"cancelled {BIDI_SHOWN}\nblocked {EVIL_SHOWN}\n"), err
    piped = run_ledger(store, "retry", BIDI)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == f"retried {BIDI}\nunblocked {EVIL}\n"  # as stored, for a script


def test_admit_lines_escape_on_a_terminal_and_its_errors_always(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    batch = json.dumps({"key": BIDI}) + "\n"
    code, shown, err = on_terminal(store, "admit", "--batch", "-", stdin=batch)
    assert (code, shown) == (0, f"admitted {BIDI_SHOWN}\n"), err
    code, shown, err = on_terminal(store, "admit", "--batch", "-", stdin=batch)
    assert (code, shown) == (0, f"duplicate {BIDI_SHOWN}\n"), err
    piped = run_ledger(store, "admit", "--batch", "-", input=batch.encode())
    assert (piped.returncode, piped.stdout) == (0, f"duplicate {BIDI}\n"), piped.stderr
    # A conflict's line on stderr is escaped into a pipe too; --json keeps the key.
    clash = run_ledger(store, "admit", BIDI, "--task", '{"other": 1}')
    assert clash.returncode == 8 and clash.stdout == "conflict\n"
    assert BIDI_SHOWN in clash.stderr and "\u202e" not in clash.stderr, clash.stderr
    as_json = run_ledger(store, "--json", "admit", BIDI, "--task", '{"other": 1}')
    assert json.loads(as_json.stdout)["key"] == BIDI


def test_error_lines_escape_the_key_they_name(tmp_path: Path) -> None:
    store = go_store(tmp_path, {"key": "present"})
    missing = run_ledger(store, "state", EVIL)
    assert missing.returncode == 3
    assert missing.stderr == f"ledger: key has no record: {EVIL_SHOWN}\n"
    as_json = run_ledger(store, "--json", "state", EVIL)
    message = json.loads(as_json.stdout)["error"]["message"]
    assert message == f"ledger: key has no record: {EVIL.replace(chr(10), ' ')}"  # as before


def test_spaces_and_private_use_characters_are_shown_as_they_are(tmp_path: Path) -> None:
    """Only controls, format characters and line separators are escaped: a
    no-break space, an ideographic space and a private-use character (all of
    which `str.isprintable` refuses) reach `log`, stderr and a terminal as
    stored, beside a bidirectional override that is still escaped."""
    store = str(tmp_path / "store")
    key = "a\u00a0b\u3000c\ue000d"
    assert run_ledger(store, "admit", key).returncode == 0
    assert run_ledger(store, "admit", "x\u202ey").returncode == 0
    log = run_ledger(store, "log").stdout.splitlines()
    assert [line.split(" ")[3] for line in log] == [key, "x\\u202ey"]
    missing = run_ledger(store, "state", key + "!")
    assert missing.stderr == f"ledger: key has no record: {key}!\n"
    code, screen, _ = on_terminal(store, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert code == 0 and screen == f"{key} 1\n"


def test_limits_list_a_stored_queue_name_on_one_escaped_line(tmp_path: Path) -> None:
    """`ledger limit` lists each queue on a line of its own: a queue name
    another writer stored with ESC and a newline is escaped, never a
    terminal command nor a forged row, into a pipe too."""
    import sqlite3

    db = tmp_path / "q.db"
    store = f"sqlite:///{db}"
    assert run_ledger(store, "admit", "a", "--queue", "db").returncode == 0
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE ledger_queue SET queue = ?", (f"q{ESC}[2J\nFORGED",))
        conn.commit()
    done = run_ledger(store, "limit")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "q\\x1b[2J\\nFORGED limit=- held=0\n"
