"""A sorted set of entries kept in a directory as a manifest and chunk files:
the on-disk mechanism of the ready index (readyindex.py says what it holds).

    <dir>/manifest        a header line, `<format> <next chunk id>`, then one
                          line per chunk, `<id> <ns> <keyhex>`, the smallest
                          entry the chunk may hold (chunk i holds the entries
                          from its bound up to the next chunk's bound; `-`
                          for an empty key); then any `+ <name>` lines,
                          the sub-indexes its owner lists (`Chunks.subs`:
                          the ready index's queue partitions)
    <dir>/c<id>           a chunk: a first line, the number of entries (so an
                          emptied or cut chunk is told from one with no
                          entries), then sorted lines `<ns> <keyhex>` (at most
                          CHUNK_MAX)

Reading an entry's neighbourhood costs the manifest and one chunk, whatever
the number of entries. A chunk split writes the new chunks, then the
manifest, then the shrunk old chunk (each durable), so every entry stays
reachable at every crash point; a removal is not made durable (the indexes
kept this way are supersets: a stale entry is harmless). Every chunk the
manifest lists is written before the manifest names it and unlinked only
after: a missing or damaged chunk is damage (IndexDamage naming the file),
never "no entries". A directory without a manifest holds nothing yet (its
owner decides what that means: "rebuild" for the ready index).
"""

from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import damaged_index
from ledger_cli.stores.jsonfile.layout import shown

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

MANIFEST = "manifest"
CHUNK_MAX = 512

Entry = tuple[int, str]
"""(a sort number, a key's UTF-8 bytes in hex): entries sort as tuples."""

_HEX_BYTES = b"0123456789abcdef"


class Format:  # a plain class: creating a NamedTuple is slow (CONTRIBUTING, "Start-up")
    """What tells one chunked index's files from another's: its directory
    below the store root (the IndexDamage's index), the manifest's first
    words (its format and version), how messages name it ("ready index")."""

    __slots__ = ("dir_name", "header", "label")

    def __init__(self, dir_name: str, header: str, label: str) -> None:
        self.dir_name, self.header, self.label = dir_name, header, label


