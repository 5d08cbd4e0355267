"""`ledger log [KEY] [--jsonl] [--event NAME…] [--follow]`: the history of
writes, oldest first.

`--follow` prints the lines written from now on, as they are written, until
interrupted (Ctrl-C: exit 0). It does not read the whole history again: the
store's follower (`history_follower()`) reads the JSON store's history.jsonl
from the offset where it stopped, and the SQL stores' rows past the last id
it returned (stores/jsonfile/historyfollow.py, stores/sql/historyfollow.py).
It prints the lines still in the history when it reads them (a line pruned
before it is read is not printed: docs/design.md §6.4), each once, and ends
with exit 9 when a JSON store's directory is removed or replaced.
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
    events = frozenset(_known(validate_text(e, "--event")) for e in event) if event else None

    def wanted(e: HistoryEntry) -> bool:
        return (key is None or e.key == key) and (events is None or e.event in events)

    with Session(settings, reads=True) as s:
        if follow:
            return _follow(s, jsonl, wanted)
        read = getattr(s.store, "read_history", None)
        entries = [e for e in read(key) if wanted(e)] if read is not None else []
        if key is not None and not entries and s.load(key) is None:
            # No history and no record: a mistyped key, not a quiet task.
            from ledger_cli.errors import NoKeyError

            raise NoKeyError(key=key)
    if settings.json:
        output.json_line([e.to_obj() for e in entries])
    elif jsonl:
        output.jsonl(e.to_obj() for e in entries)
    else:
        for e in entries:
            _print(e, jsonl)
    return 0


def event_names() -> tuple[str, ...]:
    """Every event a history line can name: the Go names, the extensions,
    pause and resume, `restore`'s and `doctor --fix --drop-damaged`'s lines."""
    from ledger_cli.cli.commands.doctor.lost import DROPPED
    from ledger_cli.engine.events import EXTENSION_NAMES, NAMES
    from ledger_cli.engine.pause import PAUSED, RESUMED

    return (*NAMES, *EXTENSION_NAMES, PAUSED, RESUMED, "ledger.restored", DROPPED)


def _known(name: str) -> str:
    """`name`, an event a history line can carry; else a usage error (exit 2)
    naming them: a misspelt name would otherwise match nothing, quietly."""
    names = event_names()
    if name not in names:
        from ledger_cli.engine.record import go_quote

        raise InputError(f"ledger: unknown --event {go_quote(name)}: one of {', '.join(names)}")
    return name


def _print(e: HistoryEntry, jsonl: bool) -> None:
    if jsonl:
        output.json_line(e.to_obj())
    else:
        output.human_line(f"{e.time} {e.actor} {e.event} {e.key} {e.fence} {e.data}")


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
