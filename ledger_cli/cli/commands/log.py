"""`ledger log [KEY] [--jsonl] [--event NAME…] [--follow]`: the history of
writes, oldest first.

`--follow` prints the lines written from now on, as they are written, until
interrupted (Ctrl-C: exit 0). It does not read the whole history again: the
store's follower (`history_follower()`) reads the JSON store's history.jsonl
from the offset where it stopped, and the SQL stores' rows past the last id
it returned (stores/jsonfile/historyfollow.py, stores/sql/historyfollow.py).
It polls every POLL_INTERVAL; each batch of lines is flushed at once, so a
pipe (`| while read …`) sees each line as it comes. A store outage is ridden
out as `run --drain` rides it (one warning line, then exit 9 after five
minutes of failures: cli/outage.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, validate_text
from ledger_cli.errors import NoKeyError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.history import HistoryEntry

POLL_INTERVAL = 0.1
"""Seconds between two reads of what is new (`--follow`)."""


def log(
    settings: Settings,
    key: str | None = None,
    jsonl: bool = False,
    follow: bool = False,
    event: list[str] | None = None,
) -> int:
    if jsonl and settings.json:
        raise InputError("ledger: give --json or --jsonl, not both")
    if follow and settings.json:
        raise InputError("ledger: log --follow prints a line at a time: give --jsonl, not --json")
    events = frozenset(validate_text(e, "--event") for e in event) if event else None

    def wanted(e: HistoryEntry) -> bool:
        return (key is None or e.key == key) and (events is None or e.event in events)

    with Session(settings, read_only=True) as s:
        if follow:
            return _follow(s, jsonl, wanted)
        read = getattr(s.store, "read_history", None)
        history = list(read(key)) if read is not None else []
        if key is not None and not any(e.key == key for e in history) and s.load(key) is None:
            # As `state nope`: a key with neither history nor a record is
            # most likely mistyped, not a quiet task (exit 3, not an empty 0).
            raise NoKeyError(key=key)
        entries = [e for e in history if wanted(e)]
    if settings.json:
        output.json_line([e.to_obj() for e in entries])
    elif jsonl:
        output.jsonl(e.to_obj() for e in entries)
    else:
        for e in entries:
            _print(e, jsonl)
    return 0


def _print(e: HistoryEntry, jsonl: bool) -> None:
    if jsonl:
        output.json_line(e.to_obj())
    else:
        output.line(f"{e.time} {e.actor} {e.event} {e.key} {e.fence} {e.data}")


def _follow(s: Session, jsonl: bool, keep: Callable[[HistoryEntry], bool]) -> int:
    import sys

    from ledger_cli.cli.outage import Outage, is_outage
    from ledger_cli.errors import StoreError

    make = getattr(s.store, "history_follower", None)
    if make is None:
        raise InputError(
            "ledger: log --follow needs a store that other processes write to (not memory:)"
        )
    outage = Outage("log --follow")
    try:
        follower = make()
        try:
            while True:
                try:
                    got = follower.poll()
                except StoreError as exc:
                    if not is_outage(exc):
                        raise
                    time.sleep(outage.failed(exc))
                    continue
                outage.ok()
                for e in got:
                    if keep(e):
                        _print(e, jsonl)
                sys.stdout.flush()
                time.sleep(POLL_INTERVAL)
        finally:
            follower.close()
    except KeyboardInterrupt:
        return 0  # the way a follow ends
