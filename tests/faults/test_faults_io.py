"""I/O errors: fail the k-th os.open/write/fsync/replace/close of
a command — only that call, and from that call on — for every k until the
command completes, as SQLite's I/O-error tests do.

Each time: the command exits 9 with one line on stderr (or 0, when the failed
call came after the write was durable and the command could still finish —
never 0 after a failed fsync), the store as a fresh process sees it is the
state before or the state after the command, no temporary file is left, and
a file whose fsync failed is never fsynced again and reported as durable
(fsyncgate: after a failed fsync the kernel may have dropped the dirty pages).
A command that commits in blocks (a failed completion's blocking walk) may
also stop between two: then doctor names the rest, claim --next hands none of
it out, and `doctor --fix` completes it to the state after
(`faults_support.between_blocks`).

Also: a full disk (a 256 KiB tmpfs mounted for the test when we are allowed
to, which root is; RLIMIT_FSIZE in a subprocess otherwise and as well), inode
exhaustion, and short writes (os.write writing a few bytes at a time).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.errors import StoreError
from ledger_cli.stores import jsonfile
from ledger_cli.stores.jsonfile import JsonFileStore, durability
from tests.cli_support import subprocess_env
from tests.faults_support import (
    FUNCS,
    OsFaults,
    Outcome,
    between_blocks,
    fake_meminfo,
    invoke,
    logical_state,
    temps,
    unapplied,
)

BATCH_SIZE = jsonfile.SYNC_EACH_MAX + 1  # just large enough for the syncfs(2) path
BATCH = b"".join(b'{"key":"bulk-%02d","task":{"n":%d}}\n' % (i, i) for i in range(BATCH_SIZE))
SNAPSHOT_KEYS = ("r1", "r2", "r3")


def _snapshot(tmp: Path) -> bytes:
    src = tmp / "snapshot-source"
    for key in SNAPSHOT_KEYS:
        assert invoke(src, "admit", key, "--task", '{"restored":true}').code == 0
    return invoke(src, "snapshot").stdout.encode()


# (name, setup commands, the command under test, its stdin)
Op = tuple[str, list[list[str]], list[str], bytes | None]
_CLAIM_A = ["claim", "a", "--owner", "w", "--lease", "1h"]
OPS: list[Op] = [
    ("admit-creating-the-store", [], ["admit", "a", "--task", '{"x":1}'], None),
    ("claim", [["admit", "a"]], _CLAIM_A, None),
    (
        "complete-failed-blocking-a-dependent",
        [["admit", "a"], ["admit", "b", "--needs", "a"], _CLAIM_A],
        ["complete", "a", "--owner", "w", "--fence", "1", "--failed"],
        None,
    ),
    ("admit-batch (syncfs)", [["admit", "a"]], ["admit", "--batch", "-"], BATCH),
    ("admit-batch (fsync each)", [["admit", "a"]], ["admit", "--batch", "-"], BATCH),
    ("restore", [["admit", "a"]], ["restore", "-"], None),
    (
        "claim-next",
        [["admit", "a"], ["admit", "b"]],
        ["claim", "--next", "--owner", "w", "--lease", "1m"],
        None,
    ),
]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for name, setup, _, _ in OPS:
        root = tmp_path_factory.mktemp("tpl") / "store"
        for args in setup:
            assert invoke(root, *args).code == 0, args
        out[name] = root
    return out


_runs = iter(range(1, 1 << 30))


def _copy(src: Path, base: Path) -> Path:
    """A fresh copy of the store `src` under `base` (never reused, so nothing to remove)."""
    dest = base / f"run-{next(_runs)}"
    if src.exists():
        shutil.copytree(src, dest, symlinks=True)
    return dest


def _run(root: Path, argv: list[str], data: bytes | None, faults: OsFaults) -> Outcome:
    with faults:
        return invoke(root, *argv, input=data)


@pytest.fixture
def dirty(op: Op, tmp_path: Path) -> Iterator[None]:
    """A large batch takes the path its name says (syncfs(2), or an fsync per file
    as when much is dirty), whatever the machine has dirty: the clean run and the
    faulty ones must make the same calls. So does a small journalled commit
    (syncfs while little is dirty: durability.use_syncfs_small)."""
    saved = durability.DIRTY_MAX, durability.FSYNC_BYTES, durability.MEMINFO
    if "(fsync each)" in op[0]:
        durability.DIRTY_MAX, durability.FSYNC_BYTES = -1, -1  # even with nothing dirty
    else:
        durability.DIRTY_MAX = 1 << 62
        durability.MEMINFO = fake_meminfo(tmp_path, 0)
    yield
    durability.DIRTY_MAX, durability.FSYNC_BYTES, durability.MEMINFO = saved


@pytest.mark.parametrize("op", OPS, ids=[o[0] for o in OPS])
@pytest.mark.usefixtures("dirty")
def test_every_failed_io_call_leaves_the_state_before_or_after(
    templates: dict[str, Path], tmp_path: Path, scratch: Path, op: Op
) -> None:
    name, _, argv, data = op
    if argv[0] == "restore":
        data = _snapshot(tmp_path)
    template = templates[name]
    before = logical_state(template)
    # The clean run: the state after, and how many calls of each kind it makes.
    counting = OsFaults()
    clean_root = _copy(template, scratch)
    clean = _run(clean_root, argv, data, counting)
    assert clean.code == 0, clean.stderr
    after = logical_state(clean_root)
    assert after != before
    runs = refused = succeeded = between = 0
    landed = 0
    for func in FUNCS:
        for k in range(1, counting.counts[func] + 1):
            for persistent in (False, True):
                root = _copy(template, scratch)
                faults = OsFaults(fail=(func, k), persistent=persistent)
                res = _run(root, argv, data, faults)
                where = f"{name}: {func} #{k}{' onwards' if persistent else ''}"
                runs += 1
                assert faults.injected, f"{where}: the fault point was never reached"
                assert "Traceback" not in res.stderr, where
                if res.code == 0:
                    # Possible only when the failure hit after the commit, in cleanup;
                    # never after a failed fsync.
                    assert func not in ("fsync", "write", "replace"), f"{where}: reported success"
                    succeeded += 1
                else:
                    assert res.code == 9, (where, res.code, res.stderr)
                    line = res.one_line_error()
                    assert line.startswith("ledger: store: "), (where, line)
                    assert "injected" in line, (where, line)
                    refused += 1
                assert faults.fsync_retried == [], f"{where}: fsync retried after it failed"
                assert temps(root) == [], f"{where}: temporary files left: {temps(root)}"
                state = logical_state(root)
                if state not in (before, after):
                    # A command that commits in blocks, cut between two of them.
                    assert res.code == 9, f"{where}: exit 0 with the command half done"
                    assert between_blocks(root, before, after), (
                        f"{where}: the store is neither before nor after, nor between blocks"
                    )
                    between += 1
                    state = logical_state(root)
                landed += state == after
                if res.code == 0:
                    assert state == after, where
                shutil.rmtree(root, ignore_errors=True)
    print(
        f"\n{name}: {runs} failed-call runs ({dict(counting.counts)} calls x 2 modes): "
        f"{refused} exit 9, {succeeded} exit 0 (failure after the commit), "
        f"{landed} left the state after, {between} cut between blocks (doctor --fix completed)"
    )


def test_library_calls_raise_store_errors_only(tmp_path: Path) -> None:
    """The store API outside the command line: a single durable compare-and-swap
    (no journal) under every failed call raises StoreError, never OSError."""
    t0 = Instant.parse("2026-01-02T03:04:05Z")
    template = tmp_path / "tpl"
    ledger = Ledger(JsonFileStore(template))
    assert ledger.admit("t", "a", 1, None, t0)
    before = logical_state(template)

    def op(root: Path) -> None:
        Ledger(JsonFileStore(root)).claim("t", "a", "w", timedelta(hours=1), t0)

    counting = OsFaults()
    clean = _copy(template, tmp_path)
    with counting:
        op(clean)
    after = logical_state(clean)
    runs = 0
    for func in FUNCS:
        for k in range(1, counting.counts[func] + 1):
            for persistent in (False, True):
                root = _copy(template, tmp_path)
                faults = OsFaults(fail=(func, k), persistent=persistent)
                with contextlib.suppress(StoreError), faults:
                    op(root)
                runs += 1
                assert temps(root) == []
                assert logical_state(root) in (before, after)
    assert runs > 20


# -- short writes ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS, ids=[o[0] for o in OPS])
@pytest.mark.parametrize("short", [1, 7])
@pytest.mark.usefixtures("dirty")
def test_short_writes_are_completed(
    templates: dict[str, Path], tmp_path: Path, op: Op, short: int
) -> None:
    name, _, argv, data = op
    if argv[0] == "restore":
        data = _snapshot(tmp_path)
    clean = _copy(templates[name], tmp_path)
    assert _run(clean, argv, data, OsFaults()).code == 0
    root = _copy(templates[name], tmp_path)
    faults = OsFaults(short=short)
    res = _run(root, argv, data, faults)
    assert res.code == 0, res.stderr
    assert faults.counts["write"] > 50  # the writes really were cut up
    assert logical_state(root) == logical_state(clean)


# -- a full disk ---------------------------------------------------------------------------------


@contextlib.contextmanager
def tiny_tmpfs(base: Path, size: str, inodes: int | None = None) -> Iterator[Path]:
    if shutil.which("mount") is None:
        pytest.skip("no mount command here; the RLIMIT_FSIZE test covers a full disk instead")
    mnt = base / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    opts = f"size={size},mode=0700" + (f",nr_inodes={inodes}" if inodes else "")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if res.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.decode().strip()}); "
                    "the RLIMIT_FSIZE test covers a full disk instead")  # fmt: skip
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def _fill(mnt: Path, leave: int) -> Path:
    """Fill the file system, then free `leave` bytes (tmpfs counts whole pages)."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = b"\0" * 65536
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, chunk)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
        os.ftruncate(fd, max(os.fstat(fd).st_size - leave, 0))
    finally:
        os.close(fd)
    return filler


