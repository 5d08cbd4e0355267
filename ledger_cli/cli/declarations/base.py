"""The Typer app: every command's declaration (SPEC §4).

Declarations only: each command gathers its settings and hands the raw
strings to its module (`admission`, `leases`, …), imported when the command
runs. Values (keys, durations, integers, JSON) are parsed there, by
`inputs`, so the typer path and the fast path of `app.main` share one parser.

The global settings `--store`, `--actor`, `--now` and `--json` are accepted
before the command (`ledger --json list`) and after it (`ledger list --json`):
`build_cli` adds them to the group and to every command; the value given
after the command wins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.context import ENV_ACTOR, ENV_NOW, ENV_STORE, Settings
from ledger_cli.cli.typer_compat import TyperCommand, TyperGroup

SETTINGS_KEY = "ledger.settings"
COMPLETE_VAR = "_LEDGER_COMPLETE"

# -- global settings ---------------------------------------------------------------


def _remember(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """Keep a global setting given on the command line (the later one wins)."""
    if value is None or value is False or param.name is None:
        return value
    if ctx.get_parameter_source(param.name) != compat.ParameterSource.COMMANDLINE:
        return value
    ctx.find_root().meta.setdefault(SETTINGS_KEY, {})[param.name] = value
    return value


def _setting(*decls: str, metavar: str | None = None, help: str) -> Any:
    return typer.Option(
        *decls,
        metavar=metavar,
        help=help,
        expose_value=False,
        callback=_remember,
        show_default=False,
    )


def _global_settings(
    store: Annotated[
        str | None,
        _setting(
            "--store",
            metavar="URL",
            help=f"Store URL or path [env: {ENV_STORE}; default: the user data dir].",
        ),
    ] = None,
    actor: Annotated[
        str | None,
        _setting(
            "--actor",
            metavar="NAME",
            help=f"Who is writing, for the records and the log [env: {ENV_ACTOR}; "
            "default: user@host].",
        ),
    ] = None,
    now: Annotated[
        str | None,
        _setting(
            "--now",
            metavar="TIME",
            help=f"Use this RFC 3339 instant as the clock [env: {ENV_NOW}].",
        ),
    ] = None,
    json: Annotated[
        bool, _setting("--json", help="Machine-readable JSON output (errors included).")
    ] = False,
) -> None:
    """The global settings' declarations: never run, only turned into parameters."""


def global_params() -> list[compat.Parameter]:
    """Fresh click parameters for the global settings, built by typer itself from
    `_global_settings` (so every typer line builds them its own way)."""
    holder = typer.Typer()
    holder.command()(_global_settings)
    return [p for p in compat.get_command(holder).params if p.name in _GLOBAL_NAMES]


_GLOBAL_NAMES = ("store", "actor", "now", "json")


