"""The file system around the store.

- Modes: the directory tree is 0700 and every file 0600 under umask 000, 022
  and 077, after every kind of write, with `ledger` run as a real process.
- A symlink (to a file or a directory outside the store) or a FIFO planted
  where the store reads or writes — a record, a temporary file, the lock file,
  the history, the metadata, the journal, the lock queue and its tail, the
  records/live/shard directories — is refused (exit 9, naming it) or passed
  by, never followed: the target is untouched, and nothing hangs (an alarm
  turns a blocking open into a failure).
- A store on a network file system (NFS, CIFS/SMB, 9p, FUSE, …, read from the
  mount table) is refused with an explanation unless LEDGER_ALLOW_NETWORK_FS=1;
  the mount table is a fake here (`layout.MOUNTINFO`), as no NFS is.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, fsutil, key_digest, layout
from tests.cli_support import ledger_cmd, subprocess_env
from tests.faults_support import Outcome, invoke, walk_paths

# -- modes --------------------------------------------------------------------------------

WORKLOAD: list[tuple[list[str], bytes | None]] = [
    (["admit", "a"], None),
    (["admit", "b", "--needs", "a", "--task", '{"x":1}'], None),
    (["admit", "--batch", "-"], b"".join(b'{"key":"bulk-%d"}\n' % i for i in range(40))),
    (["claim", "a", "--owner", "w", "--lease", "1m"], None),
    (["renew", "a", "--owner", "w", "--fence", "1", "--lease", "1m"], None),
    (["complete", "a", "--owner", "w", "--fence", "1", "--failed"], None),
    (["restore", "-"], None),
    (["run", "--next", "--owner", "w", "--lease", "1m", "--", "true"], None),
    (["snapshot", "-o", "{snapshot}"], None),
    (["doctor", "--fix"], None),
    (["log"], None),
]


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=["000", "022", "077"])
def test_modes_are_owner_only_under_any_umask(tmp_path: Path, umask: int) -> None:
    root = tmp_path / "nested" / "store"
    snapshot = tmp_path / "snap.json"
    source = tmp_path / "other"
    assert invoke(source, "admit", "restored").code == 0
    assert invoke(source, "snapshot", "-o", str(snapshot)).code == 0
    for args, data in WORKLOAD:
        argv = [a.replace("{snapshot}", str(tmp_path / "out.json")) for a in args]
        if argv[0] == "restore":
            data = snapshot.read_bytes()
        res = subprocess.run(
            [*ledger_cmd(), "--store", str(root), "--now", "2026-01-02T03:04:05Z", *argv],
            input=data,
            capture_output=True,
            env=subprocess_env(),
            preexec_fn=lambda: os.umask(umask),
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, (argv, res.stderr)
    seen = 0
    for path in walk_paths(root):
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        assert mode == want, f"{path}: {mode:04o} under umask {umask:03o}"
        seen += 1
    assert seen > 20
    assert (root / "waiters").is_dir() and (root / "history.jsonl").is_file()


# -- planted symlinks and FIFOs ---------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm: a command blocked (e.g. opening a FIFO)."""


@pytest.fixture
def alarm() -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def guarded(root: Path, *argv: str, input: bytes | None = None) -> Outcome:
    signal.alarm(10)
    try:
        return invoke(root, *argv, input=input)
    except Hang:
        pytest.fail(f"`ledger {' '.join(argv)}` hung (a FIFO opened for reading?)")
    finally:
        signal.alarm(0)


def digest_of(key: str) -> str:
    d = key_digest(key)
    assert d is not None
    return d


