"""`-o FILE` (`snapshot`, `stats`) writes through what FILE is, as shell
redirection and `cp` do (docs/design.md §4.1): a regular file is replaced
atomically, a symlink is followed (its target replaced, the link kept; a
dangling one creates its target), a FIFO is written in place, not replaced.

Real processes against a JSON store in tmp_path; never a path under /dev.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

from tests.cli_support import run_ledger

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "z").returncode == 0
    return store


def _keys(text: str) -> list[str]:
    return [t["Key"] for t in json.loads(text)["Tasks"]]


def test_a_regular_file_is_replaced_atomically(tmp_path: Path) -> None:
    store = _store(tmp_path)
    out = tmp_path / "snap.json"
    out.write_text("old")
    before = out.stat().st_ino
    res = run_ledger(store, "snapshot", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert _keys(out.read_text()) == ["z"]
    assert out.stat().st_ino != before  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_a_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    store = _store(tmp_path)
    target = tmp_path / "target.txt"
    target.write_text("precious")
    link = tmp_path / "link.json"
    link.symlink_to("target.txt")
    res = run_ledger(store, "snapshot", "-o", str(link))
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"wrote 1 record to {link}\n"
    assert link.is_symlink() and os.readlink(link) == "target.txt"
    assert _keys(target.read_text()) == ["z"]


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.prom"
    link.symlink_to("sub/new.prom")
    res = run_ledger(store, "stats", "--prometheus", "-o", str(link))
    assert res.returncode == 0, res.stderr
    assert link.is_symlink()
    assert "ledger_tasks" in (tmp_path / "sub" / "new.prom").read_text()


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    store = _store(tmp_path)
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    res = run_ledger(store, "snapshot", "-o", str(fifo), timeout=EXIT_TIMEOUT)
    reader.join(EXIT_TIMEOUT)
    assert res.returncode == 0, res.stderr
    assert _keys(got[0].decode()) == ["z"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (tmp_path / "d").mkdir()
    res = run_ledger(store, "snapshot", "-o", str(tmp_path / "d"))
    assert res.returncode == 2
    assert res.stderr == f"ledger: cannot write {tmp_path / 'd'}: Is a directory\n"
