"""`ledger snapshot` then `ledger restore` keeps pruned records pruned (docs/design.md
§2.10, §6.4), across stores, each command a fresh process: the restored store
lists and counts them as the source did, and `retry` of one still exits 6."""

from __future__ import annotations

import contextlib
import itertools
import json
from pathlib import Path

import pytest

from tests.cli_support import ledger_ok as _ok
from tests.cli_support import run_ledger
from tests.stores import KINDS

NOW = ("--now", "2026-01-01T00:00:00Z")


def _source(store: str) -> None:
    """The tester's sequence: a cancelled (failed) task pruned, and a live one beside it."""
    _ok(store, "admit", "job", "--task", '{"cmd":"important"}', *NOW)
    _ok(store, "admit", "keep", "--task", '{"cmd":"other"}', "--queue", "q1", *NOW)
    _ok(store, "admit", "done", *NOW)
    _ok(store, "claim", "done", "--owner", "w", "--lease", "1m", *NOW)
    _ok(store, "complete", "done", "--owner", "w", "--fence", "1", *NOW)
    _ok(store, "cancel", "job", *NOW)
    assert _ok(store, "prune", "--older-than", "30d") == "pruned 2 records\n"


def _figures(store: str) -> tuple[object, ...]:
    stats = json.loads(_ok(store, "--json", "stats"))
    pruned = [json.loads(line) for line in _ok(store, "list", "--pruned", "--jsonl").splitlines()]
    listed = [json.loads(line)["Key"] for line in _ok(store, "list", "--jsonl").splitlines()]
    return (
        stats["counts"],
        stats["pruned"],
        [(r["Key"], r["Status"], r["Task"]) for r in pruned],
        listed,
    )


def _refuses(store: str) -> None:
    out = run_ledger(store, "retry", "job")
    assert (out.returncode, out.stdout) == (6, "")
    assert "job is pruned" in out.stderr
    assert _ok(store, "admit", "done", "--task", "{}") == "duplicate\n"


def _chain(tmp_path: Path, schemes: list[str]) -> None:
    with contextlib.ExitStack() as stack:
        urls = []
        for i, scheme in enumerate(schemes):
            kind = KINDS[scheme]
            (tmp_path / str(i)).mkdir()
            urls.append(kind.url(stack.enter_context(kind.place(tmp_path / str(i)))))
        _source(urls[0])
        _refuses(urls[0])
        want = _figures(urls[0])
        assert want[1] == 2 and want[3] == ["keep"]
        for at, (src, dest) in enumerate(itertools.pairwise(urls)):
            snap = tmp_path / f"snap{at}.json"
            _ok(src, "snapshot", "-o", str(snap))
            assert snap.read_bytes().count(b'"Pruned":true') == 2
            assert _ok(dest, "restore", str(snap)) == "restored 3 records\n"
            assert _figures(dest) == want
            _refuses(dest)
            assert _ok(dest, "doctor") is not None


@pytest.mark.parametrize(
    "schemes",
    [["json", "sqlite"], ["sqlite", "json"], ["json", "sqlite", "postgresql", "json"]],
    ids="-".join,
)
def test_snapshot_restore_keeps_pruned(tmp_path: Path, schemes: list[str]) -> None:
    _chain(tmp_path, schemes)


def test_an_older_snapshot_restores_as_before(tmp_path: Path) -> None:
    """A snapshot without the mark (written before it existed, or by Go) restores the
    record live, as it always did."""
    src, dest = f"json:{tmp_path / 'a'}", f"json:{tmp_path / 'b'}"
    _source(src)
    snap = tmp_path / "snap.json"
    _ok(src, "snapshot", "-o", str(snap))
    snap.write_bytes(snap.read_bytes().replace(b',"Pruned":true', b""))
    _ok(dest, "restore", str(snap))
    assert json.loads(_ok(dest, "--json", "stats"))["pruned"] == 0
    assert _ok(dest, "retry", "job") != ""


def test_a_pruned_mark_on_a_live_record_is_refused(tmp_path: Path) -> None:
    src, dest = f"json:{tmp_path / 'a'}", f"json:{tmp_path / 'b'}"
    _source(src)
    snap = tmp_path / "snap.json"
    _ok(src, "snapshot", "-o", str(snap))
    snap.write_bytes(snap.read_bytes().replace(b'"Queue":"q1"', b'"Queue":"q1","Pruned":true'))
    out = run_ledger(dest, "restore", str(snap))
    assert out.returncode == 8 and "a pruned record is completed or failed" in out.stderr
    bad = snap.read_bytes().replace(b'"Pruned":true', b'"Pruned":1')
    snap.write_bytes(bad)
    out = run_ledger(dest, "restore", str(snap))
    assert out.returncode != 0 and "Pruned is not true or false" in out.stderr
    assert not (tmp_path / "b").exists()  # refused before anything was written
