"""The `ledger` command line (docs/design.md §4): parse, call the engine, print.

- `main()` below is the entry point: it raises the collector's threshold and
  hands over to `app.py`'s `main()`, which runs a command and exits. `fast.py`
  runs the hot commands without typer, everything else goes to the Typer app
  in `declarations/`. Either hands the raw strings to `execute.py`, which
  runs the command's work and maps its errors to exit codes.
- `commands/`: each command's work, one module named after each command
  (`commands/prune.py` is `ledger prune`); `doctor/` and `run/` are packages.
- Shared by the commands: `context.py` (settings, the session over one store),
  `freshreads.py` (a store opened afresh per refresh or request),
  `inputs.py` and `when.py` (parsing), `output.py` (plain and JSON output),
  `render.py` and `outcome.py` (rich output; `tablefit.py` fits `list`'s
  table to the window, `wholefold.py` folds keys whole), `escapes.py`
  (untrusted text's controls as escapes), `outage.py` (riding out a store
  outage), `chunks.py` and `blockwrites.py` (long writes in short blocks),
  `shell_completion.py` (the scripts, the completion options, keys and
  statuses) with `completion_shells.py` (each shell's answer) and
  `completion_words.py` (bash's words and quoting), `typer_compat.py`.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

GC_THRESHOLD = 10_000
"""The collector's first threshold in a `ledger` process (allocations between
two young collections; Python's default is 700): see `main`."""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The `ledger` command (and `python -m ledger_cli`).

    A command's start-up (its imports, opening the store) makes tens of
    thousands of objects that live as long as the process and frees next to
    none of them in cycles; at the default threshold the collector runs a
    young collection every 700 allocations and scans them again and again.
    So the threshold is raised before anything else is imported: the rest of
    the command line is imported here, after it."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    from ledger_cli.cli import app

    app.main(argv)
