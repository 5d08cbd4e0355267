"""`ledger doctor` on a real JSON store: problems exit 9, notes exit 0."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import ledger_ok, run_ledger


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "admit", "b", "--needs", "a", "--needs", "ghost").returncode == 0
    return store


def _record_files(store: Path) -> list[Path]:
    return sorted((store / "records").glob("*/*.json"))


def test_healthy_store_with_a_note(tmp_path: Path) -> None:
    store = _store(tmp_path)
    res = run_ledger(store, "doctor")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        f"store {store}: 2 records",
        "note: b: needs ghost, which was never admitted",
    ]
    doc = json.loads(run_ledger(store, "doctor", "--json").stdout)
    assert doc["problems"] == [] and doc["records"] == 2 and len(doc["notes"]) == 1


def test_stray_temp_file_is_a_note_and_fix_removes_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    shard = _record_files(store)[0].parent
    stray = shard / ".leftover.123.abcd.tmp"
    stray.write_bytes(b"half a record")
    os.chmod(stray, 0o600)
    res = run_ledger(store, "doctor")
    assert res.returncode == 0
    assert f"note: {stray}: a temporary file left by a crash (--fix removes it)" in res.stdout
    fixed = run_ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0 and f"fixed: removed {stray}" in fixed.stdout
    assert not stray.exists()


def test_wide_modes_are_problems(tmp_path: Path) -> None:
    store = _store(tmp_path)
    victim = _record_files(store)[0]
    os.chmod(victim, 0o644)
    os.chmod(store / "records", 0o755)
    res = run_ledger(store, "doctor")
    assert res.returncode == 9
    assert f"problem: {victim}: file mode 0644 is wider than 0600" in res.stdout
    assert f"problem: {store / 'records'}: directory mode 0755 is wider than 0700" in res.stdout


def test_corrupt_and_invalid_records_are_each_named(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first, second = _record_files(store)
    first.write_bytes(b'{"Key": "a", "Status": ')
    rec = json.loads(second.read_text())
    rec["Status"] = "nonsense"
    second.write_text(json.dumps(rec))
    res = run_ledger(store, "--json", "doctor")
    assert res.returncode == 9
    problems = json.loads(res.stdout)["problems"]
    assert any(p.startswith(f"{first}: corrupt record: decode:") for p in problems)
    assert any(
        p.startswith(f"{second}: invalid record:") and "unknown status" in p for p in problems
    )


def test_unknown_format_version_is_a_problem(tmp_path: Path) -> None:
    store = _store(tmp_path)
    meta = store / "ledger-store.json"
    doc = json.loads(meta.read_text())
    doc["version"] = 99
    meta.write_text(json.dumps(doc))
    res = run_ledger(store, "doctor")
    assert res.returncode == 9
    assert "unknown store format version 99 (made by a newer ledger_cli release)" in (
        res.stdout + res.stderr
    )


@pytest.mark.parametrize("version", [True, None, "2", 2.0, [2]])
def test_a_format_version_that_is_no_number_is_one_plain_line(
    tmp_path: Path, version: object
) -> None:
    """A version that is not a whole number is shown in words, never as Python
    writes the value (`True`, `None`, `'2'`)."""
    store = _store(tmp_path)
    meta = store / "ledger-store.json"
    doc = json.loads(meta.read_text())
    doc["version"] = version
    meta.write_text(json.dumps(doc))
    res = run_ledger(store, "list")
    assert res.returncode == 9, res.stdout
    assert res.stderr == (
        f"ledger: store: {meta}: corrupt store metadata "
        "(its format version is not a whole number)\n"
    )


def test_a_ready_index_of_a_newer_format_says_so(tmp_path: Path) -> None:
    """A ready index manifest of a future format is one made by a newer
    release, not a corrupt one; `doctor --fix` rebuilds it for this one."""
    store = _store(tmp_path)
    manifest = store / "ready" / "manifest"
    head, _, rest = manifest.read_text().partition("\n")
    assert head.startswith("ledger_cli.ready 5 ")
    manifest.write_text(head.replace("ready 5", "ready 6") + "\n" + rest)
    res = run_ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert res.returncode == 9, res.stdout
    assert res.stderr == (
        f"ledger: store: {manifest}: ready index of format 6, made by a newer ledger_cli "
        "release (this one reads format 5): use that release, or rebuild the index for "
        "this one: ledger doctor --fix\n"
    )
    assert "corrupt" not in run_ledger(store, "doctor").stdout
    assert run_ledger(store, "doctor", "--fix").returncode == 0
    assert ledger_ok(store, "claim", "--next", "--owner", "w", "--lease", "1m") == "a 1\n"


def test_a_dependents_index_missing_a_record_is_a_problem_and_fix_rebuilds_it(
    tmp_path: Path,
) -> None:
    from ledger_cli.stores.jsonfile import depsindex, key_digest

    store = _store(tmp_path)  # b needs a and ghost
    digest = key_digest("a")
    assert digest is not None
    need_file = store / depsindex.DEPS_DIR / digest[:2] / digest
    assert need_file.read_text().split() == [key_digest("b")]
    need_file.write_text("")  # as if the append before b's record had been lost
    bad = run_ledger(store, "doctor")
    assert bad.returncode == 9, bad.stdout + bad.stderr
    assert (
        "problem: dependents index: 'b' is missing from the dependents of 'a' "
        "(ledger doctor --fix rebuilds the index)"
    ) in bad.stdout
    fixed = run_ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fixed: rebuilt the dependents index from the records" in fixed.stdout
    assert need_file.read_text().split() == [key_digest("b")]
    assert run_ledger(store, "doctor").returncode == 0


def test_a_pruned_need_and_its_dropped_history_are_no_notes(url: str) -> None:
    """A completed need `ledger prune` pruned is still a record (not "never
    admitted"), and its history was dropped by prune (not by another program)."""
    assert run_ledger(url, "admit", "a").returncode == 0
    assert run_ledger(url, "admit", "b", "--needs", "a").returncode == 0
    ran = run_ledger(url, "run", "a", "--owner", "w", "--lease", "1m", "--", "true")
    assert ran.returncode == 0, ran.stderr
    assert run_ledger(url, "prune", "--older-than", "0s").returncode == 0
    res = run_ledger(url, "--json", "doctor")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["problems"] == [] and doc["notes"] == [], doc


@pytest.mark.parametrize("name", ["store", "store.db"], ids=["json", "sqlite"])
def test_every_store_counts_pruned_records_apart(tmp_path: Path, name: str) -> None:
    """A pruned record is a row on SQL stores and a file moved aside on the
    JSON store: doctor counts it apart on both."""
    store = tmp_path / name
    for key in ("a", "b"):
        ledger_ok(store, "admit", key)
    claimed = json.loads(ledger_ok(store, "--json", "claim", "a", "--owner", "w", "--lease", "1m"))
    ledger_ok(store, "complete", "a", "--owner", "w", "--fence", str(claimed["fence"]))
    assert ledger_ok(store, "prune", "--older-than", "0s") == "pruned 1 record\n"
    assert ledger_ok(store, "doctor").splitlines()[0] == f"store {store}: 1 record, 1 pruned"
    doc = json.loads(ledger_ok(store, "doctor", "--json"))
    assert (doc["records"], doc["pruned"], doc["problems"]) == (1, 1, [])


def _uncounted(store: Path, *problems: str) -> None:
    """`ledger doctor` on a store whose records it could not read: no count
    (not `0 records`), the problems named, exit 9; `--json`: records null."""
    res = run_ledger(store, "doctor")
    assert res.returncode == 9, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"store {store}: could not count the records"
    assert not any(line.endswith(" records") for line in lines[1:]), lines
    for problem in problems:
        assert any(line.startswith("problem: ") and problem in line for line in lines), lines
    doc = json.loads(run_ledger(store, "--json", "doctor").stdout)
    assert doc["records"] is None and doc["problems"], doc


def test_records_that_are_a_file_are_not_counted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store / "records").rename(tmp_path / "records.kept")
    (store / "records").write_bytes(b"")
    os.chmod(store / "records", 0o600)
    _uncounted(store, f"{store / 'records'}: is a symlink or not a directory")


