"""Bad input as the user meets it: each case runs the
installed `ledger` as a fresh process, where no module the test suite
imported (`json` among them) can hide a failure. Every malformed `--task`,
`--task-file`, `--batch`, `restore`, `--now` or duration is refused with its
documented exit code and one line on stderr, and nothing is written.

`test_faults_input.py` covers the wider set of hostile values in-process;
this file proves the same promise holds in the process a person starts.
"""

from __future__ import annotations

import hashlib
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.cli_support import ledger_cmd, subprocess_env

if TYPE_CHECKING:
    from pathlib import Path

BAD_JSON: dict[str, bytes] = {
    "truncated": b'{"a":1',
    "python-style": b"{'a':1}",
    "bare-key": b"{a:1}",
    "non-utf8": b"\xff\xfe{}",  # (inside a string, docs/design.md §5.3 makes it U+FFFD)
    "nul": b'{"a":\x00}',
    "deep": b"[" * 100_000,
    "empty": b"",
}


def _fingerprint(store: Path) -> dict[str, str]:
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "dir"
        for p in sorted(store.rglob("*"))
    }


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    r = _ledger(path, "admit", "existing")
    assert r.returncode == 0, r.stderr
    return path


def _ledger(
    store: Path | str, *args: str | bytes, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*ledger_cmd(), "--store", str(store), *args],
        input=stdin,
        capture_output=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )


def _refused(r: subprocess.CompletedProcess[bytes], code: int) -> None:
    err = r.stderr.decode(errors="replace")
    assert r.returncode == code, (r.returncode, err)
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err


@pytest.mark.parametrize("name", sorted(BAD_JSON))
def test_bad_task_payloads_in_every_channel(store: Path, tmp_path: Path, name: str) -> None:
    data = BAD_JSON[name]
    before = _fingerprint(store)
    file = tmp_path / "input"
    file.write_bytes(data)
    if b"\x00" not in data:  # an argv cannot hold a NUL
        _refused(_ledger(store, "admit", "new", "--task", data), 2)
    _refused(_ledger(store, "admit", "new", "--task-file", str(file)), 2)
    _refused(_ledger(store, "admit", "new", "--task-file", "-", stdin=data), 2)
    if data:  # an empty batch is a batch of no lines: nothing to admit
        batch = b'{"key":"new","task":' + data + b"}\n"
        file.write_bytes(batch)
        _refused(_ledger(store, "admit", "--batch", str(file)), 2)
        _refused(_ledger(store, "admit", "--batch", "-", stdin=data), 2)
    file.write_bytes(data)
    _refused(_ledger(store, "restore", str(file)), 8)
    _refused(_ledger(store, "restore", "-", stdin=data), 8)
    assert _fingerprint(store) == before


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_a_file_that_is_not_there(store: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "nope" if kind == "missing" else tmp_path
    before = _fingerprint(store)
    _refused(_ledger(store, "admit", "new", "--task-file", str(path)), 2)
    _refused(_ledger(store, "admit", "--batch", str(path)), 2)
    _refused(_ledger(store, "restore", str(path)), 2)
    assert _fingerprint(store) == before


@pytest.mark.parametrize(
    "args",
    [
        ["--now", "2026-13-45T00:00:00Z", "admit", "new"],
        ["--now", "NaN", "admit", "new"],
        ["admit", "new", "--delay", "5 parsecs"],
        ["admit", "new", "--delay", "-5m"],
        ["admit", "new", "--delay", "3000000d"],  # longer than a Go duration holds
        ["claim", "existing", "--owner", "w", "--lease", "100000000d"],
        ["--now", "9999-12-31T23:59:59Z", "admit", "new", "--delay", "5s"],
        ["claim", "existing", "--owner", "w", "--lease", "0s"],
        ["claim", "existing", "--owner", "w", "--lease", "1e400s"],
        ["wait", "existing", "--timeout", "forever"],
    ],
    ids=" ".join,
)
def test_bad_instants_and_durations(store: Path, args: list[str]) -> None:
    before = _fingerprint(store)
    _refused(_ledger(store, *args), 2)
    assert _fingerprint(store) == before


def test_a_delay_past_the_year_9999_creates_no_database(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    r = _ledger(f"sqlite:///{db}", "--now", "9999-12-31T23:59:00Z", "admit", "x", "--delay", "2m")
    _refused(r, 2)
    assert b"past the year 9999" in r.stderr
    assert not db.exists()


def test_a_restored_fence_that_leaves_no_next_claim_is_refused(store: Path, tmp_path: Path) -> None:
    """A record at Fence 2^64-1 could never be claimed again, and would stop
    every `claim --next` once it is first in the ready order."""
    assert _ledger(store, "claim", "existing", "--owner", "w", "--lease", "1m").returncode == 0
    snap = _ledger(store, "snapshot")
    assert snap.returncode == 0, snap.stderr
    data = snap.stdout.replace(b'"Fence":1,', b'"Fence":18446744073709551615,')
    assert data != snap.stdout
    target = tmp_path / "restored"
    r = _ledger(target, "restore", "-", stdin=data)
    _refused(r, 8)
    assert b"leaves no fence for the task's next claim" in r.stderr
    assert not target.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "existing", "--owner", "w", "--lease", "1m", "--", ""],  # an empty command name
        ["limit", "db", "--", "-1"],
        ["admit", "new", "--queue", "a,b"],  # `--queue a,b` names two queues
    ],
    ids=" ".join,
)
def test_bad_commands_and_names(store: Path, args: list[str]) -> None:
    before = _fingerprint(store)
    _refused(_ledger(store, *args), 2)
    assert _fingerprint(store) == before


