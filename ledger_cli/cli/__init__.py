"""The `ledger` command line (docs/design.md §4): parse, call the engine, print.

- `app.py`: the entry point `main()`; `fast.py` runs the hot commands without
  typer, everything else goes to the Typer app in `declarations/`. Either
  hands the raw strings to `execute.py`, which runs the command's work and
  maps its errors to exit codes.
- `commands/`: each command's work, one module named after each command
  (`commands/prune.py` is `ledger prune`); `doctor/` and `run/` are packages.
- Shared by the commands: `context.py` (settings, the session over one store),
  `inputs.py` and `when.py` (parsing), `output.py` (plain and JSON output),
  `render.py` and `outcome.py` (rich output), `escapes.py` (untrusted text's
  controls as escapes), `outage.py` (riding out a store
  outage), `chunks.py` and `blockwrites.py` (long writes in short blocks),
  `shell_completion.py`, `typer_compat.py`.
"""
