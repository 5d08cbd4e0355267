"""The outcome of runs where a person looks (docs/design.md §7.3): `state`'s attempts
and output tail, `tree`'s marks on failures. Reads only; rich is imported only
by the functions that render."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable
    from typing import Any

    from rich.console import RenderableType

    from ledger_cli.engine.attempts import Attempt
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

STATE_ATTEMPTS = 5
STATE_LINES = 10
STATE_BYTES = 4096
"""At most this much of those lines: a command that writes a megabyte with no
newline does not fill the terminal (`ledger output` prints all of it)."""


def attempts_of(store: Store, key: str) -> list[Attempt]:
    from ledger_cli.stores.attemptlog import attempt_log

    return attempt_log(store).list_attempts(key)


def judged_attempts(store: Store, rec: TaskState, now: Instant) -> list[Attempt]:
    """`rec`'s attempts, each abandoned one marked so (docs/design.md §7.1)."""
    from ledger_cli.engine.attempts import judge, taken_lease

    atts = attempts_of(store, rec.key)
    judge(atts, rec, now, taken_lease(store, rec.key))
    return atts


def cancellation(store: Store, key: str) -> str | None:
    """`cancelled by ACTOR[: REASON]` when the key's last ending was `cancel`."""
    return cancellations(store, [key]).get(key)


def cancellations(store: Store, keys: Collection[str]) -> dict[str, str]:
    """`cancelled by ACTOR[: REASON]` of each of `keys` whose last ending was
    `cancel`. A store that reads its history by key through an index (the SQL
    stores: `history_fences`, as engine/history.py asks) is read key by key;
    the others, whose read of one key's history is a pass over all of it (the
    JSON store's history.jsonl), once for every key together."""
    wanted = set(keys)
    read = getattr(store, "read_history", None)
    if read is None or not wanted:
        return {}
    if len(wanted) == 1 or getattr(store, "history_fences", None) is not None:
        entries: Iterable[HistoryEntry] = (entry for key in wanted for entry in read(key))
    else:
        entries = read()
    last: dict[str, HistoryEntry] = {}
    for entry in entries:
        if entry.event in ("ledger.cancelled", "ledger.completed") and entry.key in wanted:
            last[entry.key] = entry
    return {
        key: _cancelled(entry) for key, entry in last.items() if entry.event == "ledger.cancelled"
    }


def _cancelled(entry: HistoryEntry) -> str:
    text = entry.data.partition(" cancelled by ")[2] or entry.actor
    who, _, reason = text.partition(" (reason: ")
    return f"cancelled by {who}: {reason.removesuffix(')')}" if reason else f"cancelled by {who}"


def failure_mark(
    store: Store, key: str, fence: int | None = None
) -> tuple[str | None, dict[str, Any]]:
    """The mark of a failed key (`exit 1`, `timed out`, `SIGKILL`,
    `cancelled by alice: superseded`) and its `--json` fields: a cancelled
    key's are null, its attempts' exits being from before the cancel. `fence`,
    the record's: when the latest attempt holds it, no cancel came after that
    attempt (a cancel raises the fence: engine/cancel.py), and the history is
    not read."""
    return failure_outcomes(store, [(key, fence)])[key]


def failure_outcomes(
    store: Store, failed: Iterable[tuple[str, int | None]]
) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """`failure_mark` of each (key, fence) of `failed`, the history read once
    for all of them (`cancellations`): a thousand failures cost one pass over
    it, not a thousand."""
    atts_of: dict[str, list[Attempt] | None] = {}
    asked: list[str] = []
    for key, fence in failed:
        try:
            atts: list[Attempt] | None = attempts_of(store, key)
        except StoreError:
            atts = None
        atts_of[key] = atts
        if atts is not None and not (fence is not None and atts and atts[-1].fence == fence):
            asked.append(key)
    try:
        cancelled = cancellations(store, asked)
    except StoreError:
        for key in asked:
            atts_of[key] = None
        cancelled = {}
    return {key: _outcome(atts, cancelled.get(key)) for key, atts in atts_of.items()}


