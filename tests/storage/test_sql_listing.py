"""The SQL stores' record listing (`visible_range`, what `list` prints): keyset
pages, a short first page, pruned records left out by the query itself."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.sql import paging
from tests.stores import KINDS

T0 = Instant.parse("2026-03-01T00:00:00Z")


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
def test_listing_pages_cover_every_unpruned_record_in_key_order(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "FIRST_RECORD_PAGE", 3)
    monkeypatch.setattr(paging, "RECORD_PAGE", 10)
    kind = KINDS[scheme]
    with kind.place(tmp_path) as location:
        store = kind.open(location, lambda: T0)
        ledger = Ledger(store)
        keys = [f"k{i:03d}" for i in range(47)]
        for key in reversed(keys):
            ledger.admit("t", key, 1, None, T0)
        for key in keys[::4]:  # finished, then pruned
            fence = ledger.claim("t", key, "w", timedelta(minutes=1), T0)
            ledger.complete("t", key, "w", fence, "completed", T0)
        assert ledger.prune(timedelta(0), T0) == len(keys[::4])
        pages: list[int] = []
        real = store._record_page  # type: ignore[attr-defined]

        def spy(sql: str, args: tuple[object, ...]) -> tuple[list[object], int, str]:
            page: tuple[list[object], int, str] = real(sql, args)
            pages.append(page[1])
            return page

        monkeypatch.setattr(store, "_record_page", spy)
        listed = [r.key for r in store.visible_range()]  # type: ignore[attr-defined]
        assert listed == [k for k in keys if k not in keys[::4]]
        assert pages == [3, 10, 10, 10, 2]  # the pruned rows never reach Python
        store.close()
