"""Shell completion (docs/design.md §6.8): the scripts in `completions/`, and the keys
and statuses they complete.

`python -m ledger_cli.cli.shell_completion [DIR]` rewrites the scripts (default
`completions/`); a test regenerates them and fails when they differ. Each is
exactly what `ledger --show-completion SHELL` prints (typer detects the shell
unless told, so the scripts are made from typer's templates directly).

Keys and statuses are wired through typer's public `autocompletion=` parameter
(`declarations/base.py`). KEY arguments complete from the store named on
the line being completed (`--store`, before or after the command) or in
LEDGER_STORE, else the default store; at most MAX_KEYS candidates, none that
is not printable (a newline or ESC in a key a program stored: such a key can
still be typed, quoted); nothing, silently, when the store cannot be read
(completion must never print an error into the user's prompt). `--status`
completes the five statuses.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState

COMPLETE_VAR = "_LEDGER_COMPLETE"
FILES: dict[str, str] = {"bash": "ledger.bash", "zsh": "_ledger", "fish": "ledger.fish"}
MAX_KEYS = 1000
STATUSES = ("pending", "claimed", "completed", "failed", "blocked")


def complete_status(incomplete: str) -> list[str]:
    return [s for s in STATUSES if s.startswith(incomplete)]


def store_on_line(ctx: Any) -> str | None:
    """`--store` as given on the line being completed (the later one wins)."""
    from ledger_cli.cli.context import SETTINGS_KEY

    given = ctx.find_root().meta.get(SETTINGS_KEY, {})
    url = given.get("store")
    return str(url) if url else None


def complete_key(ctx: Any, incomplete: str) -> list[str]:
    """Keys of the store that start with `incomplete` (at most MAX_KEYS); [] on any error."""
    try:
        # Nothing may reach the terminal: not a warning, not a driver's notice.
        with contextlib.redirect_stderr(io.StringIO()):
            url = store_on_line(ctx) or os.environ.get("LEDGER_STORE") or None
            return keys_from(url, incomplete)
    except Exception:
        return []


def keys_from(url: str | None, prefix: str, limit: int = MAX_KEYS) -> list[str]:
    from ledger_cli.cli.context import Settings, store_url

    target = store_url(Settings(store=url))
    if url is not None:  # completing creates no store, and says so (a read's rule)
        from ledger_cli.stores import require_store

        require_store(target)
    fast = _sqlite_keys(target, prefix, limit)
    if fast is not None:
        return fast
    from ledger_cli.engine.prune import visible
    from ledger_cli.engine.record import byte_order
    from ledger_cli.stores import open_store

    out: list[str] = []
    with open_store(target, create=False) as store:  # completing creates no store
        # The JSON store streams its record files without taking the lock
        # (`scan_visible`, storage order), so the scan stops at `limit`
        # matches; other stores page through unpruned records in key order.
        scan: Callable[[], Iterator[TaskState]] | None = getattr(store, "scan_visible", None)
        for rec in scan() if scan is not None else visible(store):
            if rec.key.startswith(prefix) and rec.key.isprintable():
                out.append(rec.key)
                if len(out) >= limit:
                    break
    return sorted(out, key=byte_order)


def _sqlite_keys(url: str, prefix: str, limit: int) -> list[str] | None:
    """SQLite: one read-only indexed query on the Go schema's table (no writes,
    no migration, no lock held); None for any other store."""
    from ledger_cli import stores

    kind, path = stores._parse(url)  # the one reading of store URLs
    if kind != "sqlite":
        return None
    import sqlite3
    from urllib.parse import quote

    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=1.0)
    try:
        where = "substr(t.key, 1, ?) = ?"
        args = (len(prefix), prefix)
        try:  # pruned keys left out, as `list` leaves them out
            rows = conn.execute(
                f"SELECT t.key FROM ledger_tasks t WHERE {where} AND NOT EXISTS"
                " (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key",
                args,
            )
        except sqlite3.OperationalError:  # a store no `ledger` has opened: the Go schema only
            rows = conn.execute(
                f"SELECT t.key FROM ledger_tasks t WHERE {where} ORDER BY t.key", args
            )
        # Read row by row up to `limit` printable keys: those left out do not count.
        out: list[str] = []
        for (key,) in rows:
            if str(key).isprintable():
                out.append(str(key))
                if len(out) >= limit:
                    break
        return out
    finally:
        conn.close()


# -- the scripts -------------------------------------------------------------------


def script(shell: str) -> str:
    """What `ledger --show-completion SHELL` prints, for this app's program
    name and completion variable (no shell detection involved)."""
    from ledger_cli.cli.typer_compat import get_completion_script

    return get_completion_script(prog_name="ledger", complete_var=COMPLETE_VAR, shell=shell) + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in FILES.items():
        path = directory / name
        path.write_text(script(shell), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("completions")
    for path in write_all(target):
        print(path)
