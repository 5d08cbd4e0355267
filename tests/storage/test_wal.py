"""wal.log (stores/jsonfile/wal.py): a small write is durable with one
fdatasync(2) of its frame, and a power cut loses none of them.

A power cut is simulated from what the contract says is on disk: the store
as the last checkpoint left it (one syncfs(2) made it durable), the log as
acknowledged since (each frame fdatasynced), and, for every other file the
writes since touched, any of the versions a page cache may or may not have
written back: the old one, the new one, none, a history file cut at any
byte. A new boot id (the restart) makes the next opener apply the log again.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile import JsonFileStore, durability, fsutil, wal
from tests.faults_support import LOCK_INFRA, files, invoke, logical_state, unapplied

pytestmark = pytest.mark.skipif(not wal.enabled(), reason="wal.log needs a boot id (Linux)")

LATER = "2026-01-02T05:00:00Z"


def ok(root: Path, *argv: str, now: str = LATER) -> str:
    res = invoke(root, *argv, now=now)
    assert res.code == 0, (argv, res.stderr)
    return res.stdout


def checkpoint(root: Path) -> None:
    store = JsonFileStore(root)
    with store._locked(create=False) as root_fd:
        assert root_fd is not None
        store.checkpoint(root_fd)
    assert (root / wal.WAL_NAME).stat().st_size == 0


def fence(root: Path, key: str) -> str:
    rec = JsonFileStore(root).load(key)
    assert rec is not None
    return str(rec.fence)


def work_before(root: Path) -> None:
    for key in ("a", "b", "c"):
        ok(root, "admit", key, "--task", json.dumps({"n": key}))
    ok(root, "admit", "d", "--needs", "c")
    ok(root, "admit", "e", "--needs", "d")
    ok(root, "admit", "f", "--needs", "a")


def work_after(root: Path) -> None:
    """Acknowledged writes after the checkpoint: every kind a worker makes."""
    ok(root, "claim", "c", "--owner", "w", "--lease", "1h")
    ok(root, "complete", "c", "--owner", "w", "--fence", fence(root, "c"))  # promotes d
    ok(root, "claim", "a", "--owner", "w", "--lease", "1h")
    ok(root, "renew", "a", "--owner", "w", "--fence", fence(root, "a"), "--lease", "2h")
    ok(root, "complete", "a", "--owner", "w", "--fence", fence(root, "a"), "--failed")  # blocks f
    ok(root, "admit", "g", "--task", '{"late": true}')
    ok(root, "run", "--next", "--owner", "w", "--lease", "1h", "--", "sh", "-c", "echo hi")


def cut_power(
    disk: dict[str, bytes], now: dict[str, bytes], rng: random.Random
) -> dict[str, bytes]:
    """One state a power cut may leave: the log as acknowledged; every other
    file the checkpointed bytes, the new ones, or absent (where either is)."""
    out: dict[str, bytes] = {}
    for name in sorted(set(disk) | set(now)):
        old, new = disk.get(name), now.get(name)
        if name == wal.WAL_NAME:
            assert new is not None
            out[name] = new
            continue
        if name == "history.jsonl" and old is not None and new is not None:
            out[name] = new[: rng.randint(len(old), len(new))]  # appended: cut at any byte
            continue
        pick = rng.choice([old, new]) if old != new else old
        if pick is not None:
            out[name] = pick
    return out


def lay_out(root: Path, state: dict[str, bytes], infra_from: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(mode=0o700)
    for name in LOCK_INFRA:
        src = infra_from / name
        if src.is_dir():
            shutil.copytree(src, root / name)
        elif src.exists():
            shutil.copy2(src, root / name)
    for name, data in state.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
        path.chmod(0o600)
    for path in root.rglob("*"):
        if path.is_dir():
            path.chmod(0o700)


@pytest.mark.parametrize("seed", range(4))
def test_a_power_cut_loses_no_acknowledged_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    live = tmp_path / "store"
    work_before(live)
    checkpoint(live)
    disk = files(live)
    work_after(live)
    assert (live / wal.WAL_NAME).stat().st_size > 0  # the writes since are in the log
    expected = logical_state(live)
    now = files(live)

    cut = tmp_path / "cut"
    lay_out(cut, cut_power(disk, now, random.Random(seed)), live)
    other_boot = tmp_path / "boot_id"
    other_boot.write_text("00000000-restarted-0000\n")
    monkeypatch.setattr(wal, "BOOT_ID", str(other_boot))

    assert logical_state(cut) == expected  # opening applied the log again
    assert not unapplied(cut)
    assert (cut / wal.WAL_NAME).stat().st_size == 0  # and checkpointed it
    assert invoke(cut, "doctor", now=LATER).code == 0
    assert (
        json.loads(ok(cut, "--json", "stats"))["counts"]
        == json.loads(ok(live, "--json", "stats"))["counts"]
    )
    # The indexes were rebuilt from the records: the next claims see what the
    # live store sees (d was promoted by c's completion, f blocked by a's failure).
    for _ in range(4):
        got = [
            invoke(root, "claim", "--next", "--owner", "x", "--lease", "1h", now=LATER)
            for root in (live, cut)
        ]
        assert (got[0].code, got[0].stdout) == (got[1].code, got[1].stdout)
    assert got[0].code == 7  # every ready task claimed, in both


def test_a_torn_last_frame_was_never_acknowledged_and_is_dropped(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ok(root, "admit", "a")
    state = logical_state(root)
    log = root / wal.WAL_NAME
    whole = log.read_bytes()
    frame = wal.FRAME.pack(wal.MAGIC, 100, 0) + b'{"format": "ledger_cli.journal"'
    log.write_bytes(whole + frame)  # a crash while the frame was written
    assert logical_state(root) == state
    assert log.read_bytes() == whole  # cut back to the last whole frame
    ok(root, "admit", "b")
    assert [json.loads(r)["Key"] for r in logical_state(root)[0]] == ["a", "b"]


def test_a_damaged_frame_before_another_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ok(root, "admit", "a")
    ok(root, "admit", "b")
    log = root / wal.WAL_NAME
    data = bytearray(log.read_bytes())
    data[wal.FRAME.size + 5] ^= 0xFF  # inside the first frame's payload
    log.write_bytes(bytes(data))
    (root / wal.APPLIED_NAME).unlink()  # as after a restart: the log is applied again
    before = files(root)
    res = invoke(root, "list")
    assert res.code == 9
    assert "wal.log: damaged frame at byte" in res.one_line_error()
    assert files(root) == before  # refused, nothing overwritten


def test_writes_share_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log grows by a frame a write and is emptied by one syncfs(2) once it
    passes CHECKPOINT_BYTES; none is lost across it."""
    monkeypatch.setattr(wal, "CHECKPOINT_BYTES", 4096)
    syncs: list[int] = []
    real = fsutil.sync_filesystem

    def spy(fd: int, shown: str) -> None:
        syncs.append(fd)
        real(fd, shown)

    monkeypatch.setattr(fsutil, "sync_filesystem", spy)
    root = tmp_path / "store"
    sizes = []
    for i in range(40):
        ok(root, "admit", f"k{i:02d}", "--task", json.dumps({"pad": "x" * 200}))
        sizes.append((root / wal.WAL_NAME).stat().st_size)
    assert 0 < len(syncs) < 40
    assert sizes.count(0) == len(syncs)  # each checkpoint emptied the log
    assert max(sizes) <= 4096 + 2048
    assert len(logical_state(root)[0]) == 40