class Chunks:
    """A manifest and its chunks, read and written under the store lock."""

    def __init__(
        self,
        fmt: Format,
        root: str,
        root_fd: int,
        dfd: int,
        sub: tuple[str, ...],
        next_id: int = 0,
        ids: list[int] | None = None,
        bounds: list[Entry] | None = None,
        subs: list[str] | None = None,
    ) -> None:
        self._fmt = fmt
        self._sub = sub
        """The directory's path below the store root (shown in messages)."""
        self._root = root
        self._root_fd = root_fd
        self._dfd = dfd
        self.next_id = next_id
        self.ids = [] if ids is None else ids
        self.bounds = [] if bounds is None else bounds
        self.subs = [] if subs is None else subs
        """The sub-indexes the manifest lists (names without spaces)."""

    def _path(self, *parts: str) -> str:
        return shown(self._root, *self._sub, *parts)

    def _damaged(self, path: str, what: str) -> Exception:
        return damaged_index(
            self._fmt.dir_name,
            path,
            f"{what} {self._fmt.label} chunk (ledger doctor --fix rebuilds the index)",
        )

    # -- reading ------------------------------------------------------------------

    def _lines(self, pos: int) -> tuple[bytes, int]:
        """Chunk `pos`'s entry lines (each ending in a newline) and their count,
        checked whole at C speed: its count, its characters, its last newline
        (each line's own form is checked as it is parsed)."""
        name = f"c{self.ids[pos]}"
        path = self._path(name)
        data = fsutil.read_file(self._dfd, name, path)
        if data is None:
            raise self._damaged(path, "missing")
        # The first line counts the entries: an emptied chunk, or one cut at a
        # line's end, is damage too, never "no entries".
        count, newline, data = data.partition(b"\n")
        if (
            not newline
            or not count.isdigit()
            or len(count) > 9  # int() of any length is costly (and refused past 4,300 digits)
            or data.replace(b"\n", b"").replace(b" ", b"").strip(_HEX_BYTES)
            or (data and not data.endswith(b"\n"))
            or data.count(b"\n") != int(count)
        ):
            raise self._damaged(path, "corrupt")
        return data, int(count)

    def _entry(self, pos: int, line: str) -> Entry:
        ns, sep, hexkey = line.partition(" ")
        if not sep or not ns or not hexkey or " " in hexkey or len(hexkey) % 2:
            raise self._damaged(self._path(f"c{self.ids[pos]}"), "corrupt")
        return int(ns), hexkey

    def chunk(self, pos: int) -> list[Entry]:
        """The entries chunk `pos` holds within its range, sorted."""
        data, _ = self._lines(pos)
        entries: list[Entry] = []
        append = entries.append
        # An insert's cost, CHUNK_MAX lines at most: kept lean (no call a line).
        for line in data.decode("ascii").split("\n")[:-1]:
            ns, sep, hexkey = line.partition(" ")
            if not sep or not ns or not hexkey or " " in hexkey or len(hexkey) % 2:
                raise self._damaged(self._path(f"c{self.ids[pos]}"), "corrupt")
            append((int(ns), hexkey))
        entries.sort()  # written sorted and unique (replaced whole): linear
        low = self.bounds[pos] if pos > 0 else None
        high = self.bounds[pos + 1] if pos + 1 < len(self.ids) else None
        if low is not None and entries and entries[0] < low:
            entries = [e for e in entries if e >= low]
        if high is not None and entries and entries[-1] >= high:
            entries = [e for e in entries if e < high]
        return entries

    def head(self, pos: int, after: Entry | None, limit: int) -> list[Entry]:
        """The first `limit` entries of chunk `pos` past `after` within its
        range. A chunk is written sorted, so only the lines up to them are
        parsed (a claim wants the first few of a chunk's hundreds)."""
        data, _ = self._lines(pos)
        low = self.bounds[pos] if pos > 0 else None
        high = self.bounds[pos + 1] if pos + 1 < len(self.ids) else None
        out: list[Entry] = []
        for line in data.decode("ascii").split("\n")[:-1]:
            entry = self._entry(pos, line)
            if (low is not None and entry < low) or (after is not None and entry <= after):
                continue
            if high is not None and entry >= high:
                break
            out.append(entry)
            if len(out) == limit:
                break
        return out

    def entries(self) -> Iterator[Entry]:
        for pos in range(len(self.ids)):
            yield from self.chunk(pos)

    def locate(self, entry: Entry) -> int:
        return max(0, bisect.bisect_right(self.bounds, entry, lo=1) - 1)

    def holds(self, entries: Iterable[Entry]) -> set[Entry]:
        """Those of `entries` the index holds (a chunk read per chunk they fall in)."""
        wanted = set(entries)
        got: set[Entry] = set()
        for pos in {self.locate(e) for e in wanted}:
            got |= wanted.intersection(self.chunk(pos))
        return got

    # -- writing ------------------------------------------------------------------

    def write_chunk(self, cid: int, entries: list[Entry], sync: bool) -> None:
        lines = "".join(f"{ns} {hexkey}\n" for ns, hexkey in entries)
        self._write_lines(cid, lines.encode("ascii"), len(entries), sync)

    def _write_lines(self, cid: int, lines: bytes, count: int, sync: bool) -> None:
        name = f"c{cid}"
        fsutil.replace_file(
            self._dfd,
            name,
            b"%d\n%s" % (count, lines),
            self._path(name),
            sync=sync,
            tmp_dir_fd=self._root_fd,
        )

    def write_manifest(self, sync: bool) -> None:
        lines = [f"{self._fmt.header} {self.next_id}\n"]
        lines += [
            f"{cid} {ns} {hexkey or '-'}\n"
            for cid, (ns, hexkey) in zip(self.ids, self.bounds, strict=True)
        ]
        lines += [f"+ {name}\n" for name in self.subs]
        fsutil.replace_file(
            self._dfd,
            MANIFEST,
            "".join(lines).encode("ascii"),
            self._path(MANIFEST),
            sync=sync,
            tmp_dir_fd=self._root_fd,
        )
        if sync:
            fsutil.fsync_fd(self._dfd, self._path())

    def add(self, entries: Iterable[Entry], *, sync: bool) -> None:
        """Insert entries (durably with `sync`; else the caller's syncfs does)."""
        by_pos: dict[int, set[Entry]] = {}
        for entry in entries:
            by_pos.setdefault(self.locate(entry), set()).add(entry)
        changed = False
        # Highest position first: a split inserts chunks after `pos` only.
        for pos in sorted(by_pos, reverse=True):
            current = self.chunk(pos)
            merged = sorted(set(current) | by_pos[pos])
            if len(merged) == len(current):
                continue
            changed = True
            if len(merged) <= CHUNK_MAX:
                self.write_chunk(self.ids[pos], merged, sync)
                continue
            # Split: new chunks first (durable), then the manifest, then the old one shrunk.
            pieces = _pieces(merged)
            new_ids = list(range(self.next_id, self.next_id + len(pieces) - 1))
            for cid, piece in zip(new_ids, pieces[1:], strict=True):
                self.write_chunk(cid, piece, True)
            fsutil.fsync_fd(self._dfd, self._path())
            self.next_id += len(new_ids)
            self.ids[pos + 1 : pos + 1] = new_ids
            self.bounds[pos + 1 : pos + 1] = [piece[0] for piece in pieces[1:]]
            self.write_manifest(True)
            self.write_chunk(self.ids[pos], pieces[0], True)
        if changed and sync:
            fsutil.fsync_fd(self._dfd, self._path())

    def remove(self, entries: Iterable[Entry]) -> None:
        """Drop entries (not made durable: a stale entry is harmless)."""
        by_pos: dict[int, set[Entry]] = {}
        for entry in entries:
            by_pos.setdefault(self.locate(entry), set()).add(entry)
        emptied: list[int] = []
        for pos, drop in by_pos.items():
            # Each entry's line is cut out of the chunk's bytes: no parse.
            data, count = self._lines(pos)
            text = b"\n" + data
            for ns, hexkey in drop:
                line = b"\n%d %s" % (ns, hexkey.encode("ascii"))
                at = text.find(line + b"\n")
                if at >= 0:
                    text = text[:at] + text[at + len(line) :]
                    count -= 1
            if len(text) != len(data) + 1:
                self._write_lines(self.ids[pos], text[1:], count, False)
            if not count and len(self.ids) > 1:
                emptied.append(pos)
        if emptied:
            dropped = [self.ids[pos] for pos in emptied]
            for pos in sorted(emptied, reverse=True):
                if len(self.ids) > 1:
                    del self.ids[pos]
                    del self.bounds[pos]
            self.write_manifest(False)
            for cid in dropped:
                if cid not in self.ids:
                    fsutil.unlink_quiet(self._dfd, f"c{cid}")


