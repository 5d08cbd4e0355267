"""`ledger resume`: let `claim --next` and `run --next` claim again (docs/design.md §8.3).

A pause state that does not read (a damaged `paused.json` or `ledger_pause`
row: StoreDamageError) is written over: resuming is what that error says
to do, and the store then runs."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.commands.pause import write_history
from ledger_cli.cli.context import Session, Settings
from ledger_cli.engine.pause import RESUMED, paused, set_paused
from ledger_cli.errors import StoreDamageError


def resume(settings: Settings) -> int:
    with Session(settings, existing=True) as s, s.store.batch():
        now = s.now()  # once the write lock is held: in the history's order
        damaged = False
        try:
            held = paused(s.store)
        except StoreDamageError:
            held, damaged = None, True
        changed = held is not None or damaged
        if changed:
            set_paused(s.store, None)
            write_history(s, str(now), RESUMED, f"claiming resumed by {s.actor}")
    if changed:
        output.note_committed()  # a failed stdout's line says so (exit 74)
    if settings.json:
        output.json_line({"paused": False, "changed": changed})
    elif held is not None:
        output.human_line(f"resumed (paused {held.describe()})")
    elif damaged:
        output.line("resumed (the pause state was damaged; it is written over)")
    else:
        output.line("not paused: claiming runs")
    return 0
