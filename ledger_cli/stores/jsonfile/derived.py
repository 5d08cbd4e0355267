"""How the JSON store keeps a derived index: ready/ (readyindex.py, over
chunkindex.py), deps/ (depsindex.py) and tally/ (tally.py) each declare an
Index, a directory below the store root and the *marker* file in it whose
presence says "built"; what each derives from a record is its own module's.

- **Kept inside a commit**: a write updates each index under the lock, before
  its records (ready/, deps/: supersets, a stale entry harmless) or with
  them (tally/: its counts ride in the journal header), apply.py.
- **Built or not**: a missing marker means "rebuild from the records", done
  by the next holder of the lock that needs the index. A rebuild removes the
  marker durably first (`unbuild`) and writes it last (`mark_built`), so a
  crash in between leaves the index "not built", never half built and
  trusted. `drop` marks an index not built: a committed journal that met it
  damaged, a restart of the machine (journal.py, wal.py).
- **Read**: what an index's files hold is checked as they are read; damage
  is an IndexDamage naming the file (fsutil.damaged_index), which the
  command reports (exit 9) and `ledger doctor --fix` mends by a rebuild.
- **Checked by doctor**: first without the lock (`read_unlocked`: each file
  is replaced whole, so each read is some recent state), then only what that
  found is judged again under it (docs/design.md §5.4: a scan under the lock
  would hold every writer off for as long as it reads).
- **Rebuilt in short blocks**: a repair adds what is missing a block of keys
  per lock hold (`in_blocks`), the lock free between two blocks.

deps/, live/ and tally/ keep sets of record digests as *digest lists*,
files of lines a digest each: appended to (fsutil.append_lines) or replaced
whole, sorted (`put_digests`). An append a crash tore leaves a prefix of a
digest at the end of its line (the next append starts on a new line):
`parse_digests` skips it and tells the file is worth rewriting.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, TypeVar

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.layout import shown

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator
    from typing import Any

T = TypeVar("T")

BLOCK_GAP = 0.005
"""Seconds between two blocks of a repair: the lock's waiting writers queue
in order (cli/chunks.py FAIR_GAP)."""


class Index:  # a plain class: creating a NamedTuple is slow (CONTRIBUTING, "Start-up")
    """A derived index's place: its directory and its "built" marker."""

    __slots__ = ("dir_name", "marker")

    def __init__(self, dir_name: str, marker: str) -> None:
        self.dir_name, self.marker = dir_name, marker


def drop(root: str, root_fd: int, index: Index) -> None:
    """Mark `index` not built, durably (its marker removed, if there)."""
    path = shown(root, index.dir_name)
    dfd = fsutil.open_subdir(root_fd, index.dir_name, path, create=False)
    if dfd is None:
        return
    try:
        if fsutil.unlink_quiet(dfd, index.marker):
            fsutil.fsync_fd(dfd, path)
    finally:
        os.close(dfd)


def unbuild(root: str, dfd: int, index: Index) -> None:
    """A rebuild's first step: the marker removed, durably, whether or not it was there."""
    fsutil.unlink_quiet(dfd, index.marker)
    fsutil.fsync_fd(dfd, shown(root, index.dir_name))


def mark_built(root: str, root_fd: int, dfd: int, index: Index, data: bytes) -> None:
    """A rebuild's last step (its files durable already): the marker, durably."""
    path = shown(root, index.dir_name, index.marker)
    fsutil.replace_file(dfd, index.marker, data, path, sync=True, tmp_dir_fd=root_fd)
    fsutil.fsync_fd(dfd, shown(root, index.dir_name))


def read_unlocked(store: Any, read: Callable[[int], T]) -> T | None:
    """`read(root_fd)` without the store lock (a doctor check's first pass:
    read-only; a writer's half-done index update may show a false problem,
    which the locked pass then clears); None when it cannot tell (no store
    yet, a damaged or unreadable file): then the check runs under the lock."""
    root_fd = fsutil.open_root(store._root)
    if root_fd is None:
        return None
    try:
        if not store._initialized(root_fd):
            return None
        return read(root_fd)
    except (StoreError, OSError):
        return None
    finally:
        os.close(root_fd)


def in_blocks(
    items: list[T], size: int, between: Callable[[], None], *, last_empty: bool = False
) -> Iterator[list[T]]:
    """`items` a block of `size` at a time, `between()` called between two
    blocks (the lock is free then). With `last_empty`, an empty block closes
    the run when `items` fill their last block (at least one block, always)."""
    stop = len(items) + 1 if last_empty else len(items)
    for at in range(0, stop, size):
        if at:
            between()
        yield items[at : at + size]


def pause() -> None:
    """The pause between two blocks, the lock free: queued writers get in."""
    time.sleep(BLOCK_GAP)


TORN = r"[0-9a-f]{0,63}"
"""What a torn append can leave of a line: a prefix of a digest (a pattern
string: `re` compiles it on first use, only when a list holds one)."""


def is_torn(token: str) -> bool:
    return re.fullmatch(TORN, token) is not None


def parse_digests(
    data: bytes, fits: Callable[[str], bool], torn: Callable[[str], bool] = is_torn
) -> tuple[set[str], bool] | None:
    """The digests a digest list holds (those `fits` accepts), and whether it
    holds more than those (repeats, a torn fragment `torn` accepts): worth
    rewriting. None when an entry is neither: the list is damaged."""
    tokens = data.decode("ascii", "replace").split()
    digests = set(tokens)
    bad = {d for d in digests if not fits(d)}
    if bad:
        if not all(map(torn, bad)):
            return None
        digests -= bad
    return digests, len(digests) != len(tokens)


def put_digests(
    dfd: int, name: str, digests: Collection[str], path: str, root_fd: int, *, sync: bool
) -> None:
    """Replace the digest list `name` by `digests`, sorted (fsynced with
    `sync`), or remove it when there are none."""
    if not digests:
        fsutil.unlink_quiet(dfd, name)
        return
    data = "".join(d + "\n" for d in sorted(digests)).encode("ascii")
    fsutil.replace_file(dfd, name, data, path, sync=sync, tmp_dir_fd=root_fd)