def _print_version(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from ledger_cli import __version__

        typer.echo(f"ledger_cli {__version__}")
        raise typer.Exit(0)


def _version_option(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print `ledger_cli X.Y.Z` and exit.",
            is_eager=True,
            expose_value=False,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """The group's --version declaration: never run, only turned into a parameter."""


def version_param() -> compat.Parameter:
    holder = typer.Typer()
    holder.command()(_version_option)
    (param,) = [p for p in compat.get_command(holder).params if p.name == "version"]
    return param


class LedgerGroup(TyperGroup):
    """The app's group: puts the global settings on itself and on every command."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params[:0] = [*global_params(), version_param()]
        for command in self.commands.values():
            command.params.extend(global_params())
            for param in command.params:
                compat.plain_argument(param)


app = typer.Typer(
    name="ledger",
    help=(
        "A durable task-admission ledger for the shell: idempotent admission, "
        "fenced leases, dependency blocking."
    ),
    cls=LedgerGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def build_cli() -> compat.Command:
    """The click group of `app` (what `typer.testing.CliRunner` runs too)."""
    return compat.get_command(app)


def settings_of(ctx: typer.Context) -> Settings:
    given = ctx.find_root().meta.get(SETTINGS_KEY, {})
    return Settings.from_env(**given)


def dispatch(ctx: typer.Context, fn: Callable[..., int], **kwargs: Any) -> None:
    from ledger_cli.cli.app import execute

    code = execute(settings_of(ctx), fn, **kwargs)
    if code:
        raise typer.Exit(code)


# -- option types ------------------------------------------------------------------


def complete_key(ctx: typer.Context, incomplete: str) -> list[str]:
    """Keys from the store on the line being completed (keycomp.py)."""
    from ledger_cli.cli import keycomp

    return keycomp.complete_key(ctx, incomplete)


def complete_status(incomplete: str) -> list[str]:
    from ledger_cli.cli import keycomp

    return keycomp.complete_status(incomplete)


Key = Annotated[
    str,
    typer.Argument(
        metavar="KEY", help="The task's key.", show_default=False, autocompletion=complete_key
    ),
]


def opt_key(help: str) -> Any:
    """An optional KEY argument (shown `[KEY]` in the usage line)."""
    return typer.Argument(metavar="KEY", help=help, show_default=False, autocompletion=complete_key)


def examples(*lines: str) -> str:
    """A command's help epilog: its examples, each line kept as written (click's
    `\\b` keeps the paragraph from being re-wrapped)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


OptKey = Annotated[str | None, opt_key("The task's key.")]
NextKey = Annotated[str | None, opt_key("The task's key (none with --next).")]
Owner = Annotated[str, typer.Option("--owner", metavar="O", help="Who holds the lease.")]
Lease = Annotated[
    str, typer.Option("--lease", metavar="D", help="Lease length: 90s, 5m, 1h30m, 2d, seconds.")
]
Fence = Annotated[str, typer.Option("--fence", metavar="F", help="The fence from the claim.")]
Next = Annotated[bool, typer.Option("--next", help="Claim the oldest ready task.")]
Wait = Annotated[
    str | None,
    typer.Option("--wait", metavar="D", help="With --next: poll up to D for a ready task."),
]
GiveUp = Annotated[
    str | None,
    typer.Option(
        "--give-up-after",
        metavar="D",
        help="Ride out a store outage for up to D, then exit 9 (5m).",
    ),
]
JsonLines = Annotated[bool, typer.Option("--jsonl", help="One JSON object per line.")]


# -- admission -----------------------------------------------------------------------


@app.command(
    epilog=examples(
        'ledger admit fetch --task \'{"url": "https://example.com/data.csv"}\'',
        "ledger admit load --needs fetch",
        "ledger admit --batch jobs.jsonl",
    )
)
def admit(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("The task's key (none with --batch).")] = None,
    seq: Annotated[
        str | None, typer.Option("--seq", metavar="N", help="Sequence (default 1).")
    ] = None,
    needs: Annotated[
        list[str] | None,
        typer.Option(
            "--needs",
            metavar="K",
            help="A key this task needs (repeatable).",
            autocompletion=complete_key,
        ),
    ] = None,
    task: Annotated[
        str | None, typer.Option("--task", metavar="JSON", help="The task payload (JSON).")
    ] = None,
    task_file: Annotated[
        str | None,
        typer.Option("--task-file", metavar="F", help="Read the payload from F (- for stdin)."),
    ] = None,
    batch: Annotated[
        str | None,
        typer.Option("--batch", metavar="F", help="Admit many from JSON Lines in F (- for stdin)."),
    ] = None,
    not_before: Annotated[
        str | None,
        typer.Option(
            "--not-before", metavar="TIME", help="Not due before TIME (RFC 3339): --next waits."
        ),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option("--delay", metavar="D", help="Not due before now + D (90s, 5m, 2h, 1d)."),
    ] = None,
    priority: Annotated[
        str | None,
        typer.Option(
            "--priority", metavar="N", help="-1000..1000, default 0: higher is claimed first."
        ),
    ] = None,
) -> None:
    """Admit a task: prints `admitted`, `duplicate`, `stale` or `conflict` (exit 8)."""
    from ledger_cli.cli.commands import admit as admission

    dispatch(
        ctx,
        admission.admit,
        key=key,
        seq=seq,
        needs=needs,
        task=task,
        task_file=task_file,
        batch=batch,
        not_before=not_before,
        delay=delay,
        priority=priority,
    )


# -- leases ------------------------------------------------------------------------------


@app.command(
    epilog=examples(
        "F=$(ledger claim fetch --owner w1 --lease 5m)",
        "ledger claim --next --owner w1 --lease 5m --wait 30s",
    )
)
def claim(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    give_up_after: GiveUp = None,
) -> None:
    """Claim KEY (prints the fence), or the oldest ready task with --next (prints KEY FENCE)."""
    from ledger_cli.cli.commands import claim as leases

    dispatch(
        ctx,
        leases.claim,
        key=key,
        owner=owner,
        lease=lease,
        next_=next_,
        wait=wait,
        give_up_after=give_up_after,
    )


@app.command(epilog=examples('ledger renew fetch --owner w1 --fence "$F" --lease 5m'))
def renew(ctx: typer.Context, key: Key, owner: Owner, fence: Fence, lease: Lease) -> None:
    """Extend a lease you hold."""
    from ledger_cli.cli.commands import claim as leases

    dispatch(ctx, leases.renew, key=key, owner=owner, fence=fence, lease=lease)


