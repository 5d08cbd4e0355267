"""Damage `ledger doctor` must find in a JSON store's side files, named by the
file that is damaged: wal.log's frames already applied (walcheck.py), a
flipped byte in wal.applied, and pruned/count. Every command is a fresh
`ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr + res.stdout, res.stderr
    return res


def _keys(store: Path) -> dict[str, str]:
    res = _ledger(store, "list", "--json")
    assert res.returncode == 0, res.stderr
    return {r["Key"]: r["Status"] for r in json.loads(res.stdout)}


def _restart(store: Path) -> None:
    """wal.applied from another boot, as after a restart of the machine."""
    mark = store / "wal.applied"
    mark.write_bytes(b"X" + mark.read_bytes()[1:])


def _logged_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert _ledger(store, "admit", key).returncode == 0
    assert (store / "wal.log").stat().st_size > 0, "the admits are in wal.log"
    return store


def _flip_applied_frame(store: Path) -> bytes:
    """A byte of the first frame (a's admit, applied already) changed."""
    return _flip_applied_frame_of(store, b'"a"')


def _flip_applied_frame_of(store: Path, key: bytes) -> bytes:
    log = store / "wal.log"
    data = bytearray(log.read_bytes())
    at = data.find(key)
    assert at >= 0, "the write is in wal.log"
    data[at + 1] = ord("z")
    log.write_bytes(bytes(data))
    return bytes(data)


def test_doctor_finds_a_damaged_frame_already_applied(tmp_path: Path) -> None:
    store = _logged_store(tmp_path)
    damaged = _flip_applied_frame(store)
    assert _keys(store) == {"a": "pending", "b": "pending"}  # applied: in the files

    res = _ledger(store, "doctor")
    assert res.returncode == 9, res.stdout
    assert f"problem: {store}/wal.log: damaged frame at byte 0" in res.stdout, res.stdout
    assert "ledger doctor --fix makes them durable" in res.stdout, res.stdout
    assert (store / "wal.log").read_bytes() == damaged, "doctor wrote"
    as_json = json.loads(_ledger(store, "--json", "doctor").stdout)
    assert as_json["records"] == 2 and len(as_json["problems"]) == 1, as_json

    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert "its writes are durable; the log moved to" in fixed.stdout, fixed.stdout
    assert (store / "damaged" / "wal.log.1").read_bytes() == damaged
    clean = _ledger(store, "doctor")
    assert clean.returncode == 0 and "problem:" not in clean.stdout, clean.stdout
    _restart(store)  # nothing left to apply again: the writes are in the files
    assert _keys(store) == {"a": "pending", "b": "pending"}
    assert _ledger(store, "admit", "c").returncode == 0


def _flip_mark(store: Path, field: int, digit: int) -> None:
    """One digit of wal.applied's `field` (1: offset, 2: the last frame's
    start, 3: its CRC-32) changed."""
    mark = store / "wal.applied"
    words = mark.read_bytes().split(b" ")
    word = bytearray(words[field])
    word[-digit] = ord("7") if word[-digit] != ord("7") else ord("3")
    words[field] = bytes(word)
    mark.write_bytes(b" ".join(words))


def test_a_flipped_byte_in_wal_applied_is_not_called_a_damaged_log(tmp_path: Path) -> None:
    """wal.applied is derived: a byte of it flipped, the log (whole) is applied
    again, as after a restart, and every command answers as before."""
    for field, digit in ((1, 4), (2, 2), (3, 1), (3, 10)):
        store = _logged_store(tmp_path / f"f{field}d{digit}")
        assert _ledger(store, "claim", "a", "--owner", "w", "--lease", "1h").returncode == 0
        before = _keys(store)
        _flip_mark(store, field, digit)
        res = _ledger(store, "list", "--json")
        assert res.returncode == 0, (field, digit, res.stderr)
        assert _keys(store) == before
        doctor = _ledger(store, "doctor")
        assert doctor.returncode == 0 and "problem:" not in doctor.stdout, doctor.stdout
        assert _ledger(store, "complete", "a", "--owner", "w", "--fence", "1").returncode == 0
    # Whereas a log cut to its first frame lost the frame the mark names: the
    # log's damage, not the mark's.
    store = tmp_path / "cut"
    assert _ledger(store, "admit", "a").returncode == 0
    first = (store / "wal.log").stat().st_size
    assert _ledger(store, "admit", "b").returncode == 0
    with open(store / "wal.log", "r+b") as log:
        log.truncate(first)
    res = _ledger(store, "list")
    assert res.returncode == 9 and f"{store}/wal.log: damaged" in res.stderr, res.stderr


def _pruned_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("old", "new"):
        assert _ledger(store, "admit", key, "--now", "2026-01-01T00:00:00Z").returncode == 0
    claim = ("claim", "old", "--owner", "w", "--lease", "1m", "--now", "2026-01-01T00:00:00Z")
    assert _ledger(store, *claim).returncode == 0
    done = ("complete", "old", "--owner", "w", "--fence", "1", "--now", "2026-01-01T00:00:00Z")
    assert _ledger(store, *done).returncode == 0
    assert _ledger(store, "prune", "--older-than", "1d").returncode == 0
    return store


def test_a_damaged_pruned_count_is_named_and_written_again(tmp_path: Path) -> None:
    """A digit of pruned/count's line for a shard changed: the shard is intact,
    so the count is named, and `doctor --fix` writes it again from the shards."""
    store = _pruned_store(tmp_path)
    count = store / "pruned" / "count"
    head, line = count.read_text().splitlines()
    shard, lines, size, crc = line.split(" ")
    count.write_text(f"{head}\n{shard} {lines} {int(size) + 1} {crc}\n")
    shard_file = store / "pruned" / f"{shard}.jsonl"
    shard_bytes = shard_file.read_bytes()

    for args in (("doctor",), ("stats",), ("snapshot",), ("list", "--pruned")):
        res = _ledger(store, *args)
        said = res.stdout if args == ("doctor",) else res.stderr
        assert res.returncode == 9, (args, res.stdout, res.stderr)
        assert f"{count}: is damaged" in said, (args, said)
        assert f"{shard}.jsonl: is damaged" not in said, (args, said)
        assert "ledger doctor --fix writes it again" in said, (args, said)

    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert f"fixed: {count}: written again from the shards" in fixed.stdout, fixed.stdout
    assert shard_file.read_bytes() == shard_bytes
    assert count.read_text() == f"{head}\n{line}\n"
    assert _ledger(store, "doctor").returncode == 0
    stats = json.loads(_ledger(store, "--json", "stats").stdout)
    assert stats["pruned"] == 1, stats
    # A damaged shard is still the shard's damage, which --fix never writes over.
    shard_file.write_bytes(shard_bytes.replace(b'"w"', b'"v"'))
    res = _ledger(store, "doctor", "--fix")
    assert res.returncode == 9 and f"{shard_file}: is damaged" in res.stdout, res.stdout


def test_doctor_json_counts_no_pruned_keys_it_could_not_read(tmp_path: Path) -> None:
    """When doctor could not count the records (a damaged wal.log after a
    restart), `pruned` is null like `records`, not 0."""
    store = _pruned_store(tmp_path)
    assert _ledger(store, "admit", "x").returncode == 0
    _flip_applied_frame_of(store, b'"x"')
    _restart(store)
    report = json.loads(_ledger(store, "--json", "doctor").stdout)
    assert report["records"] is None and report["pruned"] is None, report


def test_a_damaged_attempt_file_names_its_remedy_and_drop_damaged_moves_it(
    tmp_path: Path,
) -> None:
    """An attempt file emptied or garbled: `state` and `output` of its key
    exit 9 naming it, `doctor` names the remedy, `--fix` keeps it (the only
    copy), `--fix --drop-damaged` moves it into damaged/, its bytes kept,
    with a `ledger.dropped` history line."""
    for n, damage in enumerate((b"", b"garbled\n")):
        store = tmp_path / f"store{n}"
        for key in ("a", "b"):
            assert _ledger(store, "admit", key).returncode == 0
            run = ("run", key, "--owner", "w", "--lease", "1m", "--", "echo", "hi")
            assert _ledger(store, *run).returncode == 0
        digest = key_digest("a")
        assert digest is not None
        attempt = store / "attempts" / digest[:2] / digest / "1.att"
        attempt.write_bytes(damage)
        for args in (("state", "a"), ("output", "a")):
            res = _ledger(store, *args)
            assert res.returncode == 9 and str(attempt) in res.stderr, (args, res.stderr)
        res = _ledger(store, "doctor")
        assert res.returncode == 9, res.stdout
        assert f"problem: ledger: store: {attempt}: is not an attempt file" in res.stdout
        assert "accept the loss: ledger doctor --fix --drop-damaged)" in res.stdout, res.stdout
        fixed = _ledger(store, "doctor", "--fix")
        assert fixed.returncode == 9 and attempt.read_bytes() == damage, fixed.stdout

        dropped = _ledger(store, "doctor", "--fix", "--drop-damaged")
        assert dropped.returncode == 0, dropped.stdout
        assert "fixed: moved a damaged attempt file to" in dropped.stdout, dropped.stdout
        assert not attempt.exists()
        assert [p.read_bytes() for p in (store / "damaged").iterdir()] == [damage]
        # A history line as a dropped record file has, naming the key and both paths.
        (aside,) = (store / "damaged").iterdir()
        log = _ledger(store, "--json", "log", "--event", "ledger.dropped")
        assert log.returncode == 0, log.stderr
        (line,) = json.loads(log.stdout)
        assert (line["key"], line["event"]) == ("a", "ledger.dropped"), line
        assert line["data"] == (
            f"an attempt of a dropped: its damaged file {attempt} moved to {aside}"
        ), line
        assert _ledger(store, "doctor").returncode == 0
        a_state = json.loads(_ledger(store, "--json", "state", "a").stdout)
        assert a_state["attempts"] == [], a_state
        assert _ledger(store, "output", "b").stdout == "hi\n"
