"""The store directory: its names, its metadata file, the checks that keep
a directory that is no store (or a network mount) from being written to, and
how a module holds one of its files or directories open (`io_scope`,
`listing`: closed after, an I/O error a StoreError naming it)."""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fairlock import LOCK_NAME, OLD_QUEUE_DIR, QUEUE_DIR
from ledger_cli.stores.jsonfile.fsutil import fail

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager
    from typing import Any

FORMAT = "ledger_cli.jsonfile"
FORMAT_VERSION = 2
"""Version 2: every record file carries its checksum. Version 1 (without) is read too."""
READABLE_VERSIONS = (1, 2)
META_NAME = "ledger-store.json"
RECORDS_DIR = "records"
LIVE_DIR = "live"
PRUNED_DIR = "pruned"
PRUNED_COUNT = "count"  # in PRUNED_DIR: what its shards hold (prunedcount.py)
LIVE_STATUSES = frozenset({"pending", "claimed"})
"""Statuses indexed under live/ (the claimable ones; every other status is terminal)."""
HISTORY_NAME = "history.jsonl"
HISTORY_MARK = "history.started"
"""An empty file created beside the first history line (historyfile.py): from
then on, a missing history.jsonl is lost primary data, not a store without one."""
JOURNAL_NAME = "journal.json"

_HEX = "0123456789abcdef"


class HexName:
    """The file names `[0-9a-f]{digits}` then `suffix`, told by string
    methods (as fast as a pattern, and every command's start-up spares `re`)."""

    def __init__(self, digits: int, suffix: str = "") -> None:
        self.digits = digits
        self.suffix = suffix
        self.length = digits + len(suffix)

    def matches(self, name: str) -> bool:
        return (
            len(name) == self.length
            and name.endswith(self.suffix)
            and not name[: self.digits].strip(_HEX)
        )


RECORD_FILE = HexName(64, ".json")
DIGEST = HexName(64)
SHARD_INDEX = HexName(2, ".idx")
SHARD = HexName(2)


def shown(root: str, *parts: str) -> str:
    """The path of a store file as error messages name it. `root` is absolute
    and normalized, the parts are the store's own relative names, so a plain
    join is os.path.join's result (built for every file a hold touches)."""
    return "/".join((root, *parts))


@contextlib.contextmanager
def io_scope(fd: int, path: str, what: str) -> Iterator[int]:
    """`fd` for the block, closed after it: an OSError in the block is the
    StoreError `fail(path, what)` naming the file (`cannot read`, `cannot
    append`…), in place of a try, except and finally around each use."""
    try:
        yield fd
    except OSError as exc:
        raise fail(path, what, exc) from None
    finally:
        os.close(fd)


def listing(root: str, root_fd: int, name: str) -> AbstractContextManager[int | None]:
    """The store's directory `name` open for a scan in the block (None: there is
    none), closed after it; an OSError in the block is `cannot list` naming it."""
    path = shown(root, name)
    fd = fsutil.open_subdir(root_fd, name, path, create=False)
    return contextlib.nullcontext() if fd is None else io_scope(fd, path, "cannot list")


def exists(root: str, dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise fail(shown(root, name), "cannot stat", exc) from None
    return True


def read_meta(root: str, root_fd: int) -> dict[str, Any] | None:
    """The metadata file (format, version, fence floor); None for a directory that
    holds no store yet. StoreError for anything this release cannot read, and
    for a directory without the file that holds what no new store holds: a
    mistyped path is not read as an empty store (docs/reliability.md)."""
    path = shown(root, META_NAME)
    data = fsutil.read_file(root_fd, META_NAME, path)
    if data is None:
        try:
            if exists(root, root_fd, RECORDS_DIR):
                raise fail(
                    path,
                    "missing, but the directory holds records; refusing to guess their "
                    "format (restore the file from a backup)",
                )
            refuse_foreign(root, root_fd)
        except StoreError:
            if not exists(root, root_fd, META_NAME):
                raise
            return read_meta(root, root_fd)  # another process made the store meanwhile
        return None
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise fail(path, "corrupt store metadata (not a JSON object)") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise fail(path, f"not a ledger_cli JSON store metadata file (format {FORMAT!r})")
    version = meta.get("version")
    if type(version) is not int:  # a bool, a string, null: never shown as Python writes it
        raise fail(path, "corrupt store metadata (its format version is not a whole number)")
    if version not in READABLE_VERSIONS:
        made = "made by a newer ledger_cli release" if version > max(READABLE_VERSIONS) else ""
        raise fail(
            path,
            f"unknown store format version {version}{' (' + made + ')' if made else ''}; "
            f"this ledger_cli reads versions {' and '.join(map(str, READABLE_VERSIONS))}: "
            "use the ledger_cli release that wrote it",
        )
    floor = meta.get("fence_floor", 0)
    if type(floor) is not int or floor < 0:
        raise fail(path, f"bad fence_floor {floor!r}")
    meta["fence_floor"] = floor
    return meta


def refuse_foreign(root: str, root_fd: int) -> None:
    """StoreError unless the directory is empty (but for our lock files and temps)."""
    try:
        names = os.listdir(root_fd)
    except OSError as exc:
        raise fail(root, "cannot list", exc) from None
    foreign = [
        n
        for n in names
        if n not in (LOCK_NAME, QUEUE_DIR, OLD_QUEUE_DIR) and not n.endswith(fsutil.TEMP_SUFFIX)
    ]
    if foreign:
        raise fail(
            root,
            f"is not empty and is not a ledger store (it holds {sorted(foreign)[0]!r}); "
            "choose an empty or new directory",
        )


def meta_bytes(meta: dict[str, Any]) -> bytes:
    """The metadata file's bytes."""
    return (json.dumps(meta) + "\n").encode("utf-8")


def initialize(root: str, root_fd: int) -> dict[str, Any]:
    """Write the metadata file into an empty directory (under the lock)."""
    refuse_foreign(root, root_fd)
    meta: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "fence_floor": 0}
    data = meta_bytes(meta)
    try:
        os.fchmod(root_fd, fsutil.DIR_MODE)
    except OSError as exc:
        raise fail(root, "cannot set mode 0700", exc) from None
    fsutil.replace_file(root_fd, META_NAME, data, shown(root, META_NAME), sync=True)
    fsutil.fsync_fd(root_fd, root)
    return meta


