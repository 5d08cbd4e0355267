"""swap.py: an unsynced file put in place by renameat2(RENAME_EXCHANGE) and an
unlink by the process's retiring thread, from its `EXCHANGE_AFTER`-th
unsynced replace on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile import swap
from tests.cli_support import run_ledger, subprocess_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")


@pytest.fixture
def exchange_now(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Exchange from the first unsynced replace; the names exchanged, in order."""
    monkeypatch.setattr(swap, "EXCHANGE_AFTER", 0)
    fn = swap._load()
    assert fn is not None, "renameat2 is not available here"
    seen: list[str] = []

    def spy(src: int, tmp: bytes, dst: int, name: bytes, flags: int) -> int:
        seen.append(os.fsdecode(name))
        return fn(src, tmp, dst, name, flags)

    monkeypatch.setattr(swap, "_renameat2", spy)
    return seen


def _dir_fd(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def test_an_unsynced_file_replaces_its_target_and_leaves_no_temporary(
    tmp_path: Path, exchange_now: list[str]
) -> None:
    (tmp_path / "target").write_bytes(b"old")
    (tmp_path / ".target.1.tmp").write_bytes(b"new")
    fd = _dir_fd(tmp_path)
    try:
        swap.into_place(".target.1.tmp", "target", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
        # No target yet: a plain rename.
        (tmp_path / ".fresh.1.tmp").write_bytes(b"first")
        swap.into_place(".fresh.1.tmp", "fresh", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
    finally:
        os.close(fd)
    assert exchange_now == ["target", "fresh"]
    swap.wait_retired()
    assert (tmp_path / "target").read_bytes() == b"new"
    assert (tmp_path / "fresh").read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "target"]


def test_a_missing_temporary_is_an_error(tmp_path: Path, exchange_now: list[str]) -> None:
    (tmp_path / "target").write_bytes(b"old")
    fd = _dir_fd(tmp_path)
    try:
        with pytest.raises(FileNotFoundError):
            swap.into_place(".gone.tmp", "target", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
    finally:
        os.close(fd)
    assert (tmp_path / "target").read_bytes() == b"old"


def test_the_old_file_is_unlinked_by_another_thread(
    tmp_path: Path, exchange_now: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exchange returns before the old file's unlink (which may wait for a
    discard, ~3 ms: bench_unlink.py), made by the retiring thread."""
    import threading

    release = threading.Event()
    callers: list[str] = []
    real_unlink = os.unlink

    def slow_unlink(name: str, *, dir_fd: int | None = None) -> None:
        callers.append(threading.current_thread().name)
        assert release.wait(timeout=60)
        real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(swap.os, "unlink", slow_unlink)
    (tmp_path / "target").write_bytes(b"old")
    (tmp_path / ".target.1.tmp").write_bytes(b"new")
    fd = _dir_fd(tmp_path)
    try:
        swap.into_place(".target.1.tmp", "target", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
    finally:
        os.close(fd)  # the thread holds its own descriptor of the directory
    assert (tmp_path / "target").read_bytes() == b"new"
    assert (tmp_path / ".target.1.tmp").read_bytes() == b"old"  # not unlinked yet
    release.set()
    swap.wait_retired()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    assert callers == ["ledger-retire"]


def test_a_forked_child_unlinks_its_own_retired_files(
    tmp_path: Path, exchange_now: list[str]
) -> None:
    """The retiring thread does not survive fork(2): a child starts its own,
    and its exit waits for its files, not for the parent's."""
    fd = _dir_fd(tmp_path)
    try:
        for name in ("parent", "child"):
            (tmp_path / name).write_bytes(b"old")
        (tmp_path / ".parent.1.tmp").write_bytes(b"new")
        swap.into_place(".parent.1.tmp", "parent", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
        pid = os.fork()
        if pid == 0:  # the child: retire one file, wait for it, report by exit status
            code = 1
            try:
                (tmp_path / ".child.1.tmp").write_bytes(b"new")
                swap.into_place(".child.1.tmp", "child", src_dir_fd=fd, dst_dir_fd=fd, synced=False)
                swap.wait_retired()
                code = 0 if not (tmp_path / ".child.1.tmp").exists() else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    swap.wait_retired()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child", "parent"]


_DRAIN = """
import runpy, sys
from ledger_cli.stores.jsonfile import swap
swap.EXCHANGE_AFTER = 0
if sys.argv[1] == "crash":  # the process dies between the exchange and the unlink
    import os
    real = swap._load()
    def exchange_then_die(*args):
        if real(*args) == 0:
            os._exit(137)
        return -1
    swap._load = lambda: exchange_then_die
sys.argv = ["ledger", *sys.argv[2:]]
runpy.run_module("ledger_cli", run_name="__main__")
"""


def _ledger_exchanging(mode: str, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DRAIN, mode, "--store", str(store), *args],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_drain_that_exchanges_every_file_leaves_the_store_a_fresh_process_reads(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s"
    for key in ("a", "b", "c"):
        assert run_ledger(store, "admit", key).returncode == 0
    res = _ledger_exchanging(
        "ok", store, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true"
    )
    assert res.returncode == 0, res.stderr
    for key in ("a", "b", "c"):
        state = run_ledger(store, "--json", "state", key)
        assert json.loads(state.stdout)["Status"] == "completed", state.stderr
    assert run_ledger(store, "doctor").returncode == 0
    assert not [p for p in store.rglob("*.tmp")]


def test_a_crash_between_the_exchange_and_the_unlink_leaves_a_temporary_the_next_writer_removes(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "admit", "b").returncode == 0
    res = _ledger_exchanging("crash", store, "claim", "a", "--owner", "w", "--lease", "1m")
    assert res.returncode == 137, res.stderr
    assert [p for p in store.rglob("*.tmp")], "the crash left the old file under its .tmp name"
    assert run_ledger(store, "claim", "b", "--owner", "v", "--lease", "1m").returncode == 0
    assert not [p for p in store.rglob("*.tmp")]
    assert run_ledger(store, "doctor").returncode == 0
    claimed = json.loads(run_ledger(store, "--json", "state", "a").stdout)
    assert claimed["Status"] == "claimed"  # the claim's frame was synced before the exchange
