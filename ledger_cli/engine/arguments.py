"""What the library refuses of its arguments besides their numbers and types
(docs/design.md §2.11, departure 6): a key, need, actor or owner that is not
valid Unicode, a not-before no store can write, a queue name the command line
could never name.

The sequence, priority and queue length are `record.py`'s (`check_sequence`,
`check_priority`, `check_queue`); these are the rest of what the command line
checks (cli/inputs.py `validate_key`, cli/when.py, cli/queueargs.py), so a
program that writes through the library cannot store what a `ledger` command
then fails to read. Each is a `ValidationError` (exit 8) raised before any
store is read: nothing is written, and every store says the same.

Imported only when an admission names a not-before or a queue, or a key,
need, actor or owner is not ASCII (the hot commands' start-up: CONTRIBUTING);
the types are `record.check_str`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import go_quote
from ledger_cli.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterable

LAST_YEAR = 9999
"""The last year a stored time can name (RFC 3339's four digits: cli/when.py)."""

_CONTROLS: dict[int, None] = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)])
"""C0, DEL and C1: what cli/inputs.py refuses in a key or a queue name."""


def check_keys(key: str, needs: Iterable[str] | None) -> None:
    """The key and each need: valid Unicode (no lone surrogate), which every
    store can hold (a JSON store names its files by the key's UTF-8, and
    PostgreSQL's text is UTF-8): else ValidationError, not the store's
    StoreError (exit 9), which would blame a healthy store."""
    for name, what in ((key, "key"), *((n, "need") for n in needs or ())):
        if name.isascii():
            continue
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(f"ledger: {what} {go_quote(name)} is not valid Unicode") from None


def check_text(value: str, what: str) -> None:
    """An actor or owner: valid Unicode, as the command line's (cli/inputs.py
    `validate_text`), else ValidationError. A lone surrogate (what `os.fsdecode`
    makes of bytes that are not UTF-8) was a StoreError on PostgreSQL, U+FFFD
    in a JSON file, and bytes `doctor` reports on SQLite."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"ledger: {what} {go_quote(value)} is not valid Unicode") from None


def check_named_key(key: str) -> None:
    """A key an operation names but does not create (claim, complete, state…):
    valid Unicode, or a key the Go service wrote with bytes that are not UTF-8
    as the command line reads it (each such byte one surrogate U+DC80..U+DCFF,
    `ledger claim $'key-\\xff'`: docs/stores.md, "One bad row is one bad row").
    Any other lone surrogate stands for no byte, so names no key a store could
    hold: ValidationError, as `check_keys`, not SQLite's StoreError."""
    try:
        if key.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape") == key:
            return
    except UnicodeEncodeError:
        pass
    raise ValidationError(f"ledger: key {go_quote(key)} is not valid Unicode")


def check_not_before(not_before: Instant) -> Instant:
    """A not-before every store can write and read back: its RFC 3339 text
    (years 0000 to 9999, an offset of whole minutes) names the same instant."""
    text = str(not_before)
    try:
        back = Instant.parse(text)
    except ValueError:
        back = None
    if back != not_before or text[4:5] != "-":
        raise ValidationError(
            f"ledger: not_before {text} is not a time a store can keep "
            f"(RFC 3339, from the year 0000 to {LAST_YEAR}, an offset of whole minutes)"
        )
    return not_before


def check_queue_name(queue: str) -> str:
    """The command line's rules beyond the length (cli/queueargs.py): no control
    character, no comma, no space at either end (`--queue a,b` names two
    queues, each stripped: such a name could never be chosen)."""
    if len(queue.translate(_CONTROLS)) != len(queue):
        raise ValidationError(f"ledger: queue {go_quote(queue)} contains a control character")
    if "," in queue or queue != queue.strip():
        raise ValidationError(
            f"ledger: queue {go_quote(queue)} has a comma or a space at its ends"
            " (--queue a,b names two queues)"
        )
    return queue
