"""`ledger serve` given a key or prefix with a NUL (%00), which PostgreSQL
cannot hold: every store answers as SQLite and JSON do (no record has that
key: 404 `no such key`; no key starts with that prefix: an empty page), never
a 500; and the stderr line of a real 500 names the query string too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.stores import KINDS
from tests.web_support import admit, served

DURABLE = sorted(k for k, v in KINDS.items() if v.durable)

MISSING = (
    "/api/tasks/%00",
    "/api/tasks/a%00b",
    "/api/task?key=a%00b",
    "/api/tasks/a%00b/output",
    "/api/task/output?key=a%00b",
    "/tasks/a%00b",
    "/task?key=a%00b",
)


@pytest.mark.parametrize("kind", DURABLE)
def test_a_nul_in_a_key_or_prefix_is_no_such_key(tmp_path: Path, kind: str) -> None:
    with KINDS[kind].place(tmp_path) as path:
        admit(path, "a")
        with served(path) as web:
            for link in MISSING:
                got = web.get(link)
                assert got.status == 404, (link, got.status, got.body[:200])
                if link.startswith("/api/"):
                    assert got.json()["error"]["message"].startswith("no such key"), link
            listed = web.get("/api/tasks?prefix=%00")
            assert listed.status == 200 and listed.json() == []
            assert web.get("/api/tasks?prefix=a%00").json() == []
            assert web.get("/tasks?prefix=%00").status == 200
            assert [r["Key"] for r in web.get("/api/tasks?prefix=a").json()] == ["a"]
        assert "Traceback" not in web.stderr and " 500" not in web.stderr


def test_the_line_of_a_500_names_the_query(tmp_path: Path) -> None:
    store = tmp_path / "store"
    admit(store, "a")
    with served(store) as web:
        assert web.get("/api/stats").status == 200
        shutil.rmtree(store)
        assert web.get("/api/stats?x=a%00b&token=t&y=%0a").status == 500
    assert "ledger: serve: GET /api/stats?x=a%00b&y=%0A: " in web.stderr, web.stderr
