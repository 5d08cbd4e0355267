"""`ledger pause [--reason TEXT]` (docs/design.md §8.3; `resume.py` undoes it).

Pausing stops `claim --next` and `run --next` (exit 7, saying since when, by
whom and why); everything else works as always. Each change is one unit
under the store's write lock with its history line (`ledger.paused`,
`ledger.resumed`, with the reason); pausing a paused store or resuming a
running one says what is the case and exits 0.
"""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import validate_text
from ledger_cli.engine.pause import PAUSED, PauseInfo, paused, set_paused


def write_history(s: Session, now: str, event: str, data: str) -> None:
    from ledger_cli.engine.history import HistoryEntry

    append = getattr(s.store, "append_history", None)
    if append is not None:
        append([HistoryEntry(time=now, actor=s.actor, event=event, key="", fence=0, data=data)])


def pause(settings: Settings, reason: str | None = None) -> int:
    why = validate_text(reason, "--reason") if reason is not None else ""
    with Session(settings) as s, s.store.batch():
        now = s.now()  # once the write lock is held: in the history's order
        held = paused(s.store)
        changed = held is None
        if held is None:
            held = PauseInfo(now, s.actor, why)
            set_paused(s.store, held)
            text = f"claiming paused by {s.actor}" + (f": {why}" if why else "")
            write_history(s, str(now), PAUSED, text)
    if changed:
        output.note_committed()  # a failed stdout's line says so (exit 74)
    if settings.json:
        output.json_line(
            {
                "paused": True,
                "changed": changed,
                "since": str(held.since),
                "actor": held.actor,
                "reason": held.reason,
            }
        )
    elif changed:
        output.human_line(f"paused: --next claims exit 7 until ledger resume ({held.describe()})")
    else:
        output.human_line(f"already paused ({held.describe()})")
    return 0