def _outcome(
    atts: list[Attempt] | None, cancelled: str | None
) -> tuple[str | None, dict[str, Any]]:
    fields: dict[str, Any] = {"exit": None, "signal": None, "timed_out": False}
    if atts is None:
        return None, fields
    if cancelled is not None:
        return cancelled, fields
    if not atts:
        return None, fields
    last = atts[-1]
    fields = {"exit": last.exit, "signal": last.signal, "timed_out": last.timed_out}
    if last.ended is None:
        return None, fields
    return last.outcome(), fields


def failure_marks(store: Store, keys: list[str]) -> dict[str, str]:
    found = failure_outcomes(store, [(key, None) for key in keys])
    return {key: mark for key, (mark, _fields) in found.items() if mark is not None}


def state_attempts(
    store: Store, rec: TaskState, now: Instant, store_arg: str | None = None
) -> list[RenderableType]:
    """What `state` shows below the panel: the last attempts and output lines,
    then the command that prints all of it (with the `--store` it was given)."""
    from rich.table import Table
    from rich.text import Text

    from ledger_cli.cli.commands.output import last_lines
    from ledger_cli.cli.render import safe
    from ledger_cli.engine.attempts import seconds_text
    from ledger_cli.stores.attemptlog import attempt_log

    key = rec.key
    log = attempt_log(store)
    atts = judged_attempts(store, rec, now)
    if not atts:
        return []
    table = Table(title="attempts", title_justify="left", box=None, pad_edge=False)
    for name in ("n", "fence", "owner@host", "started", "took", "outcome"):
        table.add_column(name, justify="right" if name in ("n", "fence", "took") else "left")
    for att in atts[-STATE_ATTEMPTS:]:
        took = att.seconds()
        outcome = att.outcome()
        style = "green" if outcome == "exit 0" else "yellow" if outcome == "running" else "red"
        table.add_row(
            str(att.n),
            str(att.fence),
            Text(safe(f"{att.owner}@{att.host}")),
            att.started,
            seconds_text(took) if took is not None else "",
            Text(outcome, style=style),
        )
    shown: list[RenderableType] = [table]
    latest = atts[-1]
    data = log.read_output(key, latest.n)
    lines = last_lines(data, STATE_LINES)
    cut = len(lines) > STATE_BYTES
    tail = lines[-STATE_BYTES:].decode("utf-8", "replace")
    if tail:
        what = f"last {STATE_BYTES:,} bytes" if cut else "last lines"
        shown.append(Text(f"{what} of attempt {latest.n}:", style="bold"))
        shown.append(Text(safe(tail.rstrip("\n"), lines=True)))
        where = f"--store {_quoted(store_arg)} " if store_arg is not None else ""
        shown.append(Text(safe(f"all of it: ledger {where}output {_quoted(key)}"), style="dim"))
    return shown


def _quoted(key: str) -> str:
    """`key` as one shell word naming it. A key with bytes that are not UTF-8
    (the Go service's, a lone surrogate each) or a character `safe` shows as
    an escape (a tab, ESC) is written byte by byte in bash's `$'…'` form, as
    `doctor` names such a key: quoted as it is, it would be shown otherwise
    than it is typed."""
    import shlex

    from ledger_cli.cli.render import safe
    from ledger_cli.stores.sql.utf8 import hex_bytes, is_utf8

    if is_utf8(key) and safe(key) == key:
        return shlex.quote(key)
    return "$'" + hex_bytes(key).replace("'", "\\x27") + "'"


def with_attempts(record_json: str, store: Store, rec: TaskState, now: Instant) -> str:
    """`state --json`: the wire record object with `"attempts"` added, each
    with `"abandoned"` judged at `now`."""
    from ledger_cli.cli import output

    atts = [a.shown_obj() for a in judged_attempts(store, rec, now)]
    body = record_json.rstrip()
    assert body.endswith("}")
    sep = "," if body != "{}" else ""
    return body[:-1] + sep + '"attempts":' + output.dumps(atts) + "}"


def add_failure_fields(doc: Any, store: Store) -> None:
    """`tree --json`: `"exit"`, `"signal"`, `"timed_out"` on each failure."""
    if isinstance(doc, dict) and isinstance(doc.get("failed"), list):
        for item in doc["failed"]:
            item.update(failure_mark(store, item["key"])[1])
    if isinstance(doc, dict) and isinstance(doc.get("needs"), list):
        for item in doc["needs"]:
            if item.get("status") == "failed":
                item.update(failure_mark(store, item["key"])[1])
