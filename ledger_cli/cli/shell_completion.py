"""Shell completion (docs/design.md §6.8): the scripts in `completions/`, the
`--show-completion` and `--install-completion` options, and the keys and
statuses the scripts complete.

`python -m ledger_cli.cli.shell_completion [DIR]` rewrites the scripts (default
`completions/`); a test regenerates them and fails when they differ. Each is
exactly what `ledger --show-completion SHELL` prints for SHELL bash, zsh or
fish (without SHELL: the shell `ledger` runs in); `--install-completion
[SHELL]` writes it where that shell reads it. Another SHELL is a usage error.

The scripts are this module's own, not typer's: each hands the words to
`ledger` so that what it prints back is inserted as one word, exactly
(completion_shells.py has the protocol of each shell, completion_words.py
bash's quoting and its words split at `:`).

Keys and statuses are wired through typer's public `autocompletion=` parameter
(`declarations/base.py`). KEY arguments complete from the store named on
the line being completed (`--store`, before or after the command) or in
LEDGER_STORE, else the default store; at most MAX_KEYS candidates, none that
is not printable (a newline or ESC in a key a program stored: such a key can
still be typed, quoted); nothing, silently, when the store cannot be read
(completion must never print an error into the user's prompt). `--status`
completes the statuses the command takes (`list`'s five, `watch`'s four,
`prune`'s completed and failed), `graph --format` its formats and `log
--event` the event names: never the shell's file names.
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
SHELLS = tuple(FILES)
MAX_KEYS = 1000
STATUSES = ("pending", "claimed", "completed", "failed", "blocked")


def complete_status(incomplete: str) -> list[str]:
    return [s for s in STATUSES if s.startswith(incomplete)]


def complete_prune_status(incomplete: str) -> list[str]:
    """The statuses `prune --status` takes: completed and failed."""
    from ledger_cli.engine.prune import PRUNABLE

    return [s for s in PRUNABLE if s.startswith(incomplete)]


def complete_graph_format(incomplete: str) -> list[str]:
    """The formats `graph --format` draws: dot, mermaid, svg."""
    from ledger_cli.cli.commands.graph import FORMATS

    return [f for f in FORMATS if f.startswith(incomplete)]


def complete_event(incomplete: str) -> list[str]:
    """The event names `log --event` takes (commands/log.py `event_names`)."""
    from ledger_cli.cli.commands.log import event_names

    return [e for e in event_names() if e.startswith(incomplete)]


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

    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(stores.sqlite_uri(path, "ro"), uri=True, timeout=1.0)
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

_BASH = """\
_ledger_completion() {
    local IFS=$'\\n' line
    COMPREPLY=()
    while IFS= read -r line; do  # one candidate a line, as bash must insert it
        [[ $line ]] && COMPREPLY+=("$line")
    done < <(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \\
        COMP_LINE="$COMP_LINE" _LEDGER_COMPLETE=complete_bash "$1")
    return 0  # no candidate: bash completes file names (-o default)
}

complete -o default -F _ledger_completion ledger
"""

_ZSH = """\
#compdef ledger