@app.command(epilog=examples('ledger release fetch --owner w1 --fence "$F"'))
def release(ctx: typer.Context, key: Key, owner: Owner, fence: Fence) -> None:
    """Give a claim back: the task is pending again."""
    from ledger_cli.cli.commands import claim as leases

    dispatch(ctx, leases.release, key=key, owner=owner, fence=fence)


@app.command(epilog=examples("F=$(ledger takeover fetch --owner w2 --lease 5m)"))
def takeover(ctx: typer.Context, key: Key, owner: Owner, lease: Lease) -> None:
    """Take over a stale lease; prints the new fence."""
    from ledger_cli.cli.commands import claim as leases

    dispatch(ctx, leases.takeover, key=key, owner=owner, lease=lease)


@app.command(
    epilog=examples(
        'ledger complete fetch --owner w1 --fence "$F"',
        'ledger complete fetch --owner w1 --fence "$F" --failed',
    )
)
def complete(
    ctx: typer.Context,
    key: Key,
    owner: Owner,
    fence: Fence,
    failed: Annotated[bool, typer.Option("--failed", help="Complete as failed.")] = False,
) -> None:
    """Finish a claimed task as completed (or failed)."""
    from ledger_cli.cli.commands import complete as completion

    dispatch(ctx, completion.complete, key=key, owner=owner, fence=fence, failed=failed)


# -- inspection -------------------------------------------------------------------------


@app.command(epilog=examples("ledger state report", "ledger --json state report | jq .Status"))
def state(ctx: typer.Context, key: Key) -> None:
    """Show one record."""
    from ledger_cli.cli.commands import inspect

    dispatch(ctx, inspect.state, key=key)


@app.command(epilog=examples('ledger blocked report && echo "report is stuck"'))
def blocked(ctx: typer.Context, key: Key) -> None:
    """Print the blocking key and exit 0 when blocked; exit 1 when not."""
    from ledger_cli.cli.commands import inspect

    dispatch(ctx, inspect.blocked, key=key)


@app.command(
    "list", epilog=examples("ledger list --status failed", "ledger list --jsonl | jq -r .Key")
)
def list_(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None,
        typer.Option(
            "--status",
            metavar="S",
            help="Only this status (repeatable).",
            autocompletion=complete_status,
        ),
    ] = None,
    owner: Annotated[
        str | None, typer.Option("--owner", metavar="O", help="Only this owner.")
    ] = None,
    limit: Annotated[
        str | None, typer.Option("--limit", metavar="N", help="At most N records.")
    ] = None,
    jsonl: JsonLines = False,
    pruned: Annotated[bool, typer.Option("--pruned", help="List the pruned records only.")] = False,
) -> None:
    """List records as a table (--json: an array, --jsonl: one per line)."""
    from ledger_cli.cli.commands import inspect

    dispatch(
        ctx,
        inspect.list_records,
        statuses=status,
        owner=owner,
        limit=limit,
        jsonl=jsonl,
        pruned=pruned,
    )


@app.command(
    epilog=examples(
        "ledger prune --older-than 30d --dry-run", "ledger prune --older-than 7d --status failed"
    )
)
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option("--older-than", metavar="D", help="Only records last updated at least D ago."),
    ],
    status: Annotated[
        list[str] | None,
        typer.Option("--status", metavar="S", help="completed or failed (default both)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be pruned; change nothing.")
    ] = False,
) -> None:
    """Prune finished records: keep their keys (admit stays idempotent), drop the rest."""
    from ledger_cli.cli.commands import prune as retention

    dispatch(ctx, retention.prune, older_than=older_than, statuses=status, dry_run=dry_run)


@app.command(epilog=examples("ledger tree", "ledger tree report"))
def tree(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Show this task's chain of needs instead.")] = None,
) -> None:
    """Why is it stuck: failures and what they block, or KEY's chain of needs."""
    from ledger_cli.cli.commands import inspect

    dispatch(ctx, inspect.tree, key=key)


@app.command(epilog=examples("ledger log report", "ledger log --jsonl | tail -n 5"))
def log(
    ctx: typer.Context,
    key: Annotated[str | None, opt_key("Only this task's history.")] = None,
    jsonl: JsonLines = False,
) -> None:
    """The history of writes, oldest first."""
    from ledger_cli.cli.commands import inspect

    dispatch(ctx, inspect.log, key=key, jsonl=jsonl)


# -- run -------------------------------------------------------------------------------------