def test_records_through_a_symlink_are_not_counted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (store / "records").rename(tmp_path / "records.elsewhere")
    (store / "records").symlink_to(tmp_path / "records.elsewhere")
    _uncounted(store, f"{store / 'records'}: a symlink inside the store")


def test_a_store_doctor_cannot_open_is_not_counted(tmp_path: Path) -> None:
    """A damaged wal.log (after a restart: its writes may be the only copy)
    keeps the store shut: doctor reads no record."""
    from ledger_cli.stores.jsonfile import wal

    if not wal.enabled():
        pytest.skip("wal.log needs a boot id (Linux)")
    store = _store(tmp_path)
    log = store / wal.WAL_NAME
    data = bytearray(log.read_bytes())
    data[wal.FRAME.size + 5] ^= 0xFF  # inside the first frame's payload
    log.write_bytes(bytes(data))
    (store / wal.APPLIED_NAME).unlink()  # as after a restart: the log is applied again
    _uncounted(store, "wal.log: damaged frame at byte 0")


def test_records_it_cannot_list_are_named_and_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory the walk cannot list (mode 000 for a user that is not
    root: os.walk skips it silently) is a problem, and under records/ the
    records read are not all the store's. In process: the tests run as root."""
    from ledger_cli.cli.commands.doctor.files import walk
    from ledger_cli.cli.commands.doctor.findings import Findings

    store = _store(tmp_path)
    shard = _record_files(store)[0].parent
    scandir = os.scandir

    def refusing(path: Any) -> Any:
        if os.fspath(path) == str(shard):
            raise PermissionError(13, "Permission denied", str(shard))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    found = Findings()
    walked = walk(str(store), found)
    assert f"{shard}: unreadable: Permission denied" in found.problems
    assert not walked.listed and not walked.all_read