EMPTY_KEY: dict[str, list[str]] = {
    "admit": ["admit", ""],
    "claim": ["claim", "", "--owner", "w", "--lease", "1m"],
    "renew": ["renew", "", "--owner", "w", "--fence", "1", "--lease", "1m"],
    "release": ["release", "", "--owner", "w", "--fence", "1"],
    "takeover": ["takeover", "", "--owner", "w", "--lease", "1m"],
    "complete": ["complete", "", "--owner", "w", "--fence", "1"],
    "run": ["run", "", "--owner", "w", "--lease", "1m", "--", "true"],
    "state": ["state", ""],
    "blocked": ["blocked", ""],
    "tree": ["tree", ""],
    "log": ["log", ""],
    "graph": ["graph", "existing", ""],
    "output": ["output", ""],
    "wait": ["wait", "existing", ""],
    "retry": ["retry", ""],
    "cancel": ["cancel", ""],
    "check": ["check", "", "--owner", "w", "--fence", "1"],
}
"""A line per command that takes a KEY, with that key empty."""


def test_every_command_taking_a_key_is_in_the_empty_key_table() -> None:
    from ledger_cli.cli.declarations import build_cli

    commands = build_cli().commands  # type: ignore[attr-defined]
    takes_key = {
        name
        for name, command in commands.items()
        for param in command.params
        if param.param_type_name == "argument" and param.name in ("key", "keys")
    }
    assert takes_key == set(EMPTY_KEY)


@pytest.mark.parametrize("command", sorted(EMPTY_KEY))
def test_an_empty_key_is_a_usage_error_everywhere(store: Path, command: str) -> None:
    """No store holds an empty key (docs/design.md §5.2): every command refuses
    one as bad input, on the fast path and the Typer path alike."""
    before = _fingerprint(store)
    r = _ledger(store, *EMPTY_KEY[command])
    _refused(r, 2)
    assert r.stderr == b"ledger: key must not be empty\n"
    assert _fingerprint(store) == before


@pytest.mark.parametrize(
    "args",
    [
        ["claim", "existing", "--owner", "w", "--lease", "0.0000001s"],
        ["takeover", "existing", "--owner", "w", "--lease", "0.0009ms"],
        ["renew", "existing", "--owner", "w", "--fence", "1", "--lease", "0.0000001s"],
        ["run", "existing", "--owner", "w", "--lease", "0.0000001s", "--", "true"],
        ["admit", "new", "--delay", "0.0000001s"],
    ],
    ids=" ".join,
)
def test_a_lease_or_delay_under_the_clocks_resolution_names_the_shortest(
    store: Path, args: list[str]
) -> None:
    """Above zero but under a microsecond, it would round to zero: the message
    says so, and names the shortest, rather than "must be positive"."""
    before = _fingerprint(store)
    r = _ledger(store, *args)
    _refused(r, 2)
    what = "--delay" if "--delay" in args else "lease"
    assert b"is under a microsecond, the clock's resolution" in r.stderr
    assert r.stderr.endswith(f"the shortest {what} is 0.001ms\n".encode())
    assert _fingerprint(store) == before


@pytest.mark.parametrize("lease", ["1ms", "50ms", "0.099s"])
def test_run_refuses_a_lease_it_could_not_renew(store: Path, lease: str) -> None:
    """`run` renews at a third of the lease: a renewal of a short one cannot
    be relied on to land in time (under 100ms), and the run used to end in a misleading
    "the store did not answer" (exit 5). Now it is bad input, nothing written."""
    before = _fingerprint(store)
    r = _ledger(store, "run", "existing", "--owner", "w", "--lease", lease, "--", "true")
    _refused(r, 2)
    assert r.stderr.startswith(b"ledger: run needs a lease of at least 100ms")
    assert _fingerprint(store) == before


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["wait"], b"ledger: wait needs a KEY (or --all)\n"),
        (
            [
                "run",
                "existing",
                "--owner",
                "w",
                "--lease",
                "1m",
                "--kill-after",
                "1s",
                "--",
                "true",
            ],
            b"ledger: --kill-after goes with --timeout\n",
        ),
        (["run", "existing", "--owner", "w", "--lease", "bad", "--", "true"], b"ledger: bad lease"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_usage_error_found_after_parsing_is_one_line(
    store: Path, args: list[str], line: bytes
) -> None:
    """docs/reference.md: the parser's usage errors show the usage line and
    hint first; one a command finds in what parsed is its one `ledger:` line."""
    before = _fingerprint(store)
    r = _ledger(store, *args)
    _refused(r, 2)
    assert r.stderr.startswith(line)
    assert _fingerprint(store) == before


@pytest.mark.parametrize(
    "args", [["frob"], ["claim", "existing"], ["list", "--frob"]], ids=" ".join
)
def test_a_usage_error_the_parser_finds_shows_the_usage_line_and_hint(
    store: Path, args: list[str]
) -> None:
    before = _fingerprint(store)
    r = _ledger(store, *args)
    assert r.returncode == 2, r.stderr
    usage, hint, *rest = r.stderr.decode().splitlines()
    assert usage.startswith("Usage: ledger") and hint.startswith("Try 'ledger")
    assert rest[-1].startswith("Error: ") and "Traceback" not in r.stderr.decode()
    assert _fingerprint(store) == before