class RunCommand(TyperCommand):
    """`run … -- CMD…`: everything after the first `--` is the command, untouched."""

    def parse_args(self, ctx: compat.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["ledger.command"] = args[cut + 1 :]
            args = args[:cut]
        return super().parse_args(ctx, args)


@app.command(
    cls=RunCommand,
    epilog=examples(
        'ledger run --next --owner "$(hostname)" --lease 2m -- ./job.sh',
        "ledger run --next --drain --owner w1 --lease 2m --retries 3 -- ./job.sh",
        'ledger run fetch --owner w1 --lease 5m -- curl -fsS -o data.csv "$URL"',
    ),
)
def run(
    ctx: typer.Context,
    owner: Owner,
    lease: Lease,
    key: NextKey = None,
    next_: Next = False,
    wait: Wait = None,
    retries: Annotated[
        str | None,
        typer.Option("--retries", metavar="N", help="Run the command up to N more times."),
    ] = None,
    backoff: Annotated[
        str | None,
        typer.Option("--backoff", metavar="D", help="Wait D, 2D, 4D… between attempts (1s)."),
    ] = None,
    drain: Annotated[
        bool,
        typer.Option(
            "--drain",
            help="With --next: after each task claim the next ready one, over one store "
            "connection, until none is ready (exit 0; 1 if any command failed).",
        ),
    ] = False,
    give_up_after: GiveUp = None,
    keep_output: Annotated[
        str | None,
        typer.Option(
            "--keep-output",
            metavar="SIZE",
            help="Keep the last SIZE bytes of the command's output (1MiB; 0: none, "
            "output connected straight through; at most 64MiB).",
        ),
    ] = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="D",
            help="Stop an attempt that runs longer than D (SIGTERM; exit 124).",
        ),
    ] = None,
    kill_after: Annotated[
        str | None,
        typer.Option(
            "--kill-after", metavar="D2", help="With --timeout: SIGKILL D2 after SIGTERM (10s)."
        ),
    ] = None,
) -> None:
    """Claim, run `-- CMD…` under the lease (renewed), complete by its exit status."""
    from ledger_cli.cli.commands import run as run_module

    dispatch(
        ctx,
        run_module.run,
        key=key,
        owner=owner,
        lease=lease,
        command=list(ctx.meta.get("ledger.command", [])),
        next_=next_,
        wait=wait,
        retries=retries,
        backoff=backoff,
        drain=drain,
        give_up_after=give_up_after,
        keep_output=keep_output,
        timeout=timeout,
        kill_after=kill_after,
    )


# -- wire, doctor, demo ---------------------------------------------------------------------


@app.command(
    epilog=examples(
        "ledger snapshot -o ledger.snapshot.json",
        "ledger --store sqlite:app.db snapshot | jq length",
    )
)
def snapshot(
    ctx: typer.Context,
    out: Annotated[
        str | None, typer.Option("-o", "--output", metavar="F", help="Write to F.")
    ] = None,
) -> None:
    """Write every record in the Go-compatible wire format."""
    from ledger_cli.cli.commands import snapshot as wire

    dispatch(ctx, wire.snapshot, out=out)


@app.command(epilog=examples("ledger --store /srv/ledger-new restore ledger.snapshot.json"))
def restore(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="F|-", help="A snapshot file, - for stdin.")],
) -> None:
    """Insert every record of a snapshot (nothing when a key is taken)."""
    from ledger_cli.cli.commands import snapshot as wire

    dispatch(ctx, wire.restore, source=source)


@app.command(epilog=examples("ledger doctor", "ledger doctor --fix"))
def doctor(
    ctx: typer.Context,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Repair what can be repaired safely: remove a crash's temporary files, "
            "block each escaped block and un-block each orphaned one (the engine's "
            "walks), rebuild the ready and dependents indexes from the records. "
            "A damaged record is never touched.",
        ),
    ] = False,
) -> None:
    """Check the store: problems exit 9, notes exit 0."""
    from ledger_cli.cli.commands import doctor as doctor_module

    dispatch(ctx, doctor_module.doctor, fix=fix)


@app.command(epilog=examples("ledger demo", "ledger demo --workers 5"))
def demo(
    ctx: typer.Context,
    workers: Annotated[int, typer.Option("--workers", min=1, max=8, help="Worker processes.")] = 3,
) -> None:
    """Run a small real workflow on a temporary store and show the result."""
    from ledger_cli.cli.commands import demo as demo_module

    dispatch(ctx, demo_module.demo, workers=workers)


# -- operating commands (retry, cancel, stats, watch) live in their own module ------------

from ledger_cli.cli import attempt_commands as _attempt_commands  # noqa: E402,F401
from ledger_cli.cli import operate_commands as _operate_commands  # noqa: E402,F401
from ledger_cli.cli import schedule_commands as _schedule_commands  # noqa: E402,F401