FULL_COMMANDS: list[tuple[list[str], bytes | None]] = [
    (["admit", "new", "--task", '{"pad":"' + "x" * 3000 + '"}'], None),
    (["claim", "a", "--owner", "w", "--lease", "1h"], None),
    (["renew", "a", "--owner", "w", "--fence", "1", "--lease", "2h"], None),
    (["admit", "--batch", "-"], BATCH),
    (["complete", "a", "--owner", "w", "--fence", "1"], None),
]


def _full_disk_run(
    root: Path, filler_for: Callable[[], Path], reference: Path, argv: list[str], data: bytes | None
) -> str:
    """Run one command on a full file system: "ok", "refused" (nothing changed) or
    "pending" (refused after its commit point: its journal cannot be applied, so the
    store reports the full disk until space is freed, then holds the state after).
    The state after comes from the same command run on a copy of the store
    elsewhere; a command refused there for its own reason must be refused alike."""
    before = logical_state(root)
    if reference.exists():
        shutil.rmtree(reference)
    shutil.copytree(root, reference)
    expected = invoke(reference, *argv, input=data).code
    after = logical_state(reference)
    filler = filler_for()
    res = invoke(root, *argv, input=data)
    outcome = "ok"
    if res.code != expected:
        assert res.code == 9, (argv, res.code, res.stderr)
        line = res.one_line_error()
        assert line.startswith("ledger: store: ") and "No space left" in line, line
        assert temps(root) == [], argv
        if unapplied(root):  # committed (journal.json, a wal.log frame), not applied
            with pytest.raises(StoreError, match="No space left"):
                logical_state(root)
            outcome = "pending"
        else:
            assert logical_state(root) == before, argv  # readers still read
            outcome = "refused"
    filler.unlink()
    assert temps(root) == [], argv
    assert logical_state(root) == (after if outcome in ("ok", "pending") else before)
    return outcome


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk(tmp_path: Path) -> None:
    outcomes: collections.Counter[str] = collections.Counter()
    for leave in (0, 4096, 8192, 12288, 16384, 24576, 32768, 65536):
        with tiny_tmpfs(tmp_path, "512k") as mnt:
            root = mnt / "store"
            assert invoke(root, "admit", "a").code == 0
            for argv, data in FULL_COMMANDS:
                outcomes[
                    _full_disk_run(
                        root, lambda m=mnt, n=leave: _fill(m, n), tmp_path / "ref", argv, data
                    )
                ] += 1
            assert invoke(root, "admit", "after-the-disk-filled").code == 0
    print(f"\nfull tmpfs: {dict(outcomes)}")
    assert outcomes["refused"] > 0 and outcomes["ok"] > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_inode_exhaustion(tmp_path: Path) -> None:
    outcomes: collections.Counter[str] = collections.Counter()
    with tiny_tmpfs(tmp_path, "4m", inodes=64) as mnt:
        root = mnt / "store"
        assert invoke(root, "admit", "a").code == 0

        def use_up_inodes() -> Path:
            spare = mnt / "spare"
            spare.mkdir()
            with contextlib.suppress(OSError):
                for i in range(10_000):
                    (spare / str(i)).touch()
            return _Remover(spare)

        for i in range(12):
            outcomes[
                _full_disk_run(root, use_up_inodes, tmp_path / "ref", ["admit", f"k{i}"], None)
            ] += 1
    print(f"\ninode exhaustion: {dict(outcomes)}")
    assert outcomes["refused"] + outcomes["pending"] > 0


