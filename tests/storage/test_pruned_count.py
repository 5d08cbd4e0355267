"""pruned/count's two formats (stores/jsonfile/prunedcount.py): the number
of pruned keys alone (the first), or with what each shard file holds."""

from __future__ import annotations

import pytest

from ledger_cli.stores.jsonfile import prunedcount
from ledger_cli.stores.jsonfile.prunedcount import Count, Shard


def test_both_formats_read_and_the_second_round_trips() -> None:
    assert prunedcount.parse(None) == Count(False, None, None)
    assert prunedcount.parse(b"12\n") == Count(True, 12, None)
    shards = {"0a": prunedcount.of_data(b"x\n"), "ff": Shard(3, 300, 0xDEADBEEF)}
    data = prunedcount.encode(4, shards)
    assert data.startswith(b"4 2\n0a 1 2 ")
    assert prunedcount.parse(data) == Count(True, 4, shards)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"12",
        b"x\n",
        b"1 1\n",  # a shard line short: cut at a line's end
        b"1 0\n0a 1 2 00000000\n",
        b"1 1\n0a 1 2 0000000\n",
        b"1 1\nzz 1 2 00000000\n",
        b"1 1\n0a -1 2 00000000\n",
        b"1 2\n0a 1 2 00000000\n0a 1 2 00000000\n",
        b"{}\n",
    ],
)
def test_damaged_counts_are_told(data: bytes) -> None:
    assert prunedcount.parse(data) == Count(True, None, None)


def test_then_continues_the_checksum() -> None:
    first, more = b'["a"]\n', b'["b"]\n["c"]\n'
    assert prunedcount.then(prunedcount.of_data(first), more) == prunedcount.of_data(first + more)
    assert prunedcount.then(prunedcount.EMPTY, more) == prunedcount.of_data(more)
