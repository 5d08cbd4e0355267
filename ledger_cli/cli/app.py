"""`main()` runs a command and exits with its code (`ledger_cli.cli.main`, the
`ledger` entry point, calls it once the collector's threshold is raised).

`admit`, `claim`, `renew`, `release`, `takeover`, `complete`, `run … -- CMD`
and `list --jsonl` take the fast path (`fast.py`: no typer import);
everything else, and anything the fast path is unsure of, goes to the Typer
app in `declarations/`; either runs the command's work in `commands/`
through `execute.py`.

Exit codes are docs/design.md §4.4's: each error class carries its own (`errors.py`);
click's usage errors are 2; output that stdout does not take is 74 (closed,
full), and a quiet 141 when its reader went away (`output.ReaderGone`); an
unexpected exception is 70 (one line on stderr, the traceback only with
LEDGER_DEBUG=1).
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.execute import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, execute
from ledger_cli.errors import LedgerError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

    from ledger_cli.cli.typer_compat import ClickException


def _wants_json(args: Sequence[str]) -> bool:
    head = args[: args.index("--")] if "--" in args else args
    return "--json" in head


def _hint_the_separator(exc: ClickException, args: Sequence[str]) -> None:
    """`ledger run --next … echo hi`, the `--` forgotten: click's "unexpected
    extra argument" does not say where a command goes, so the same line does."""
    ctx = getattr(exc, "ctx", None)
    if ctx is None or ctx.info_name != "run" or "--" in args:
        return
    if "unexpected extra argument" in exc.message:
        exc.message += " (put the command after --: ledger run [OPTIONS] [KEY] -- CMD [ARGS]...)"


def run_typer(args: Sequence[str]) -> int:
    import typer

    from ledger_cli.cli.declarations import build_cli
    from ledger_cli.cli.shell_completion import COMPLETE_VAR
    from ledger_cli.cli.typer_compat import ClickException

    cli = build_cli()
    try:
        rv = cli.main(
            args=list(args),
            prog_name="ledger",
            complete_var=COMPLETE_VAR,
            standalone_mode=False,
        )
    except ClickException as exc:
        _hint_the_separator(exc, args)
        try:
            exc.show()
        except OSError:  # stderr unusable: the exit code still tells
            output.devnull_on(2)
        if _wants_json(args):
            message = output.one_line(exc.format_message())
            output.json_line(output.error_object("usage", message, exc.exit_code))
        return exc.exit_code
    except typer.Abort:
        output.diag("ledger: aborted")
        return EXIT_INTERRUPTED
    return rv if isinstance(rv, int) else 0


def run(args: Sequence[str]) -> int:
    from ledger_cli.cli import fast

    output.show_invalid_text_as_fffd()

    line = fast.version(args)
    if line is not None:
        output.line(line)
        return 0
    parsed = fast.parse(args)
    if parsed is not None:
        return execute(fast.settings(parsed), fast.target(parsed), **parsed.kwargs)
    return run_typer(args)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    output.guard_streams()
    code = 0
    try:
        code = run(args)
        sys.stdout.flush()
    except LedgerError as exc:  # stdout failed (OutputError), at the flush or outside a command
        failed = output.report(exc, False)
        code = code or failed  # a command that failed keeps its own code
    except (output.ReaderGone, BrokenPipeError):
        # The reader went away (`ledger list | head`): quiet, as a SIGPIPE'd tool is.
        output.devnull_on(sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        output.diag("ledger: interrupted")
        code = EXIT_INTERRUPTED
    except Exception as exc:  # a bug outside any command (argument handling)
        code = output.report_internal(exc, _wants_json(args))
    # The interpreter's exit collects garbage over every object the imports made,
    # the bulk of a short command's exit; frozen, they are left to the exit,
    # which frees them all the same. Output is flushed and atexit runs as before.
    gc.freeze()
    sys.exit(code)