def test_much_dirty_memory_is_flushed_before_the_lock_near_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's syncfs(2) runs under the lock; with others' writes
    pending it would hold the lock while writing them, so a writer that finds
    the log near its checkpoint flushes them first, without the lock."""
    monkeypatch.setattr(wal, "CHECKPOINT_BYTES", 8192)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("Dirty: 262144 kB\nWriteback: 0 kB\n")  # 256 MiB: much
    monkeypatch.setattr(durability, "MEMINFO", str(meminfo))
    root = tmp_path / "store"
    ok(root, "admit", "first")
    held: list[bool] = []
    real = fsutil.sync_filesystem
    store_lock = root / "ledger.lock"

    def spy(fd: int, shown: str) -> None:
        held.append(_lock_held(store_lock))
        real(fd, shown)

    monkeypatch.setattr(fsutil, "sync_filesystem", spy)
    for i in range(30):
        ok(root, "admit", f"k{i:02d}", "--task", json.dumps({"pad": "x" * 200}))
    assert False in held and True in held  # flushed outside, checkpointed inside
    assert held.index(False) < held.index(True)


def _lock_held(path: Path) -> bool:
    """Whether some process (this one) holds the store's flock now."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_write_around_the_log_checkpoints_it_first(tmp_path: Path) -> None:
    """prune rewrites records and history outside the log: a frame replayed
    after it could bring a pruned record back, so the log is emptied first."""
    root = tmp_path / "store"
    ok(root, "admit", "old")
    ok(root, "claim", "old", "--owner", "w", "--lease", "1h")
    ok(root, "complete", "old", "--owner", "w", "--fence", fence(root, "old"))
    assert (root / wal.WAL_NAME).stat().st_size > 0
    ok(root, "prune", "--older-than", "1s", now="2026-03-01T00:00:00Z")
    assert (root / wal.WAL_NAME).stat().st_size == 0
    assert os.path.exists(root / wal.APPLIED_NAME)


