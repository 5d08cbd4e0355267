"""`ledger resume`: let `claim --next` and `run --next` claim again (docs/design.md §8.3)."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.commands.pause import write_history
from ledger_cli.cli.context import Session, Settings
from ledger_cli.engine.pause import RESUMED, paused, set_paused


def resume(settings: Settings) -> int:
    with Session(settings) as s:
        now = s.now()
        with s.store.batch():
            held = paused(s.store)
            if held is not None:
                set_paused(s.store, None)
                write_history(s, str(now), RESUMED, f"claiming resumed by {s.actor}")
    if held is not None:
        output.note_committed()  # a failed stdout's line says so (exit 74)
    if settings.json:
        output.json_line({"paused": False, "changed": held is not None})
    elif held is not None:
        output.line(f"resumed (paused {held.describe()})")
    else:
        output.line("not paused: claiming runs")
    return 0
