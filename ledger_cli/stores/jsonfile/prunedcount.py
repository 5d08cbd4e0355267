"""pruned/count (prunedfile.py, docs/design.md §6.4): the number of pruned
keys and what each `pruned/<ab>.jsonl` holds.

A shard file is the only copy of its pruned records, and only a prune or a
restore writes it: they remove this file, append, and write it again. So the
file says what every shard must hold, its lines, size and CRC-32, and a
shard that is missing, of another size or other bytes is damage
(StoreDamageError naming it) on every read that checks it: `admit` of a key
of that shard, `list --pruned`, `snapshot`, `doctor`; `stats` checks the
sizes (one fstat a shard, nothing read). Format 2:

    <keys> <shards>\\n
    <ab> <lines> <size> <crc32: 8 hex digits>\\n      (a line a shard, sorted)

The first format, `<keys>\\n`, tells nothing of the shards (a store last
pruned by an older version): it is still read, and the next prune or restore
writes format 2. While the file is missing (a prune cut short between its
lines and its count) nothing is known of the shards either.
"""

from __future__ import annotations

import os
import zlib
from typing import TYPE_CHECKING, NamedTuple

from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.layout import PRUNED_COUNT as NAME
from ledger_cli.stores.jsonfile.layout import PRUNED_DIR as DIR
from ledger_cli.stores.jsonfile.layout import SHARD, shown

if TYPE_CHECKING:
    from collections.abc import Callable


class Shard(NamedTuple):
    """What a shard file holds: complete lines (a torn last line is no line),
    bytes, and the CRC-32 of its bytes."""

    lines: int
    size: int
    crc: int


EMPTY = Shard(0, 0, 0)


class Count(NamedTuple):
    present: bool
    keys: int | None  # None: missing or damaged
    shards: dict[str, Shard] | None  # by shard ("ab"); None: not known


def of_data(data: bytes) -> Shard:
    return Shard(data.count(b"\n"), len(data), zlib.crc32(data))


def then(shard: Shard, appended: bytes) -> Shard:
    """The shard after `appended` (whole lines) went at its end."""
    return Shard(
        shard.lines + appended.count(b"\n"),
        shard.size + len(appended),
        zlib.crc32(appended, shard.crc),
    )


def _number(word: bytes) -> int | None:
    return int(word) if word.isdigit() and word.isascii() else None


def parse(data: bytes | None) -> Count:
    """pruned/count's bytes (None: missing), either format; damaged bytes
    give Count(True, None, None)."""
    damaged = Count(True, None, None)
    if data is None:
        return Count(False, None, None)
    if not data.endswith(b"\n"):
        return damaged
    lines = data[:-1].split(b"\n")
    head = lines[0].split(b" ")
    if len(head) == 1:  # the first format
        keys = _number(head[0])
        return damaged if keys is None or len(lines) != 1 else Count(True, keys, None)
    numbers = [_number(w) for w in head]
    if len(numbers) != 2 or numbers[0] is None or numbers[1] != len(lines) - 1:
        return damaged
    shards: dict[str, Shard] = {}
    for line in lines[1:]:
        words = line.split(b" ")
        if len(words) != 4 or len(words[3]) != 8 or words[3].strip(b"0123456789abcdef"):
            return damaged
        name = words[0].decode("ascii", "replace")
        lines_n, size = _number(words[1]), _number(words[2])
        if not SHARD.matches(name) or name in shards or lines_n is None or size is None:
            return damaged
        shards[name] = Shard(lines_n, size, int(words[3], 16))
    return Count(True, numbers[0], shards)


def encode(keys: int, shards: dict[str, Shard]) -> bytes:
    rows = [f"{keys} {len(shards)}\n"]
    rows += [f"{n} {s.lines} {s.size} {s.crc:08x}\n" for n, s in sorted(shards.items())]
    return "".join(rows).encode("ascii")


def damage(path: str, what: str) -> StoreDamageError:
    return StoreDamageError(f"ledger: store: {path}: {what}")