def test_after_a_restart_a_damaged_log_is_dropped_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart the log's frames may be the only copy of their writes:
    a damaged log is refused (exit 9), `doctor --fix` does not accept the
    loss, `doctor --fix --drop-damaged` applies the whole frames before the
    damage, keeps the log's bytes in damaged/ and says what was lost in a
    `ledger.dropped` history line."""
    root = tmp_path / "store"
    ok(root, "admit", "a")
    ok(root, "admit", "b")
    ok(root, "admit", "c")
    log = root / wal.WAL_NAME
    data = bytearray(log.read_bytes())
    second = wal.FRAME.size + wal.FRAME.unpack(bytes(data[: wal.FRAME.size]))[1]
    data[second + wal.FRAME.size + 3] ^= 0xFF  # inside the second frame
    log.write_bytes(bytes(data))
    other_boot = tmp_path / "boot_id"
    other_boot.write_text("00000000-restarted-0001\n")
    monkeypatch.setattr(wal, "BOOT_ID", str(other_boot))

    res = invoke(root, "list")
    assert res.code == 9
    assert "--drop-damaged" in res.one_line_error()
    doctor = invoke(root, "doctor", "--fix", now=LATER)
    assert doctor.code == 9 and "wal.log: damaged" in doctor.stdout
    assert log.read_bytes() == bytes(data)  # --fix alone accepts no loss
    dropped = invoke(root, "doctor", "--fix", "--drop-damaged", now=LATER)
    assert dropped.code == 0, dropped.stdout
    assert f"the writes past byte {second} are lost" in dropped.stdout
    assert (root / "damaged" / "wal.log.1").read_bytes() == bytes(data)
    assert invoke(root, "doctor", now=LATER).code == 0
    history = json.loads(ok(root, "--json", "log"))
    assert history[-1]["event"] == "ledger.dropped"
    keys = [json.loads(r)["Key"] for r in logical_state(root)[0]]
    assert "a" in keys  # the first frame's write, before the damage, kept


_KILLED_AT_MOVE_ASIDE = """
import os, signal, sys
from ledger_cli.stores.jsonfile import layout
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
layout.move_aside = die
sys.argv = ["ledger", *sys.argv[1:]]
from ledger_cli.cli.app import main
sys.exit(main())
"""


def test_a_crash_in_doctor_fix_before_the_log_moves_aside_rolls_nothing_back(
    tmp_path: Path,
) -> None:
    """A log cut in its middle in this boot: `doctor --fix` killed before the
    log moves into damaged/ must leave the damage to be seen again, not a
    mark that lets the next opener replay the cut log over the completed
    task (which set it back to claimed)."""
    import subprocess
    import sys

    from tests.cli_support import run_ledger, subprocess_env

    root = tmp_path / "store"
    assert run_ledger(root, "admit", "a").returncode == 0
    fence = run_ledger(root, "claim", "a", "--owner", "o", "--lease", "1h").stdout.split()[-1]
    assert run_ledger(root, "complete", "a", "--owner", "o", "--fence", fence).returncode == 0
    log = root / wal.WAL_NAME
    data = log.read_bytes()
    frames = []
    at = 0
    while at < len(data):
        frames.append(at)
        at += wal.FRAME.size + wal.FRAME.unpack(data[at : at + wal.FRAME.size])[1]
    log.write_bytes(data[: frames[-1] + 4])  # the completion's frame cut short
    assert run_ledger(root, "state", "a").returncode == 9
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_MOVE_ASIDE, "--store", str(root), "doctor", "--fix"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr
    state = run_ledger(root, "--json", "state", "a")
    if state.returncode == 0:
        assert json.loads(state.stdout)["Status"] == "completed", state.stdout
    else:
        assert state.returncode == 9 and "wal.log" in state.stderr, state.stderr
    fixed = run_ledger(root, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert json.loads(run_ledger(root, "--json", "state", "a").stdout)["Status"] == "completed"
    assert run_ledger(root, "doctor").returncode == 0
