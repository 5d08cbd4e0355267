"""A JSON store whose `pruned/<ab>.jsonl` (the only copy of its pruned
records, docs/design.md §6.4) is deleted or damaged, as a fresh `ledger`
process meets it: an admit of a key of that shard, `list --pruned`,
`snapshot` and `stats` exit 9 with one line naming the file and write
nothing (an admit that said "admitted" would run a finished job again);
`doctor` names it, and `doctor --fix` keeps naming it rather than rewrite
`pruned/count` to match what is left (docs/reliability.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import ledger_ok, run_ledger

KEY = "pay-42"


def _shard(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "pruned" / f"{digest[:2]}.jsonl"


def _pruned_store(tmp_path: Path) -> Path:
    store = tmp_path / "st"
    ledger_ok(store, "admit", KEY)
    fence = ledger_ok(store, "claim", KEY, "--owner", "w1", "--lease", "5m").strip()
    ledger_ok(store, "complete", KEY, "--owner", "w1", "--fence", fence)
    ledger_ok(store, "prune", "--older-than", "0s", "--now", "2030-01-01T00:00:00Z")
    assert _shard(store, KEY).is_file()
    return store


def _files(store: Path) -> dict[str, bytes]:
    found = {}
    for dirpath, _, names in os.walk(store):
        for name in names:
            path = Path(dirpath, name)
            found[str(path.relative_to(store))] = path.read_bytes()
    return found


DAMAGES = {
    "deleted": None,
    "garbled": b"garbage\n",
    "a line lost": b"",
    "a byte flipped": "flip",
}


def _damage(store: Path, how: str) -> None:
    shard = _shard(store, KEY)
    damage = DAMAGES[how]
    if damage is None:
        shard.unlink()
    elif damage == "flip":
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0x01
        shard.write_bytes(bytes(data))
    else:
        assert isinstance(damage, bytes)
        shard.write_bytes(damage)


@pytest.mark.parametrize("how", sorted(DAMAGES))
def test_commands_refuse_a_lost_or_damaged_pruned_shard(tmp_path: Path, how: str) -> None:
    store = _pruned_store(tmp_path)
    _damage(store, how)
    shard = str(_shard(store, KEY))
    before = _files(store)
    for args in (("admit", KEY), ("list", "--pruned"), ("snapshot",), ("stats",)):
        if how == "a byte flipped" and args == ("stats",):
            continue  # stats checks each shard's size only (an fstat, nothing read)
        res = run_ledger(store, *args)
        assert (res.returncode, res.stdout) == (9, ""), (args, res)
        (line,) = res.stderr.splitlines()
        assert line.startswith(f"ledger: store: {shard}: is "), (args, line)
        assert _files(store) == before, args  # nothing written: no record, no history line
    for args in (("doctor",), ("doctor", "--fix"), ("doctor",)):
        doctor = run_ledger(store, *args)
        assert doctor.returncode == 9, (args, doctor.stdout)
        assert f"problem: ledger: store: {shard}: is " in doctor.stdout, doctor.stdout
        assert "pruned/count does not count" not in doctor.stdout, doctor.stdout
    assert (store / "pruned" / "count").read_bytes() == before["pruned/count"]
    assert _files(store).get(f"pruned/{Path(shard).name}") == before.get(
        f"pruned/{Path(shard).name}"
    )


def test_other_shards_still_work(tmp_path: Path) -> None:
    """A key of another shard is admitted as before: only the damaged
    shard's keys are in doubt."""
    store = _pruned_store(tmp_path)
    _damage(store, "deleted")
    other = next(
        f"k{i}" for i in range(100) if _shard(store, f"k{i}").name != _shard(store, KEY).name
    )
    assert ledger_ok(store, "admit", other).startswith("admitted")


def test_a_healthy_pruned_store_reads_as_before(tmp_path: Path) -> None:
    store = _pruned_store(tmp_path)
    assert ledger_ok(store, "admit", KEY).startswith("duplicate")
    assert KEY in ledger_ok(store, "list", "--pruned")
    assert run_ledger(store, "doctor").returncode == 0


def test_a_count_of_the_first_format_is_read(tmp_path: Path) -> None:
    """A store pruned by an older version: `pruned/count` holds the number
    only, and tells nothing of the shards; the next prune writes both."""
    store = _pruned_store(tmp_path)
    (store / "pruned" / "count").write_bytes(b"1\n")
    assert ledger_ok(store, "admit", KEY).startswith("duplicate")
    assert run_ledger(store, "doctor").returncode == 0
    ledger_ok(store, "admit", "b")
    fence = ledger_ok(store, "claim", "b", "--owner", "w1", "--lease", "5m").strip()
    ledger_ok(store, "complete", "b", "--owner", "w1", "--fence", fence)
    ledger_ok(store, "prune", "--older-than", "0s", "--now", "2030-01-01T00:00:00Z")
    assert (store / "pruned" / "count").read_bytes().startswith(b"2 ")
    _damage(store, "deleted")
    assert run_ledger(store, "admit", KEY).returncode == 9


def _finish(store: Path, key: str) -> None:
    ledger_ok(store, "admit", key)
    fence = ledger_ok(store, "claim", key, "--owner", "w1", "--lease", "5m").strip()
    ledger_ok(store, "complete", key, "--owner", "w1", "--fence", fence)


def test_a_torn_line_left_by_a_crash_is_no_damage(tmp_path: Path) -> None:
    """A prune killed in its append leaves a torn last line and no count;
    the next prune notes that shard as it is, and a later append to it cuts
    the torn line (what pruned/count says of it moves along)."""
    store = _pruned_store(tmp_path)
    shard = _shard(store, KEY)
    (store / "pruned" / "count").unlink()
    with shard.open("ab") as f:
        f.write(b'["torn",')
    other = next(f"o{i}" for i in range(100) if _shard(store, f"o{i}") != shard)
    same = next(f"s{i}" for i in range(1000) if _shard(store, f"s{i}") == shard)
    for key in (other, same):
        _finish(store, key)
        ledger_ok(store, "prune", "--older-than", "0s", "--now", "2030-01-01T00:00:00Z")
        assert ledger_ok(store, "admit", KEY).startswith("duplicate")
    assert not shard.read_bytes().count(b"torn")
    listed = ledger_ok(store, "list", "--pruned")
    assert all(key in listed for key in (KEY, other, same)), listed
    assert run_ledger(store, "doctor").returncode == 0