class CountDamageError(StoreDamageError):
    """pruned/count is what was damaged, not the shard it disagrees with: its
    line for the shard is at most COUNT_FLIPS bytes off the line the shard's
    bytes give (a damaged shard changes its CRC-32 in nearly every digit).
    The count derives from the shards: `doctor --fix` writes it again."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(
            f"ledger: store: {path}: is damaged: {what} "
            "(ledger doctor --fix writes it again from the shards)"
        )
        self.path = path


COUNT_FLIPS = 2


def _line(shard: str, held: Shard) -> bytes:
    return f"{shard} {held.lines} {held.size} {held.crc:08x}".encode("ascii")


def _count_damaged(path: str, shard: str, want: Shard, got: Shard) -> CountDamageError | None:
    said, holds = _line(shard, want), _line(shard, got)
    if (
        len(said) != len(holds)
        or sum(a != b for a, b in zip(said, holds, strict=True)) > COUNT_FLIPS
    ):
        return None
    count = os.path.join(os.path.dirname(path), NAME)
    what = (
        f"its line for {shard}.jsonl is {said.decode()!r}, the file's bytes give {holds.decode()!r}"
    )
    return CountDamageError(count, what)


def check(path: str, shard: str, data: bytes | None, shards: dict[str, Shard]) -> None:
    """StoreDamageError naming the shard file at `path` (of shard `shard`)
    when `data`, its bytes (None: missing), is not what pruned/count says;
    CountDamageError when the count is the one damaged."""
    want = shards.get(shard)
    same = data is not None and of_data(data) == want
    if data is not None and want is not None and not same:
        count_damage = _count_damaged(path, shard, want, of_data(data))
        if count_damage is not None:
            raise count_damage
    _judge(path, want, data is not None, same)


def check_size(
    path: str,
    shard: str,
    size: int | None,
    shards: dict[str, Shard],
    read: Callable[[], bytes | None],
) -> None:
    """`check` by the file's size alone (None: missing); a size that
    disagrees has the file `read` to tell which of the two is damaged."""
    want = shards.get(shard)
    if size is not None and want is not None and size != want.size:
        check(path, shard, read(), shards)
    _judge(path, want, size is not None, want is not None and size == want.size)


def _judge(path: str, want: Shard | None, present: bool, same: bool) -> None:
    if want is None:
        if present:
            raise damage(path, "is not listed in pruned/count, which lists every shard written")
    elif not present:
        raise damage(path, f"is missing: pruned/count says it holds {_holds(want)}")
    elif not same:
        raise damage(path, f"is damaged: pruned/count says it holds {_holds(want)}")


def _holds(want: Shard) -> str:
    return f"{want.lines} pruned record line(s) ({want.size} bytes), their only copy"


def read(root: str, pfd: int) -> Count:
    """pruned/count, in the pruned/ directory `pfd`."""
    return parse(fsutil.read_file(pfd, NAME, shown(root, DIR, NAME)))


def names(pfd: int) -> list[str]:
    """The shards ("ab") that have a file in the pruned/ directory `pfd`."""
    return sorted(
        name[:-6]
        for name in os.listdir(pfd)
        if name.endswith(".jsonl") and SHARD.matches(name[:-6])
    )


def held(root: str, pfd: int) -> dict[str, Shard]:
    """What each shard file holds, read from the files."""
    found: dict[str, Shard] = {}
    for shard in names(pfd):
        name = shard + ".jsonl"
        data = fsutil.read_file(pfd, name, shown(root, DIR, name))
        if data is not None:
            found[shard] = of_data(data)
    return found


def torn(pfd: int, name: str) -> bool:
    """Whether shard file `name` ends in a torn line (not in a newline)."""
    try:
        fd = os.open(name, os.O_RDONLY | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC, dir_fd=pfd)
    except FileNotFoundError:
        return False
    try:
        size = os.fstat(fd).st_size
        return bool(size) and os.pread(fd, 1, size - 1) != b"\n"
    finally:
        os.close(fd)


class Held:
    """pruned/ as a holder of the store lock read it, which nothing changes
    under the lock: the count read once and each shard once, checked against
    it, so a batch of admits does not read them again for every key."""

    __slots__ = ("count", "shards")

    def __init__(self) -> None:
        self.count: Count | None = None
        self.shards: dict[str, bytes] = {}

    def shard(
        self, root: str, pfd: int, shard: str, path: str, read_shard: Callable[[], bytes | None]
    ) -> bytes:
        """The bytes of shard file `path` (b"": none), read by `read_shard`."""
        data = self.shards.get(shard)
        if data is None:
            if self.count is None:
                self.count = read(root, pfd)
            got = read_shard()
            if self.count.shards is not None:
                check(path, shard, got, self.count.shards)
            data = self.shards[shard] = got or b""
        return data
