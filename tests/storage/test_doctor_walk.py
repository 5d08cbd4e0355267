"""`ledger doctor` on a JSON store reads each record file once: the walk's
records (read without the lock) stand for the index checks' first pass, and
only a problem that pass finds sends the check under the lock, to a fresh
read of every file. A record written between the walk and the checks is
judged there on its new contents."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.jsonfile import JsonFileStore
from ledger_cli.stores.jsonfile import reading as jsonfile_reading
from tests.cli_support import T0, Cli


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[JsonFileStore, Cli]:
    store = JsonFileStore(str(tmp_path / "store"))
    cli = Cli(store, monkeypatch)
    for key in ("a", "b", "c"):
        cli.ok("admit", key)
    cli.ok("admit", "d", "--needs", "a")
    return store, cli


def _count_scans(monkeypatch: pytest.MonkeyPatch, store: JsonFileStore) -> list[bool]:
    """One entry per scan of every record file by the index checks: whether it
    ran under the store lock."""
    scans: list[bool] = []
    real = jsonfile_reading.scan_records

    def counted(*args: Any, **kw: Any) -> Any:
        scans.append(store._holding())
        return real(*args, **kw)

    monkeypatch.setattr(jsonfile_reading, "scan_records", counted)
    return scans


def test_a_clean_store_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, cli = _store(tmp_path, monkeypatch)
    scans = _count_scans(monkeypatch, store)
    res = cli("--json", "doctor")
    assert res.code == 0, res.stdout + res.stderr
    assert res.json()["problems"] == [] and res.json()["records"] == 4
    assert scans == []  # the walk's records served the deps, ready and tally checks


def test_a_record_written_after_the_walk_is_judged_under_the_lock_on_its_new_contents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, cli = _store(tmp_path, monkeypatch)
    scans = _count_scans(monkeypatch, store)
    real_seen = store.seen_files
    walked: list[str] = []

    def then_a_writer(seen: dict[str, Any]) -> None:
        real_seen(seen)
        walked.extend(sorted(rec.key for rec in seen.values()))
        # Another writer claims b: its record and the tally change after the
        # walk read b as pending, so the walk's records disagree with the tally.
        other = JsonFileStore(store.path)
        try:
            assert Ledger(other).claim("w", "b", "w", timedelta(minutes=5), Instant.parse(T0)) == 1
        finally:
            other.close()

    monkeypatch.setattr(store, "seen_files", then_a_writer)
    res = cli("--json", "doctor")
    assert walked == ["a", "b", "c", "d"]
    assert res.code == 0, res.stdout + res.stderr
    assert res.json()["problems"] == []
    assert scans and all(scans)  # the first pass's problem, judged again under the lock


def test_a_real_problem_is_still_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_cli.stores.jsonfile import tally

    store, cli = _store(tmp_path, monkeypatch)
    counts_file = tmp_path / "store" / tally.TALLY_DIR / tally.COUNTS
    counts = tally.parse_counts(counts_file.read_bytes(), str(counts_file))
    assert counts["pending"] == 4
    counts["pending"] = 7  # a whole counts file, its checksum right, the count wrong
    counts_file.write_bytes(tally.encode_counts(counts))
    scans = _count_scans(monkeypatch, store)
    res = cli("--json", "doctor")
    assert res.code == 9, res.stdout + res.stderr
    assert any("tally: pending count is 7, the records say 4" in p for p in res.json()["problems"])
    assert scans and all(scans)


def test_a_record_file_the_walk_could_not_read_leaves_the_checks_their_own_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger_cli.stores.jsonfile import key_digest

    store, cli = _store(tmp_path, monkeypatch)
    digest = key_digest("c")
    assert digest is not None
    victim = tmp_path / "store" / "records" / digest[:2] / f"{digest}.json"
    outside = tmp_path / "outside.json"
    outside.write_bytes(victim.read_bytes())
    victim.unlink()
    victim.symlink_to(outside)
    scans = _count_scans(monkeypatch, store)
    res = cli("--json", "doctor")
    assert res.code == 9, res.stdout + res.stderr
    problems = res.json()["problems"]
    assert f"{victim}: a symlink inside the store" in problems
    assert res.json()["records"] == 3  # a, b, d: c's record is not taken from outside
    assert scans[:1] == [False]  # not the walk's partial records: a scan of their own
