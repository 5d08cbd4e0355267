"""The chunked index's files (stores/jsonfile/chunkindex.py): the head of a
chunk is read without parsing the rest, and a removal cuts lines out of a
chunk's bytes, keeping its count line true and the other entries as written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import chunkindex

FMT = chunkindex.Format("idx", "test.index 1", "test index")


def _entries(n: int) -> list[chunkindex.Entry]:
    return [(1000 + i, f"{i:04x}") for i in range(n)]


def _fresh(tmp_path: Path, entries: list[chunkindex.Entry]) -> chunkindex.Chunks:
    root_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    os.mkdir(tmp_path / "idx")
    dfd = os.open(tmp_path / "idx", os.O_RDONLY | os.O_DIRECTORY)
    return chunkindex.write_fresh(FMT, str(tmp_path), root_fd, dfd, ("idx",), entries)


def test_head_reads_the_first_entries_past_a_bound(tmp_path: Path) -> None:
    entries = _entries(10)
    chunks = _fresh(tmp_path, entries)
    assert chunks.head(0, None, 3) == entries[:3]
    assert chunks.head(0, entries[4], 2) == entries[5:7]
    assert chunks.head(0, entries[-1], 2) == []


def test_a_removal_cuts_lines_and_keeps_the_count(tmp_path: Path) -> None:
    entries = _entries(10)
    chunks = _fresh(tmp_path, entries)
    chunks.remove([entries[0], entries[5], (1, "ffff")])  # the last one is not there
    kept = [e for i, e in enumerate(entries) if i not in (0, 5)]
    assert chunks.chunk(0) == kept
    data = (tmp_path / "idx" / "c0").read_bytes()
    assert data.split(b"\n", 1)[0] == b"8"
    before = os.stat(tmp_path / "idx" / "c0").st_ino
    chunks.remove([(1, "ffff")])  # nothing to cut: the file is not rewritten
    assert os.stat(tmp_path / "idx" / "c0").st_ino == before


def test_a_damaged_line_is_still_found_by_a_full_read(tmp_path: Path) -> None:
    chunks = _fresh(tmp_path, _entries(10))
    path = tmp_path / "idx" / "c0"
    lines = path.read_bytes().split(b"\n")
    lines[8] = lines[8].replace(b" ", b"")  # one line loses its separator
    path.write_bytes(b"\n".join(lines))
    assert len(chunks.head(0, None, 2)) == 2  # the head never reaches it
    with pytest.raises(StoreError, match="corrupt test index chunk"):
        chunks.chunk(0)
