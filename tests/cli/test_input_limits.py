"""Limits on input, each met by the installed `ledger` as a fresh process:
one line on stderr, the documented exit code, nothing written.

- a sequence past what the store holds (SQLite: 2^63-1) is exit 8, as
  `restore` says it, and `admit --batch` names the line before writing any;
- an offset of 24 hours (`+24:00`, `+23:60`: Go's MarshalJSON refuses to
  write one) is exit 2 in an option or a batch line, exit 8 in a snapshot;
- a lease ending past the year 9999 is exit 2, as `--delay` is;
- `check --owner ""` is exit 2 "owner must not be empty", as `claim` says;
- a bad LEDGER_NOW is named as LEDGER_NOW.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.cli_support import run_ledger

if TYPE_CHECKING:
    from pathlib import Path

HUGE = "9223372036854775808"  # 2^63: past SQLite's signed INTEGER


def _refused(r: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledger: "), r.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _fingerprint(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_a_sequence_past_sqlite_is_exit_8_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    url = f"sqlite:{db}"
    _refused(run_ledger(url, "admit", "x", "--seq", HUGE), 8, HUGE, "more than this store holds")
    assert not db.exists()
    batch = tmp_path / "v.jsonl"
    lines = [{"key": f"ok{i}"} for i in range(50)]
    lines[30] = {"key": "huge", "seq": int(HUGE)}
    batch.write_text("".join(json.dumps(x) + "\n" for x in lines))
    _refused(run_ledger(url, "admit", "--batch", str(batch)), 8, "line 31:", HUGE)
    assert not db.exists()
    assert run_ledger(url, "admit", "before").returncode == 0
    before = _fingerprint(db)
    _refused(run_ledger(url, "admit", "--batch", str(batch)), 8, "line 31:")
    _refused(run_ledger(url, "admit", "y", "--seq", HUGE), 8)
    assert _fingerprint(db) == before
    assert json.loads(run_ledger(url, "--json", "stats").stdout)["counts"]["pending"] == 1


def test_a_sequence_past_sqlite_is_fine_elsewhere(tmp_path: Path) -> None:
    r = run_ledger(tmp_path / "j", "admit", "x", "--seq", HUGE)
    assert (r.returncode, r.stdout) == (0, "admitted\n"), r.stderr


@pytest.mark.parametrize("offset", ["+24:00", "-24:00", "+23:60", "-00:60"])
def test_an_offset_of_24_hours_is_refused(tmp_path: Path, offset: str) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "--now", "2026-11-01T00:00:00Z", "admit", "a").returncode == 0
    before = _fingerprint(store)
    when = f"2026-12-01T00:00:00{offset}"
    _refused(run_ledger(store, "--now", when, "admit", "b"), 2, "--now")
    _refused(run_ledger(store, "admit", "b", LEDGER_NOW=when), 2, "LEDGER_NOW")
    _refused(run_ledger(store, "admit", "b", "--not-before", when), 2, "--not-before")
    _refused(run_ledger(store, "--now", when, "claim", "a", "--owner", "w", "--lease", "1m"), 2)
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"key": "b", "not_before": when}) + "\n")
    _refused(run_ledger(store, "admit", "--batch", str(batch)), 2, "line 1:")
    if offset[1:3] >= "23":  # a whole 24 hours (-00:60 is -01:00 to Go's encoder)
        snap = run_ledger(store, "snapshot")
        assert snap.returncode == 0, snap.stderr
        bad = tmp_path / "snap.json"
        bad.write_text(snap.stdout.replace("2026-11-01T00:00:00Z", when))
        _refused(run_ledger(tmp_path / "r", "restore", str(bad)), 8, "CreatedAt", "23:59")
        assert not (tmp_path / "r").exists()
    assert _fingerprint(store) == before


def test_offsets_up_to_23_59_are_taken(tmp_path: Path) -> None:
    store = tmp_path / "s"
    r = run_ledger(store, "--now", "2026-12-01T00:00:00-23:59", "admit", "a")
    assert r.returncode == 0, r.stderr
    r = run_ledger(store, "admit", "b", "--not-before", "2026-12-01T00:00:00+23:59")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("now", "command"),
    [
        ("9999-12-31T00:00:00Z", ("claim", "b", "--owner", "w", "--lease", "2d")),
        ("9999-12-31T00:00:00Z", ("claim", "--next", "--owner", "w", "--lease", "2d")),
        ("9999-12-30T12:00:00Z", ("renew", "a", "--owner", "w", "--fence", "1", "--lease", "2d")),
        ("9999-12-31T01:00:00Z", ("takeover", "a", "--owner", "v", "--lease", "2d")),
        ("9999-12-31T00:00:00Z", ("run", "b", "--owner", "w", "--lease", "2d", "--", "true")),
    ],
    ids=lambda c: c if isinstance(c, str) and c[0].isdigit() else " ".join(c[:2]),
)
def test_a_lease_past_the_year_9999_is_exit_2(
    tmp_path: Path, now: str, command: tuple[str, ...]
) -> None:
    store = tmp_path / "s"
    start = ("--now", "9999-12-30T00:00:00Z")
    for args in (("admit", "a"), ("admit", "b"), ("claim", "a", "--owner", "w", "--lease", "1d")):
        assert run_ledger(store, *start, *args).returncode == 0
    before = _fingerprint(store)
    _refused(run_ledger(store, "--now", now, *command), 2, "--lease", "past the year 9999")
    assert _fingerprint(store) == before
    fit = tuple("1h" if word == "2d" else word for word in command)
    ok = run_ledger(store, "--now", now, *fit)
    assert ok.returncode == 0, ok.stderr


def test_check_with_an_empty_owner_is_exit_2(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "claim", "a", "--owner", "w0", "--lease", "1h").returncode == 0
    r = run_ledger(store, "check", "a", "--owner", "", "--fence", "1")
    assert _refused(r, 2) == "ledger: owner must not be empty"


def test_a_bad_ledger_now_is_named(tmp_path: Path) -> None:
    for command in (("admit", "x"), ("list",), ("stats",)):
        r = run_ledger(tmp_path / "s", *command, LEDGER_NOW="bogus")
        assert _refused(r, 2).startswith('ledger: LEDGER_NOW "bogus" is not'), command
    r = run_ledger(
        tmp_path / "s", "--now", "bogus", "admit", "x", LEDGER_NOW="2026-01-01T00:00:00Z"
    )
    assert _refused(r, 2).startswith('ledger: --now "bogus" is not')
    assert not (tmp_path / "s").exists()
