"""`ledger doctor`'s check of the attempts (docs/design.md §7.1): an attempt
that does not read is a problem (`--fix` leaves it: it is the only copy;
`--fix --drop-damaged` moves a JSON store's into damaged/, with a
`ledger.dropped` history line each, as a dropped record has); attempts whose
key has no record are a note, and `--fix` removes them; so are the attempts
of a pruned key (`prune` drops them itself, after its records: a crash in
between leaves them). `--fix` removes them in short blocks
(cli/blockwrites.py), as `prune` does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.cli.context import Session
    from ledger_cli.engine.blocks import Blocks
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.store import Store


REMEDY = " (restore it from a backup, or accept the loss: ledger doctor --fix --drop-damaged)"


def _check_files(
    store: Any, found: Findings, drop: bool, keys: list[str], session: Session | None
) -> None:
    """The JSON store's attempt files, each read as `state` and `output` read
    it: one that does not is a problem naming it (whatever its key: its
    header may be what is damaged); `drop` moves it into damaged/, with a
    `ledger.dropped` history line in the same lock hold, as a dropped record
    has (lost.py)."""
    try:
        bad = store.damaged_attempts()
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    if not drop:
        found.problems.extend(output.one_line(line) + REMEDY for _, line in bad)
        return
    names: dict[str, str] | None = None
    for digest in dict.fromkeys(digest for digest, _ in bad):
        if names is None:
            names = _names(store, keys)
        key = names.get(digest, "")
        try:
            with store.batch():
                moved = store.drop_damaged_attempts(digest)
                if moved and session is not None:
                    store.append_history(_dropped(session, key, moved))
        except StoreError as exc:
            found.problems.append(output.one_line(str(exc)))
            continue
        found.fixed.extend(f"moved a damaged attempt file to {to}" for _, to in moved)


def _names(store: Store, keys: list[str]) -> dict[str, str]:
    """Each key's file-name digest: the attempt keys', then the records' (a
    damaged file's key may be known only from its record)."""
    from ledger_cli.stores.jsonfile.records import key_digest

    names: dict[str, str] = {}
    for key in [*keys, *(rec.key for rec in store.range())]:
        digest = key_digest(key)
        if digest is not None:
            names.setdefault(digest, key)
    return names


def _dropped(session: Session, key: str, moved: list[tuple[str, str]]) -> list[HistoryEntry]:
    from ledger_cli.cli.commands.doctor.lost import dropped_entry

    now = str(session.now())
    what = f"an attempt of {key}" if key else "an attempt of unknown key"
    return [
        dropped_entry(session, now, key, f"{what} dropped: its damaged file {was} moved to {to}")
        for was, to in moved
    ]


def check_attempts(
    store: Store,
    found: Findings,
    fix: bool,
    lost: set[str],
    blocks: Blocks | None = None,
    drop: bool = False,
    session: Session | None = None,
) -> None:
    """Attempts of keys that have no record or a pruned one: a note (`--fix`
    removes them), but for `lost` keys (a record file gone that a restore may
    bring back, or `--fix --drop-damaged` drops): those are kept. An attempt
    that does not read is a problem; `drop` (`--fix --drop-damaged`) moves
    a JSON store's into damaged/ (stores/jsonfile/attemptdamage.py), with a
    `ledger.dropped` history line each when `session` is given."""
    from ledger_cli.engine.prune import is_pruned
    from ledger_cli.stores.attemptlog import attempt_log

    try:
        log = attempt_log(store)
        keys = log.attempt_keys()
        orphans = [key for key in keys if store.load(key) is None]
        pruned = [key for key in keys if key not in orphans and is_pruned(store, key)]
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    if hasattr(store, "damaged_attempts"):
        _check_files(store, found, drop, keys, session)
    else:
        for key in keys:  # each attempt read as `state` and `output` read it
            try:
                log.list_attempts(key)
            except StoreError as exc:
                found.problems.append(output.one_line(str(exc)))
    found.notes.extend(
        f"attempts of {_named(key)} kept: its record is lost (see above)"
        for key in orphans
        if key in lost
    )
    orphans = [key for key in orphans if key not in lost]
    why = {key: "which has no record" for key in orphans}
    why.update((key, "whose record is pruned") for key in pruned)
    if fix and why:
        gone = sorted(why)
        if blocks is None:
            log.remove_attempts(gone)
        else:
            blocks.runs(gone, log.remove_attempts)
        found.fixed.extend(f"removed the attempts of {_named(key)}, {why[key]}" for key in gone)
        return
    found.notes.extend(
        f"attempts of {_named(key)}, {why[key]} (--fix removes them)" for key in sorted(why)
    )


def _named(key: str) -> str:
    """A key in a line, as every line of `doctor` shows one (`output.shown`: a
    control as its escape, bytes that were not UTF-8 as U+FFFD), in quotes."""
    return f"'{output.shown(key)}'"