def sweep_root(root: str, root_fd: int) -> None:
    """Remove temporary files from the root (under the lock: their writers are gone)."""
    try:
        for name in os.listdir(root_fd):
            if name.endswith(fsutil.TEMP_SUFFIX):
                fsutil.unlink_quiet(root_fd, name)
    except OSError as exc:
        raise fail(root, "cannot sweep temporary files", exc) from None


def open_root_creating(root: str) -> int:
    """Open the store directory, creating it (and its parents) first; fsynced."""
    parent = os.path.dirname(root)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise fail(parent, "cannot create the parent directory", exc) from None
    try:
        os.mkdir(root, fsutil.DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise fail(root, "cannot create the store directory", exc) from None
    root_fd = fsutil.open_root(root)
    if root_fd is None:
        raise fail(root, "the store directory vanished while being created")
    try:
        parent_fd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(parent_fd)
        finally:
            os.close(parent_fd)
    except OSError as exc:
        os.close(root_fd)
        raise fail(parent, "fsync failed", exc) from None
    return root_fd


def refuse_network_fs(root: str) -> None:
    found = network_filesystem(root)
    if found is not None:
        fstype, mount = found
        raise fail(
            root,
            f"is on a network file system ({fstype} mounted at {mount}); its file locks do "
            "not exclude processes on other hosts, so two hosts could both be granted a "
            "lease or lose an update. Use a local directory (or PostgreSQL for several "
            f"hosts), or set {ENV_ALLOW_NETWORK_FS}=1 if only this host uses the store",
        )


DAMAGED_DIR = "damaged"
"""Where `doctor --fix` moves a damaged primary file (never deleted): flat,
under its own name and a number, so no scan takes it for a record again."""


def free_name(dfd: int, name: str) -> str:
    """A name in damaged/ (open as `dfd`) for `name` that no file has yet."""
    n = 1
    while True:
        candidate = f"{name}.{n}"
        try:
            os.stat(candidate, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return candidate
        n += 1


def move_aside(root: str, root_fd: int, name: str) -> str:
    """Move the root's file `name` into damaged/ (its bytes kept) and make the
    move durable; where it went, as shown."""
    dfd = fsutil.open_subdir(root_fd, DAMAGED_DIR, shown(root, DAMAGED_DIR), create=True)
    assert dfd is not None
    try:
        target = free_name(dfd, name)
        try:
            os.rename(name, target, src_dir_fd=root_fd, dst_dir_fd=dfd)
        except OSError as exc:
            raise fail(shown(root, name), "cannot move aside", exc) from None
        fsutil.fsync_fd(dfd, shown(root, DAMAGED_DIR))
        fsutil.fsync_fd(root_fd, root)
    finally:
        os.close(dfd)
    return shown(root, DAMAGED_DIR, target)


# -- network file systems ---------------------------------------------------------------

MOUNTINFO = "/proc/self/mountinfo"
"""The mount table read by network_filesystem() (tests point it at a fake one)."""
ENV_ALLOW_NETWORK_FS = "LEDGER_ALLOW_NETWORK_FS"
NETWORK_FS_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smb2", "smbfs", "9p", "afs", "ceph", "glusterfs",
        "lustre", "gpfs", "beegfs", "orangefs", "pvfs2", "ncpfs", "coda", "davfs", "fuse",
    }
)  # fmt: skip
"""File systems whose locks may not exclude other hosts (plus every `fuse.*`: sshfs,
s3fs, gcsfuse…; `fuseblk`, a local disk through FUSE, is not one of them)."""


def _unescape(field: str) -> str:
    """The mount table's octal escapes (`\\040` for a space) undone."""
    if "\\" not in field:
        return field
    out: list[str] = []
    i = 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def is_network_fs(fstype: str) -> bool:
    return fstype in NETWORK_FS_TYPES or fstype.startswith("fuse.")


def network_filesystem(path: str) -> tuple[str, str] | None:
    """(type, mount point) when `path` — or the directory that will hold it — is on a
    network file system according to the mount table; None when it is local, or
    when there is no mount table to read (not Linux)."""
    try:
        with open(MOUNTINFO, "rb") as fh:
            table = fh.read()
    except OSError:
        return None
    probe = os.path.realpath(path)  # symlinks of the existing part resolved
    best: tuple[str, str] | None = None
    for line in table.split(b"\n"):
        fields = line.split(b" ", 5)  # id, parent, dev, root, mount point, the rest
        if len(fields) < 6:
            continue
        mount = _unescape(os.fsdecode(fields[4]))
        inside = mount == "/" or probe == mount or probe.startswith(mount.rstrip("/") + "/")
        # The longest mount point holding the path; on a tie the later mount shadows.
        if inside and (best is None or len(mount) >= len(best[1])):
            tail = fields[5].split(b" - ", 1)  # options and optional fields - type …
            if len(tail) == 2:
                best = (os.fsdecode(tail[1].split(b" ", 1)[0]), mount)
    if best is not None and is_network_fs(best[0]):
        return best
    return None