_ledger_completion() {
  local -a lines values shown plain dashed
  local line
  lines=("${(@f)$(env _LEDGER_COMPLETE_WORDS="${(pj:\\n:)words[1,CURRENT-1]}" \\
    _LEDGER_COMPLETE_WORD="${words[CURRENT]}" _LEDGER_COMPLETE=complete_zsh ledger)}")
  for line in "${lines[@]}"; do
    if [[ $line == $'\\t'* ]]; then  # a key that starts with -: after a -- of its own
      dashed+=("${line#$'\\t'}")
    elif [[ $line == *$'\\t'* ]]; then
      values+=("${line%%$'\\t'*}")
      shown+=("${line#*$'\\t'}")
    elif [[ -n $line ]]; then
      plain+=("$line")
    fi
  done
  if (( ${#values} + ${#plain} + ${#dashed} == 0 )); then
    _files
    return
  fi
  (( ${#values} )) && compadd -l -d shown -a values
  (( ${#plain} )) && compadd -a plain
  (( ${#dashed} )) && compadd -P '-- ' -a dashed
  return 0
}

if [[ $zsh_eval_context[-1] == (loadautofunc|shfunc) ]]; then
  _ledger_completion "$@"  # run as _ledger, autoloaded from fpath (~/.zfunc/_ledger)
else
  compdef _ledger_completion ledger  # sourced or eval'd
fi
"""

_FISH = """\
function __ledger_complete
    set -l reply (env _LEDGER_COMPLETE_WORDS=(commandline -opc | string collect) \\
        _LEDGER_COMPLETE_WORD=(commandline -ct | string unescape | string collect) \\
        _LEDGER_COMPLETE=complete_fish ledger)
    if test -n "$reply"
        printf '%s\\n' $reply
    else
        __fish_complete_path (commandline -ct)
    end
end

complete --command ledger --no-files --arguments '(__ledger_complete)'
"""

_SCRIPTS = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}


def script(shell: str) -> str:
    """What `ledger --show-completion SHELL` prints (SHELL: one of SHELLS)."""
    return _SCRIPTS[shell]


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in FILES.items():
        path = directory / name
        path.write_text(script(shell), encoding="utf-8")
        written.append(path)
    return written


# -- --show-completion and --install-completion --------------------------------------


def shell_named(words: list[str], option: str) -> str:
    """The SHELL after `--show-completion`/`--install-completion`, else the
    shell `ledger` runs in; InputError (exit 2) for any other."""
    from ledger_cli.cli.inputs import InputError

    names = " or ".join((", ".join(SHELLS[:-1]), SHELLS[-1]))
    if len(words) > 1:
        raise InputError(f"ledger: {option} takes one SHELL ({names}), not {' '.join(words)!r}")
    if words:
        if words[0] not in SHELLS:
            raise InputError(f"ledger: {option}: unknown shell {words[0]!r} ({names})")
        return words[0]
    from ledger_cli.cli.typer_compat import detect_shell

    detected = detect_shell()
    if detected not in SHELLS:
        raise InputError(
            f"ledger: {option}: cannot complete for this shell ({detected or 'unknown'}); "
            f"name one: {option} {'|'.join(SHELLS)}"
        )
    return str(detected)


def install(shell: str, home: Path) -> Path:
    """Write the script where SHELL reads it (typer's places, so this replaces
    what an earlier `ledger` installed), and the line that loads it in the
    shell's start-up file when it is not there yet."""
    if shell == "fish":
        path = home / ".config" / "fish" / "completions" / "ledger.fish"
        rc, needed = None, ""
    elif shell == "zsh":
        path = home / ".zfunc" / "_ledger"
        rc, needed = home / ".zshrc", "fpath+=~/.zfunc; autoload -Uz compinit; compinit"
    else:
        path = home / ".bash_completions" / "ledger.sh"
        rc, needed = home / ".bashrc", f"source '{path}'"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script(shell), encoding="utf-8")
    if rc is not None:
        text = rc.read_text(encoding="utf-8") if rc.is_file() else ""
        if needed not in text:
            ended = text if not text or text.endswith("\n") else text + "\n"
            rc.write_text(f"{ended}{needed}\n", encoding="utf-8")
    return path


def completion_option(settings: Any, *, option: str, words: list[str]) -> int:
    """`ledger --show-completion [SHELL]` or `ledger --install-completion [SHELL]`."""
    from ledger_cli.cli import output

    shell = shell_named(words, option)
    if option == "--show-completion":
        output.raw(script(shell).rstrip("\n"))
        return 0
    path = install(shell, Path.home())
    output.line(f"{shell} completion installed in {path}")
    output.line("Completion will take effect once you restart the terminal")
    return 0


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("completions")
    for path in write_all(target):
        print(path)
