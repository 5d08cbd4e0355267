"""The fast path: `admit`, `claim`, `renew`, `release`, `takeover`,
`complete`, `run … -- CMD` and `list --jsonl` without importing typer.

Cron jobs and shell loops start a process per operation, and importing typer
(with its vendored click, inspect, shutil, …) costs several times the
interpreter's own start-up. These commands' arguments are simple, so `parse`
tokenizes them the way click does for the declarations in `declarations/`, and
*declines* (returns None) on anything it is not sure about: `--help`, a
`--` (but `run`'s, before its command), an unknown or short option, a
missing value or required option, too many arguments, the completion
variable, `list` without `--jsonl` (a table is rich's, on the Typer path).
The typer app then handles the command, errors included, so usage errors
are always click's. Values are
parsed by `inputs` on both paths; `tests/cli/test_cli_fast.py` checks that this
table matches the click commands and that both paths behave the same.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from ledger_cli.cli.context import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


# Plain classes, not dataclasses: creating a dataclass costs a few ms at import.
class Opt:
    __slots__ = ("dest", "flag", "multiple", "required")

    def __init__(
        self, dest: str, flag: bool = False, multiple: bool = False, required: bool = False
    ) -> None:
        self.dest = dest
        self.flag = flag
        self.multiple = multiple
        self.required = required


class Spec:
    __slots__ = ("options", "positionals", "requires", "rest", "target")

    def __init__(
        self,
        positionals: tuple[tuple[str, bool], ...],
        options: dict[str, Opt],
        target: str,
        rest: str | None = None,
        requires: str | None = None,
    ) -> None:
        self.positionals = positionals  # (dest, required)
        self.options = options
        self.target = target  # "module:function"
        self.rest = rest  # the dest of everything after `--` (required), or None
        self.requires = requires  # a flag's dest the fast path needs, or None


GLOBAL: dict[str, Opt] = {
    "--store": Opt("store"),
    "--actor": Opt("actor"),
    "--now": Opt("now"),
    "--json": Opt("json", flag=True),
}

_OWNER = Opt("owner", required=True)
_LEASE = Opt("lease", required=True)
_FENCE = Opt("fence", required=True)
_CLAIMING: dict[str, Opt] = {
    "--owner": _OWNER,
    "--lease": _LEASE,
    "--next": Opt("next_", flag=True),
    "--wait": Opt("wait"),
    "--give-up-after": Opt("give_up_after"),
    "--queue": Opt("queue", multiple=True),
}
"""The options `claim` and `run` share."""

COMMANDS: dict[str, Spec] = {
    "admit": Spec(
        (("key", False),),
        {
            "--seq": Opt("seq"),
            "--needs": Opt("needs", multiple=True),
            "--task": Opt("task"),
            "--task-file": Opt("task_file"),
            "--batch": Opt("batch"),
            "--not-before": Opt("not_before"),
            "--delay": Opt("delay"),
            "--priority": Opt("priority"),
            "--queue": Opt("queue"),
        },
        "commands.admit:admit",
    ),
    "claim": Spec((("key", False),), _CLAIMING, "commands.claim:claim"),
    "renew": Spec(
        (("key", True),),
        {"--owner": _OWNER, "--fence": _FENCE, "--lease": _LEASE},
        "commands.renew:renew",
    ),
    "release": Spec(
        (("key", True),), {"--owner": _OWNER, "--fence": _FENCE}, "commands.release:release"
    ),
    "takeover": Spec(
        (("key", True),), {"--owner": _OWNER, "--lease": _LEASE}, "commands.takeover:takeover"
    ),
    "complete": Spec(
        (("key", True),),
        {"--owner": _OWNER, "--fence": _FENCE, "--failed": Opt("failed", flag=True)},
        "commands.complete:complete",
    ),
    "run": Spec(
        (("key", False),),
        {
            **_CLAIMING,
            "--retries": Opt("retries"),
            "--backoff": Opt("backoff"),
            "--drain": Opt("drain", flag=True),
            "--until-idle": Opt("until_idle", flag=True),
            "--keep-output": Opt("keep_output"),
            "--timeout": Opt("timeout"),
            "--kill-after": Opt("kill_after"),
        },
        "commands.run:run",
        rest="command",
    ),
    "list": Spec(
        (),
        {
            "--status": Opt("statuses", multiple=True),
            "--owner": Opt("owner"),
            "--limit": Opt("limit"),
            "--jsonl": Opt("jsonl", flag=True),
            "--pruned": Opt("pruned", flag=True),
            "--queue": Opt("queue", multiple=True),
        },
        "commands.list:list_records",
        requires="jsonl",
    ),
}


class Parsed:
    __slots__ = ("command", "kwargs", "settings")

    def __init__(self, command: str, settings: dict[str, Any], kwargs: dict[str, Any]) -> None:
        self.command = command
        self.settings = settings
        self.kwargs = kwargs


def _take(args: Sequence[str], i: int, table: dict[str, Opt], into: dict[str, Any]) -> int | None:
    """Consume the option at args[i] (and its value); the next index, or None."""
    name, eq, value = args[i].partition("=")
    opt = table.get(name)
    if opt is None:
        return None
    if opt.flag:
        if eq:
            return None
        into[opt.dest] = True
        return i + 1
    if not eq:
        if i + 1 >= len(args):
            return None
        value = args[i + 1]
        i += 1
    if opt.multiple:
        into.setdefault(opt.dest, []).append(value)
    else:
        into[opt.dest] = value
    return i + 1


def parse(args: Sequence[str]) -> Parsed | None:
    """Tokenize like click, or None to let the typer app handle it."""
    if os.environ.get("_LEDGER_COMPLETE"):
        return None
    settings: dict[str, Any] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        nxt = _take(args, i, GLOBAL, settings)
        if nxt is None:
            return None
        i = nxt
    if i >= len(args) or args[i] not in COMMANDS:
        return None
    command = args[i]
    spec = COMMANDS[command]
    kwargs: dict[str, Any] = {}
    positionals: list[str] = []
    i += 1
    while i < len(args):
        arg = args[i]
        if arg == "--" and spec.rest is not None:
            kwargs[spec.rest] = list(args[i + 1 :])
            break
        if arg.startswith("-") and len(arg) > 1:
            if arg == "--" or not arg.startswith("--"):
                return None
            nxt = _take(args, i, spec.options, kwargs)
            if nxt is None:
                nxt = _take(args, i, GLOBAL, settings)
            if nxt is None:
                return None
            i = nxt
        else:
            positionals.append(arg)
            i += 1
    if len(positionals) > len(spec.positionals):
        return None
    for n, (dest, required) in enumerate(spec.positionals):
        if n < len(positionals):
            kwargs[dest] = positionals[n]
        elif required:
            return None
        else:
            kwargs[dest] = None
    if spec.rest is not None and not kwargs.get(spec.rest):
        return None
    if spec.requires is not None and not kwargs.get(spec.requires):
        return None
    for opt in spec.options.values():
        if opt.dest not in kwargs:
            if opt.required:
                return None
            if opt.flag:
                kwargs[opt.dest] = False
            elif not opt.multiple:
                kwargs[opt.dest] = None
    return Parsed(command, settings, kwargs)


VERSION_FLAGS = ("--version", "-V")


def version(args: Sequence[str]) -> str | None:
    """`ledger --version` / `-V` alone: the line to print (no store, no typer);
    with anything else on the line the typer app's eager option prints it."""
    if len(args) == 1 and args[0] in VERSION_FLAGS:
        from ledger_cli import __version__

        return f"ledger_cli {__version__}"
    return None


def target(parsed: Parsed) -> Callable[..., int]:
    module_name, _, name = COMMANDS[parsed.command].target.partition(":")
    module = importlib.import_module(f"ledger_cli.cli.{module_name}")
    fn: Callable[..., int] = getattr(module, name)
    return fn


def settings(parsed: Parsed) -> Settings:
    return Settings.from_env(**parsed.settings)