def _setup(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    for args in (
        ["admit", "k"],
        ["claim", "k", "--owner", "w", "--lease", "1h"],
        ["admit", "p"],
    ):
        assert invoke(root, *args).code == 0
    return root


def _places(root: Path) -> dict[str, Path]:
    k, new = digest_of("k"), digest_of("new")
    return {
        "record": root / "records" / k[:2] / f"{k}.json",
        "new-record": root / "records" / new[:2] / f"{new}.json",
        "lock-file": root / "ledger.lock",
        "history": root / "history.jsonl",
        "metadata": root / "ledger-store.json",
        "journal": root / "journal.json",
        "queue-dir": root / "waiters",
        "queue-tail": root / "waiters" / "tail",
        "records-dir": root / "records",
        "live-dir": root / "live",
        "shard-dir": root / "records" / k[:2],
        "live-marker": root / "live" / digest_of("p"),
    }


PASSABLE = {"live-marker"}
"""Places a write legitimately passes by (an existing marker is never opened)."""


class Outside:
    """Files and a directory outside the store that a planted link points to."""

    def __init__(self, base: Path) -> None:
        self.file = base / "precious.txt"
        self.file.write_bytes(b"precious\n")
        os.chmod(self.file, 0o644)
        self.dir = base / "precious-dir"
        self.dir.mkdir()
        (self.dir / "inside.txt").write_bytes(b"keep\n")

    def snapshot(self) -> object:
        st = self.file.stat()
        return (
            self.file.read_bytes(),
            stat.S_IMODE(st.st_mode),
            st.st_mtime_ns,
            sorted((p.name, p.read_bytes()) for p in self.dir.iterdir()),
            stat.S_IMODE(self.dir.stat().st_mode),
        )


def _plant(path: Path, kind: str, outside: Outside) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() and not child.is_symlink() else child.unlink()
        path.rmdir()
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink-file":
        path.symlink_to(outside.file)
    elif kind == "symlink-dir":
        path.symlink_to(outside.dir, target_is_directory=True)
    else:
        os.mkfifo(path, 0o644)


COMMANDS: dict[str, list[str]] = {
    "state": ["state", "k"],
    "list": ["list", "--json"],
    "log": ["log"],
    "claim-next": ["claim", "--next", "--owner", "x", "--lease", "1m"],
    "renew": ["renew", "k", "--owner", "w", "--fence", "1", "--lease", "1h"],
    "admit-new": ["admit", "new"],
    "complete": ["complete", "k", "--owner", "w", "--fence", "1"],
    "doctor": ["doctor", "--fix"],
}


@pytest.mark.parametrize("kind", ["symlink-file", "symlink-dir", "fifo"])
@pytest.mark.parametrize(
    "place",
    [
        "record",
        "new-record",
        "lock-file",
        "history",
        "metadata",
        "journal",
        "queue-dir",
        "queue-tail",
        "records-dir",
        "live-dir",
        "shard-dir",
        "live-marker",
    ],
)
def test_a_planted_link_or_fifo_is_refused_never_followed(
    tmp_path: Path, alarm: None, place: str, kind: str
) -> None:
    root = _setup(tmp_path)
    outside = Outside(tmp_path)
    path = _places(root)[place]
    _plant(path, kind, outside)
    before = outside.snapshot()
    fifo_mode = stat.S_IMODE(path.lstat().st_mode)
    refusals = 0
    for name, argv in COMMANDS.items():
        res = guarded(root, *argv)
        if res.code == 9:
            line = res.one_line_error() if res.stderr else res.stdout
            assert str(path) in line, (name, line)
            refusals += 1
        else:
            assert res.code in (0, 1, 3, 4, 5, 6, 7), (name, res.code, res.stderr)
        assert outside.snapshot() == before, f"{name} touched the target of {place}"
        assert path.is_symlink() or stat.S_ISFIFO(path.lstat().st_mode), f"{name} replaced it"
        if kind == "fifo":
            assert stat.S_IMODE(path.lstat().st_mode) == fifo_mode, f"{name} chmod-ed the FIFO"
    if place not in PASSABLE:
        assert refusals > 0
    res = guarded(root, "doctor")
    assert res.code == 9 and str(path) in res.stdout + res.stderr


def test_a_planted_temporary_file_name_is_never_followed(tmp_path: Path, alarm: None) -> None:
    """Temporary names are unpredictable to others (pid, a random token, a counter),
    but even a link planted under the next name is never written through:
    temporary files are created with O_CREAT|O_EXCL|O_NOFOLLOW."""
    root = _setup(tmp_path)
    outside = Outside(tmp_path)
    before = outside.snapshot()
    k = digest_of("k")
    names = [f"{k}.json", "journal.json", "ledger-store.json"]
    planted: list[Path] = []
    for n in range(1, 40):
        for name in names:
            tmp = f".{name}.{os.getpid()}.{fsutil._TEMP_TOKEN}{fsutil._temp_counter + n:x}.tmp"
            for directory in (root, root / "records" / k[:2]):
                p = directory / tmp
                if not p.exists():
                    if n % 2:
                        p.symlink_to(outside.file)
                    else:
                        os.mkfifo(p)
                    planted.append(p)
    res = guarded(root, "renew", "k", "--owner", "w", "--fence", "1", "--lease", "2h")
    assert res.code == 0, res.stderr
    res = guarded(root, "complete", "k", "--owner", "w", "--fence", "1")
    assert res.code == 0, res.stderr
    assert outside.snapshot() == before
    assert invoke(root, "--json", "state", "k").stdout.count('"completed"') == 1


def test_replace_file_never_follows_a_planted_temporary_name(tmp_path: Path) -> None:
    """The primitive itself, with nothing swept first: O_CREAT|O_EXCL|O_NOFOLLOW
    refuses the planted name, and a fresh random name is drawn."""
    outside = Outside(tmp_path)
    before = outside.snapshot()
    d = tmp_path / "d"
    d.mkdir()
    nxt = f".x.json.{os.getpid()}.{fsutil._TEMP_TOKEN}{fsutil._temp_counter + 1:x}.tmp"
    (d / nxt).symlink_to(outside.file)
    fd = os.open(d, os.O_RDONLY)
    try:
        fsutil.replace_file(fd, "x.json", b"new bytes\n", str(d / "x.json"), sync=True)
    finally:
        os.close(fd)
    assert (d / "x.json").read_bytes() == b"new bytes\n"
    assert (d / nxt).is_symlink() and outside.snapshot() == before


def test_the_store_directory_itself_may_be_a_symlink(tmp_path: Path) -> None:
    """The user's own path may go through a symlink; only links inside are refused."""
    real = tmp_path / "real"
    assert invoke(real, "admit", "k").code == 0
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    assert invoke(link, "claim", "k", "--owner", "w", "--lease", "1m").stdout == "1\n"


# -- network file systems ------------------------------------------------------------------------

LOCAL_MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
"""


def fake_mountinfo(tmp_path: Path, mount_point: Path, fstype: str, source: str) -> Path:
    escaped = str(mount_point).replace("\\", "\\134").replace(" ", "\\040")
    text = LOCAL_MOUNTINFO + (
        f"99 27 0:99 / {escaped} rw,relatime shared:7 master:3 - {fstype} {source} rw,vers=4.2\n"
    )
    path = tmp_path / "mountinfo"
    path.write_text(text)
    return path


NETWORK = [
    ("nfs4", "server:/export"),
    ("nfs", "server:/export"),
    ("cifs", "//server/share"),
    ("smb3", "//server/share"),
    ("9p", "drvfs"),
    ("fuse.sshfs", "user@host:/dir"),
    ("fuse", "s3fs"),
    ("ceph", "10.0.0.1:/"),
    ("glusterfs", "server:/vol"),
    ("afs", "AFS"),
    ("lustre", "mgs@tcp:/fs"),
]


@pytest.mark.parametrize(("fstype", "source"), NETWORK, ids=[n[0] for n in NETWORK])
def test_a_store_on_a_network_file_system_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fstype: str, source: str
) -> None:
    mount = tmp_path / "mnt point"  # a space: escaped as \040 in the mount table
    mount.mkdir()
    root = mount / "deep" / "store"  # not created yet: the nearest existing parent decides
    monkeypatch.setattr(layout, "MOUNTINFO", str(fake_mountinfo(tmp_path, mount, fstype, source)))
    res = invoke(root, "admit", "k")
    assert res.code == 9
    line = res.one_line_error()
    assert str(root) in line and fstype in line
    assert "LEDGER_ALLOW_NETWORK_FS=1" in line and "lock" in line
    assert not root.exists() and not (mount / "deep").exists()
    with pytest.raises(StoreError, match="network file system"):
        JsonFileStore(root)
    # The explicit override: the store works (on one host).
    ok = invoke(root, "admit", "k", env={"LEDGER_ALLOW_NETWORK_FS": "1"})
    assert ok.code == 0, ok.stderr
    assert JsonFileStore(root, allow_network_fs=True).load("k") is not None
    # An existing store is refused too, for reads as well as writes.
    assert invoke(root, "state", "k").code == 9
    assert invoke(root, "state", "k", env={"LEDGER_ALLOW_NETWORK_FS": "1"}).code == 0


@pytest.mark.parametrize(
    "fstype", ["ext4", "xfs", "btrfs", "tmpfs", "zfs", "overlay", "fuseblk", "f2fs"]
)
def test_local_file_systems_are_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fstype: str
) -> None:
    monkeypatch.setattr(
        layout, "MOUNTINFO", str(fake_mountinfo(tmp_path, tmp_path, fstype, "/dev/sdb1"))
    )
    assert layout.network_filesystem(str(tmp_path / "store")) is None
    assert invoke(tmp_path / "store", "admit", "k").code == 0


def test_the_longest_mount_point_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = tmp_path / "net"
    inner = outer / "local"
    inner.mkdir(parents=True)
    table = LOCAL_MOUNTINFO + (
        f"90 27 0:90 / {outer} rw - nfs4 server:/x rw\n"
        f"91 90 8:1 / {inner} rw - ext4 /dev/sdb1 rw\n"
        f"92 27 0:92 / {tmp_path}/ne rw - nfs4 server:/y rw\n"  # a prefix, not a parent
    )
    (tmp_path / "mountinfo").write_text(table)
    monkeypatch.setattr(layout, "MOUNTINFO", str(tmp_path / "mountinfo"))
    assert layout.network_filesystem(str(inner / "store")) is None
    found = layout.network_filesystem(str(outer / "store"))
    assert found is not None and found[0] == "nfs4" and found[1] == str(outer)
    # A later mount on the same point shadows the earlier one.
    (tmp_path / "mountinfo").write_text(table + f"93 90 0:93 / {inner} rw - cifs //s/x rw\n")
    found = layout.network_filesystem(str(inner / "store"))
    assert found is not None and found[0] == "cifs"


def test_no_mount_table_means_no_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "MOUNTINFO", str(tmp_path / "absent"))
    assert layout.network_filesystem(str(tmp_path)) is None
    (tmp_path / "garbled").write_text("nonsense\n\n1 2 3\n")
    monkeypatch.setattr(layout, "MOUNTINFO", str(tmp_path / "garbled"))
    assert layout.network_filesystem(str(tmp_path)) is None


def test_the_real_mount_table_of_this_machine_is_local(tmp_path: Path) -> None:
    assert layout.network_filesystem(str(tmp_path)) is None