def _pieces(entries: list[Entry]) -> list[list[Entry]]:
    """Sorted entries cut in chunks half full: room to grow before a split."""
    half = CHUNK_MAX // 2
    return [entries[i : i + half] for i in range(0, len(entries), half)] or [[]]


def load(
    fmt: Format,
    root: str,
    root_fd: int,
    dfd: int,
    sub: tuple[str, ...],
    older: tuple[str, ...] = (),
) -> Chunks | None:
    """The index in `dfd` (`sub`: its path below the store root), None when it
    has no manifest, or one whose header is among `older` (an older release's
    format: rebuilt by its owner)."""
    path = shown(root, *sub, MANIFEST)
    data = fsutil.read_file(dfd, MANIFEST, path)
    if data is None:
        return None
    lines = data.decode("ascii", "replace").splitlines()
    head = lines[0].split() if lines else []
    if " ".join(head[:2]) in older:
        return None
    fix = "(ledger doctor --fix rebuilds it)"
    name, _, version = fmt.header.rpartition(" ")
    if head[:1] == [name] and len(head) > 1 and head[1].isdigit() and int(head[1]) > int(version):
        raise damaged_index(
            fmt.dir_name,
            path,
            f"{fmt.label} of format {int(head[1])}, made by a newer ledger_cli release (this "
            f"one reads format {version}): use that release, or rebuild the index for this "
            "one: ledger doctor --fix",
        )
    if len(head) != 3 or " ".join(head[:2]) != fmt.header or not head[2].isdigit():
        raise damaged_index(fmt.dir_name, path, f"corrupt {fmt.label} manifest header {fix}")
    ids: list[int] = []
    bounds: list[Entry] = []
    subs: list[str] = []
    for line in lines[1:]:
        parts = line.split()
        if parts[:1] == ["+"] and len(parts) == 2 and parts[1].isalnum():
            subs.append(parts[1])
            continue
        try:
            cid, ns, hexkey = int(parts[0]), int(parts[1]), parts[2].strip("-")
            bytes.fromhex(hexkey)
        except (IndexError, ValueError):
            # The line itself is not shown: damaged bytes never reach the terminal.
            raise damaged_index(
                fmt.dir_name,
                path,
                f"corrupt {fmt.label} line {len(ids) + 2} {fix}",
            ) from None
        ids.append(cid)
        bounds.append((ns, hexkey))
    if not ids:
        raise damaged_index(fmt.dir_name, path, f"corrupt {fmt.label} manifest: no chunk {fix}")
    return Chunks(fmt, root, root_fd, dfd, sub, int(head[2]), ids, bounds, subs)


def write_fresh(
    fmt: Format,
    root: str,
    root_fd: int,
    dfd: int,
    sub: tuple[str, ...],
    entries: list[Entry],
    keep: tuple[str, ...] = (),
    subs: list[str] | None = None,
    *,
    sync: bool = True,
) -> Chunks:
    """Write the index in `dfd` afresh (its sorted `entries`, listing `subs`),
    durably with `sync` (else the caller's syncfs does), the manifest removed
    first and written last; every other file but those named in `keep` is
    removed."""
    path = shown(root, *sub)
    fsutil.unlink_quiet(dfd, MANIFEST)
    if sync:
        fsutil.fsync_fd(dfd, path)
    for name in os.listdir(dfd):
        if name != MANIFEST and name not in keep:
            fsutil.unlink_quiet(dfd, name)
    chunks = Chunks(fmt, root, root_fd, dfd, sub, subs=subs)
    for cid, piece in enumerate(_pieces(entries)):
        chunks.write_chunk(cid, piece, sync)
        chunks.ids.append(cid)
        chunks.bounds.append(piece[0] if piece else (0, ""))
    chunks.next_id = len(chunks.ids)
    if sync:
        fsutil.fsync_fd(dfd, path)
    chunks.write_manifest(sync)
    return chunks
