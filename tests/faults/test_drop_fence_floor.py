"""A key whose record `ledger doctor --fix --drop-damaged` dropped while a
worker held its lease, admitted again: its claims go on above every fence
the dropped record granted, so that worker's fence stays stale ("a worker
that lost its lease never writes again", docs/design.md §3.2). Every
command is a fresh `ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_sane

NOW = "2026-03-04T05:06:07Z"
HELD = 5
"""The fence worker a holds when k's record goes."""


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sane(store, "--now", NOW, "--actor", "t", *args)


def _held(tmp_path: Path) -> Path:
    """A store where worker a holds k's live lease at fence HELD."""
    store = tmp_path / "store"
    assert _ledger(store, "admit", "k").returncode == 0
    for fence in range(1, HELD):
        assert _ledger(store, "claim", "k", "--owner", "a", "--lease", "1h").stdout == f"{fence}\n"
        released = _ledger(store, "release", "k", "--owner", "a", "--fence", str(fence))
        assert released.returncode == 0, released.stderr
    assert _ledger(store, "claim", "k", "--owner", "a", "--lease", "1h").stdout == f"{HELD}\n"
    return store


def _record(store: Path) -> Path:
    digest = key_digest("k")
    assert digest is not None
    return store / "records" / digest[:2] / f"{digest}.json"


def _floor(store: Path) -> int:
    floor: int = json.loads((store / "ledger-store.json").read_text())["fence_floor"]
    return floor


def _admitted_again_a_stays_fenced(store: Path) -> None:
    """Admit k again; b claims (and releases) until it holds a live lease at a
    fence of HELD or above: a's fence HELD is stale to every write."""
    assert _ledger(store, "admit", "k").returncode == 0
    fences = []
    for _ in range(HELD + 1):
        claimed = _ledger(store, "claim", "k", "--owner", "b", "--lease", "1h")
        assert claimed.returncode == 0, claimed.stderr
        fences.append(int(claimed.stdout))
        if fences[-1] >= HELD:
            break
        _ledger(store, "release", "k", "--owner", "b", "--fence", claimed.stdout.strip())
    assert fences[0] > HELD, f"fences started again: {fences}"
    for verb, extra in (("complete", ()), ("renew", ("--lease", "1h")), ("release", ())):
        res = _ledger(store, verb, "k", "--owner", "a", "--fence", str(HELD), *extra)
        assert res.returncode == 5, (verb, res.stdout, res.stderr)
        assert res.stderr.startswith("ledger: fence token is stale"), res.stderr
    state = json.loads(_ledger(store, "--json", "state", "k").stdout)
    assert (state["Status"], state["Owner"], state["Fence"]) == ("claimed", "b", fences[-1])


def test_a_lost_record_of_a_live_lease_raises_the_fence_floor(tmp_path: Path) -> None:
    store = _held(tmp_path)
    healthy = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert healthy.returncode == 0 and "fence floor" not in healthy.stdout, healthy.stdout
    assert _floor(store) == 0  # nothing dropped, nothing raised
    _record(store).unlink()
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fixed: dropped k: its record file was lost" in res.stdout
    assert f"fixed: raised the fence floor from 0 to {HELD}" in res.stdout
    assert _floor(store) == HELD
    _admitted_again_a_stays_fenced(store)


@pytest.mark.parametrize(
    ("old", "new"),
    [(b'"Owner":"a"', b'"Owner":"c"'), (b'"Fence":5', b'"Fence":1')],
    ids=["owner-byte", "fence-byte"],
)
def test_a_checksum_damaged_record_of_a_live_lease_raises_the_fence_floor(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """One byte changed: the checksum fails. Damaged in its Fence, the file
    shows a lower fence than it held: the history's claim line still bounds it."""
    store = _held(tmp_path)
    path = _record(store)
    data = path.read_bytes()
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, new))
    assert _ledger(store, "doctor").returncode == 9
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fixed: dropped record k: moved" in res.stdout
    assert _floor(store) == HELD
    _admitted_again_a_stays_fenced(store)


def test_a_damaged_record_whose_history_is_lost_too_keeps_its_own_fence(
    tmp_path: Path,
) -> None:
    """No history line is left to bound it: the fence the damaged file still
    shows is what the floor rises to."""
    store = _held(tmp_path)
    path = _record(store)
    path.write_bytes(path.read_bytes().replace(b'"Owner":"a"', b'"Owner":"c"'))
    (store / "history.jsonl").unlink()
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fixed: dropped a record of unknown key" in res.stdout
    assert _floor(store) == HELD
    _admitted_again_a_stays_fenced(store)


def test_the_floor_follows_every_fence_the_store_shows_and_never_falls(tmp_path: Path) -> None:
    """The floor is the highest fence of any record or history line (another
    key's too: a key's own lines are not always whole); a later drop at a
    lower fence leaves it."""
    store = _held(tmp_path)
    assert _ledger(store, "admit", "other").returncode == 0
    for fence in range(1, 9):
        assert _ledger(store, "claim", "other", "--owner", "o", "--lease", "1h").returncode == 0
        assert (
            _ledger(store, "release", "other", "--owner", "o", "--fence", str(fence)).returncode
            == 0
        )
    _record(store).unlink()
    assert _ledger(store, "doctor", "--fix", "--drop-damaged").returncode == 0
    assert _floor(store) == 8
    assert _ledger(store, "admit", "k").returncode == 0
    assert _ledger(store, "admit", "low").returncode == 0
    assert _ledger(store, "claim", "low", "--owner", "o", "--lease", "1h").stdout == "9\n"
    _record(store).unlink()  # k again, at fence 8 (admitted at the floor)
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "fence floor" in res.stdout  # 9: low's claim
    assert _floor(store) == 9
    (store / "ledger-store.json").write_text(
        (store / "ledger-store.json").read_text().replace('"fence_floor": 9', '"fence_floor": 20')
    )
    assert _ledger(store, "admit", "k").returncode == 0
    _record(store).unlink()
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0 and "fence floor" not in res.stdout, res.stdout
    assert _floor(store) == 20


def test_a_lost_record_no_history_line_names_is_bounded_by_the_store(tmp_path: Path) -> None:
    """The history is lost with the record: no line names k, only its
    live/ marker is left, which the drop frees. The floor rises to the
    highest fence the store still shows (another key's, above k's here)."""
    store = _held(tmp_path)
    assert _ledger(store, "admit", "other").returncode == 0
    for fence in range(1, HELD + 3):
        assert _ledger(store, "claim", "other", "--owner", "o", "--lease", "1h").returncode == 0
        released = _ledger(store, "release", "other", "--owner", "o", "--fence", str(fence))
        assert released.returncode == 0
    _record(store).unlink()
    (store / "history.jsonl").unlink()
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert f"fixed: raised the fence floor from 0 to {HELD + 2}" in res.stdout
    assert _floor(store) == HELD + 2
    _admitted_again_a_stays_fenced(store)
