"""Lost primary data in a JSON store, as the user meets it: a
deleted record file, a damaged one, a deleted history.jsonl; `ledger doctor`
names each, `--fix` does not accept the loss, `--fix --drop-damaged` does,
explicitly (damaged bytes moved aside, a history line each). Every command
is a fresh `ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import JsonFileStore
from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("a", "b", "c"):
        assert _ledger(store, "admit", key).returncode == 0
    return store


def _record(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "records" / digest[:2] / f"{digest}.json"


def _events(store: Path, key: str) -> list[str]:
    res = _ledger(store, "--json", "log", key)
    assert res.returncode == 0, res.stderr
    return [entry["event"] for entry in json.loads(res.stdout)]


def _snapshot(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name not in ("ledger.lock", "tail")
    }


def test_a_lost_record_is_named_and_fix_does_not_accept_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _record(store, "b").unlink()
    res = _ledger(store, "doctor")
    assert res.returncode == 9
    assert "problem: record b is lost" in res.stdout
    assert "--drop-damaged" in res.stdout
    # A full scan disagrees with the tally: exit 9, one line naming it.
    listing = _ledger(store, "list", "--json")
    assert listing.returncode == 9
    assert listing.stderr.count("\n") == 1 and "tally/counts" in listing.stderr
    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 9 and "record b is lost" in fixed.stdout
    again = _ledger(store, "doctor")
    assert again.returncode == 9 and "record b is lost" in again.stdout
    # The tally is kept while the record is lost: scans go on refusing to
    # answer without it (only --drop-damaged accepts the loss).
    assert "kept while a record is lost" in fixed.stdout
    assert _ledger(store, "list", "--json").returncode == 9


def test_fix_keeps_a_lost_records_attempts_until_the_loss_is_accepted(tmp_path: Path) -> None:
    """The attempts (and kept output) of a key whose record file is lost go
    with the record: restored with it, or dropped with --drop-damaged."""
    store = _store(tmp_path)
    ran = _ledger(
        store,
        "run",
        "b",
        "--owner",
        "w",
        "--lease",
        "1m",
        "--keep-output",
        "1k",
        "--",
        "echo",
        "hi",
    )
    assert ran.returncode == 0, ran.stderr
    snapshot = _ledger(store, "snapshot").stdout
    _record(store, "b").unlink()
    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 9 and "record b is lost" in fixed.stdout
    assert "note: attempts of 'b' kept: its record is lost" in fixed.stdout
    assert "removed the attempts" not in fixed.stdout
    restored_into = tmp_path / "restored.json"
    restored_into.write_text(
        json.dumps({"Tasks": [r for r in json.loads(snapshot)["Tasks"] if r["Key"] == "b"]})
    )
    assert _ledger(store, "restore", str(restored_into)).returncode == 0
    output = _ledger(store, "output", "b")
    assert output.returncode == 0 and output.stdout == "hi\n", output.stderr
    _record(store, "b").unlink()
    dropped = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert dropped.returncode == 0, dropped.stdout
    assert "fixed: removed the attempts of 'b', which has no record" in dropped.stdout


def test_drop_damaged_without_fix_is_a_usage_error(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _record(store, "b").unlink()
    before = _snapshot(store)
    res = _ledger(store, "doctor", "--drop-damaged")
    assert res.returncode == 2
    assert len(res.stderr.splitlines()) == 1 and "--fix" in res.stderr
    assert _snapshot(store) == before


def test_drop_damaged_accepts_a_lost_record_with_a_history_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _record(store, "b").unlink()
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fixed: dropped b: its record file was lost" in res.stdout
    assert _events(store, "b") == ["ledger.admitted", "ledger.dropped"]
    clean = _ledger(store, "doctor")
    assert clean.returncode == 0 and "problem:" not in clean.stdout, clean.stdout
    assert _ledger(store, "stats", "--json").returncode == 0
    listed = json.loads(_ledger(store, "list", "--json").stdout)
    assert [r["Key"] for r in listed] == ["a", "c"]
    # The key can be admitted again: a new record, not reported as lost.
    assert _ledger(store, "admit", "b").returncode == 0
    assert _ledger(store, "doctor").returncode == 0


def test_drop_damaged_moves_a_damaged_record_aside(tmp_path: Path) -> None:
    store = _store(tmp_path)
    path = _record(store, "b")
    damaged = path.read_bytes()[:30]
    path.write_bytes(damaged)
    path.chmod(0o600)
    plain = _ledger(store, "doctor", "--fix")
    assert plain.returncode == 9 and path.read_bytes() == damaged
    assert "--drop-damaged" in plain.stdout
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert not path.exists()
    aside = list((store / "damaged").iterdir())
    assert [p.read_bytes() for p in aside] == [damaged]  # never deleted
    assert f"fixed: dropped record b: moved {path} to {aside[0]}" in res.stdout
    assert _events(store, "b") == ["ledger.admitted", "ledger.dropped"]
    clean = _ledger(store, "doctor")
    assert clean.returncode == 0 and "problem:" not in clean.stdout, clean.stdout
    claim = _ledger(store, "claim", "--next", "--owner", "w", "--lease", "60s")
    assert claim.returncode == 0


def test_a_deleted_history_is_refused_by_writers_and_named(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store / "history.jsonl").unlink()
    before = _snapshot(store)
    for args in (
        ("admit", "d"),
        ("claim", "--next", "--owner", "w", "--lease", "60s"),
        ("log",),
        ("doctor",),
        ("doctor", "--fix"),
    ):
        res = _ledger(store, *args)
        assert res.returncode == 9, (args, res.returncode, res.stderr)
        shown = res.stderr if args[0] != "doctor" else res.stdout
        assert "history.jsonl: the history is missing" in shown, (args, shown)
        if args[0] != "doctor":
            assert len(res.stderr.splitlines()) == 1
    assert not (store / "history.jsonl").exists()
    assert _snapshot(store) == before
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fixed: started a new history" in res.stdout
    assert _ledger(store, "admit", "d").returncode == 0
    assert _events(store, "d") == ["ledger.admitted"]
    log = _ledger(store, "--json", "log")
    assert json.loads(log.stdout)[0]["event"] == "ledger.dropped"


def test_a_store_written_through_the_library_starts_its_history(tmp_path: Path) -> None:
    """Records and no history (the library keeps none): not damage."""
    root = tmp_path / "lib"
    t0 = Instant.parse(NOW)
    lib = JsonFileStore(str(root))
    rec = TaskState(
        key="x",
        status="pending",
        sequence=1,
        created_by="t",
        created_at=t0,
        updated_by="t",
        updated_at=t0,
    )
    assert lib.compare_and_swap("x", None, rec)
    lib.close()
    assert not (root / "history.jsonl").exists()
    assert _ledger(root, "admit", "y").returncode == 0
    assert (root / "history.jsonl").exists()
    res = _ledger(root, "doctor")
    assert "is lost" not in res.stdout


def test_an_older_store_gets_its_history_mark_at_the_next_append(tmp_path: Path) -> None:
    """A store written before history.started existed has a history and no
    mark: the next append adds the mark, and from then on a deleted history
    is refused."""
    store = _store(tmp_path)
    mark = store / "history.started"
    mark.unlink()
    assert _ledger(store, "admit", "d").returncode == 0
    assert mark.exists() and mark.stat().st_mode & 0o777 == 0o600
    (store / "history.jsonl").unlink()
    res = _ledger(store, "admit", "e")
    assert res.returncode == 9 and "the history is missing" in res.stderr
    assert not (store / "history.jsonl").exists()


def test_drop_damaged_after_a_restart_rolls_no_newer_record_back(tmp_path: Path) -> None:
    """wal.log cut inside its second frame, wal.applied from another boot (as
    after a restart): --drop-damaged replays the first frame (a's admit), but
    a's record file, completed by a later frame, is newer and intact: it is
    kept, with its history, and no claim hands `a` out again at fence 1."""
    store = tmp_path / "store"
    assert _ledger(store, "admit", "a").returncode == 0
    first = (store / "wal.log").stat().st_size
    assert _ledger(store, "admit", "b").returncode == 0
    assert _ledger(store, "claim", "a", "--owner", "w", "--lease", "1h").stdout.strip() == "1"
    assert _ledger(store, "complete", "a", "--owner", "w", "--fence", "1").returncode == 0
    assert _ledger(store, "admit", "c").returncode == 0
    mark = store / "wal.applied"
    mark.write_bytes(b"Z" + mark.read_bytes()[1:])  # another boot's mark
    with open(store / "wal.log", "r+b") as log:
        log.truncate(first + 10)

    refused = _ledger(store, "doctor", "--fix")
    assert refused.returncode == 9 and "--drop-damaged" in refused.stdout, refused.stdout
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert (
        f"the writes past byte {first} are lost, except those already in the record files (kept)"
        in res.stdout
    ), res.stdout
    listed = json.loads(_ledger(store, "list", "--json").stdout)
    assert {r["Key"]: (r["Status"], r["Fence"]) for r in listed} == {
        "a": ("completed", 1),
        "b": ("pending", 0),
        "c": ("pending", 0),
    }
    assert _events(store, "a") == ["ledger.admitted", "ledger.claimed", "ledger.completed"]
    clean = _ledger(store, "doctor")
    assert clean.returncode == 0 and "problem:" not in clean.stdout, clean.stdout
    for _ in range(3):
        claimed = _ledger(store, "claim", "--next", "--owner", "z", "--lease", "1m")
        assert not claimed.stdout.startswith("a "), claimed.stdout
