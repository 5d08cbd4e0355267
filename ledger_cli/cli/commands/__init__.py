"""Each command's work, one module per command and named after it (docs/design.md §4).

`declarations/` parses the command line and calls `run`'s, `claim`'s, …
function here; the fast path (`fast.py`) calls the same functions. A command
that needs several modules is a package: `doctor/` and `run/`.
"""