class _Remover(type(Path())):  # type: ignore[misc]
    """A directory whose unlink() removes it with its content (the filler above)."""

    def unlink(self, missing_ok: bool = False) -> None:
        shutil.rmtree(self)


FSIZE_CHILD = r"""
import os, resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from ledger_cli.cli.app import main
main(sys.argv[2:])
"""


def test_rlimit_fsize_is_a_clean_store_error(tmp_path: Path) -> None:
    """A file-size limit (EFBIG; Python ignores SIGXFSZ): the write fails cleanly."""
    root = tmp_path / "store"
    assert invoke(root, "admit", "a").code == 0
    before = logical_state(root)
    big_task = '{"pad":"' + "x" * 20_000 + '"}'
    res = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, "8192", "--store", str(root), "admit", "big",
         "--task", big_task],
        capture_output=True, text=True, env=subprocess_env(), timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 9, res.stderr
    assert len(res.stderr.splitlines()) == 1 and "File too large" in res.stderr
    assert logical_state(root) == before
    assert temps(root) == []
    # Small writes under the same limit still work.
    res = subprocess.run(
        [sys.executable, "-c", FSIZE_CHILD, "8192", "--store", str(root), "admit", "small"],
        capture_output=True, text=True, env=subprocess_env(), timeout=60, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr


def test_the_interposer_counts_what_it_should(tmp_path: Path) -> None:
    root = tmp_path / "store"
    faults = OsFaults()
    with faults:
        assert invoke(root, "admit", "a").code == 0
    assert all(faults.counts[f] > 0 for f in FUNCS), faults.counts
    assert faults.steps["dir-fsynced"] and faults.steps["file-fsynced"]
    assert faults.steps["temp-created"] == faults.counts["replace"]
    failing = OsFaults(fail=("fsync", 1), err=errno.EIO)
    with failing:
        res = invoke(tmp_path / "other", "admit", "a")
    assert res.code == 9 and failing.injected == 1
