"""Run one command's work; its errors become docs/design.md §4.4's exit codes.

Each error class carries its own code (`errors.py`); an unexpected exception
is 70 (one line on stderr, the traceback only with LEDGER_DEBUG=1). Both the
fast path and the Typer app's commands (`declarations.base.command`) come through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.inputs import require_keys
from ledger_cli.errors import LedgerError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ledger_cli.cli.context import Settings

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


def execute(settings: Settings, fn: Callable[..., int], **kwargs: Any) -> int:
    """Run one command implementation; errors become the documented exit codes.
    An empty KEY argument is refused here, before the command opens a store."""
    try:
        require_keys(kwargs)
        return fn(settings, **kwargs)
    except LedgerError as exc:
        return output.report(exc, settings.json)
    except KeyboardInterrupt:
        output.diag("ledger: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # a stdout not guarded (an embedding's): as `_Stdout` tells it
        raise output.ReaderGone from None
    except Exception as exc:
        return output.report_internal(exc, settings.json)
