"""Plain output for scripts: stdout lines, JSON documents, one-line errors.

JSON records always go through `engine.wire.encode.record_to_json`, the one codec of
the wire, the stores and the command line. Wrapper objects keep the key
order docs/design.md §4 documents (`{"key", "fence", "record"}`). No rich here.
The writer a line goes through decides how the untrusted text in it is
shown (docs/design.md §5.3): `line`, `human_line`, `raw`, `diag`.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

# collections.abc's own Mapping, loaded with os at start-up (collections.abc
# itself imports collections: a hot command's start-up spares it).
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ledger_cli.engine.record import TaskState
    from ledger_cli.errors import LedgerError

INTERNAL_EXIT = 70


class Raw(str):
    """JSON text to be inserted as is (a wire record)."""

    __slots__ = ()


def record(rec: TaskState | None) -> Raw:
    if rec is None:
        return Raw("null")
    from ledger_cli.engine.wire.encode import record_to_json

    return Raw(record_to_json(rec))


def task(value: Any) -> Raw:
    """A task payload as the records carry it (Go's encoding: keys sorted,
    integers within 64 bits with every digit), for `--json` and `LEDGER_TASK`."""
    from ledger_cli.engine import gojson

    return Raw(gojson.encode_value(value))


def dumps(value: Any) -> str:
    """Compact JSON; dicts keep their order; `Raw` is spliced in; everything
    else is written as Go's encoder writes it (gojson)."""
    from ledger_cli.engine import gojson

    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(gojson.encode_string(str(k)) + ":" + dumps(v) for k, v in value.items())
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return gojson.encode_value(value)


_SHOWN_ERRORS = "ledger.fffd"


def _fffd(exc: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # Bytes: the UTF-8 encoder takes a replacement str only when it is ASCII.
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


def show_invalid_text_as_fffd() -> None:
    """Print text holding invalid bytes (lone surrogates: a Go-written key or
    owner read losslessly, or a non-UTF-8 argument) with U+FFFD in their place,
    as Go's encoder shows them, instead of failing on them. Applies to stdout
    and stderr, rich's output included (it writes to them)."""
    import codecs

    codecs.register_error(_SHOWN_ERRORS, _fffd)
    for stream in (sys.stdout, sys.stderr):
        encoding = str(getattr(stream, "encoding", "") or "").lower().replace("-", "")
        reconfigure = getattr(stream, "reconfigure", None)
        if encoding == "utf8" and reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed stream: leave it
                reconfigure(errors=_SHOWN_ERRORS)


def shown(text: str) -> str:
    """Untrusted text (a key, an owner, a message naming them) as it may be
    shown: every character that is not printable (C0 and C1 controls, ESC,
    CR, LF and TAB among them, DEL, bidirectional overrides, other format
    characters) as its escape (`\\x1b`, `\\n`, `\\u202e`), so that it is no
    terminal command and stays on its one line; lone surrogates are left to
    the stream, which shows each as U+FFFD. cli/escapes.py is imported only
    when there is something to escape: the hot commands never import it."""
    if text.isprintable():
        return text
    from ledger_cli.cli.escapes import escaped

    return escaped(text, surrogates=True)


def _on_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError, OSError):  # None, closed: no terminal
        return False


def line(text: str = "") -> None:
    """A result line on stdout (`admitted KEY`, `claim --next`'s `KEY
    FENCE`): on a terminal `shown`, into a pipe or a file as it is, so that a
    script reads the key as stored."""
    if not text.isprintable() and _on_terminal():
        text = shown(text)
    sys.stdout.write(text + "\n")


def human_line(value: str) -> None:
    """A line of human output (`log`, `doctor`): `shown` wherever it goes, so
    that a newline in a key never forges a line."""
    sys.stdout.write(shown(value) + "\n")


def raw(value: str) -> None:
    """Text written as it is: a document in a format that escapes what it
    holds itself (JSON, DOT, SVG, Mermaid), or lines with no untrusted text."""
    sys.stdout.write(value + "\n")


def json_line(value: Any) -> None:
    raw(dumps(value))


def jsonl(values: Iterable[Any]) -> None:
    for value in values:
        raw(dumps(value))


def diag(text: str) -> None:
    """A diagnostic on stderr, one line, `shown` wherever it goes; when
    stderr cannot take it (a full disk, a reader gone), it is dropped: the
    exit code still tells."""
    if sys.stderr is None:  # closed, in an embedding (app.main gives it /dev/null)
        return
    try:
        sys.stderr.write(shown(text) + "\n")
        sys.stderr.flush()
    except OSError:
        devnull_on(2)  # nor does the interpreter's flush at exit fail again


def devnull_on(fd: int, flags: int = os.O_WRONLY) -> None:
    """Put /dev/null on descriptor `fd`."""
    devnull = os.open(os.devnull, flags)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


OUTPUT_FAILED = "ledger: could not write the output to stdout"
COMMITTED = " (the command's write was committed)"
_committed: list[bool] = []


def note_committed() -> None:
    """A write of this command is committed: an OutputError says so."""
    if not _committed:
        _committed.append(True)


class ReaderGone(BaseException):
    """Stdout's reader went away (`ledger list | head`): `_Stdout` raises it
    in place of BrokenPipeError, so that no `except OSError` on the way up
    (typer's, which exits 1; rich's, which exits 1; a command's) makes it
    another exit code. Like KeyboardInterrupt it is no `Exception`: it passes
    every handler up to app.main, which exits 141, quietly (docs/design.md §4.4)."""


class _Stdout(io.FileIO):
    """Descriptor 1 under `sys.stdout` (`guard_streams`): a write that fails
    raises OutputError, which the top level reports (exit 74), so a full disk
    or a closed stdout is told from a bug's OSError (exit 70); a reader gone
    raises ReaderGone (exit 141). A write writes all of `b` or fails: the
    text layer above an unbuffered stdout (PYTHONUNBUFFERED, `python -u`)
    ignores a short count, and would drop the rest."""

    closed_at_start = False

    def write(self, b: Any, /) -> int:  # Any: typeshed's buffer type is private
        view = memoryview(b).cast("B")
        done = 0
        try:
            while done < len(view):
                n = super().write(view[done:])
                if n is None:  # a non-blocking stdout that is full
                    raise BlockingIOError("stdout would block")
                done += n
        except BrokenPipeError:
            raise ReaderGone from None
        except OSError as exc:
            from ledger_cli.errors import OutputError

            why = "it is closed" if self.closed_at_start else exc.strerror or str(exc)
            raise OutputError(f"{OUTPUT_FAILED}: {why}") from None
        return done


def guard_streams() -> None:
    """Make the standard streams safe to use before a command runs (app.main).

    A descriptor 0, 1 or 2 closed at start-up gets /dev/null, opened so that
    it still fails as a closed one would (stdout: writes fail; stdin: reads
    fail, and `sys.stdin` stays None for `-` to be refused): else the store's
    first file would take that number, and output meant for stdout, or a
    `run` command's, would land in it. A closed stderr takes what is written
    to it and drops it. Then `sys.stdout` is rebuilt over `_Stdout`, as the
    interpreter built it (buffering, encoding, errors), so that its write
    failures are OutputErrors. An embedding's or a test's stdout is left alone.
    """
    stdout = sys.stdout
    if sys.stdin is None:
        devnull_on(0, os.O_WRONLY)
    if stdout is None:
        devnull_on(1, os.O_RDONLY)
    if sys.stderr is None:
        devnull_on(2)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if stdout is not sys.__stdout__:
        return
    try:
        raw = _Stdout(1, "w", closefd=False)
    except OSError:  # not a descriptor FileIO takes: stdout stays as it is
        return
    raw.name = "<stdout>"
    if stdout is None:
        raw.closed_at_start = True
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="\n")
        return
    unbuffered = isinstance(stdout.buffer, io.RawIOBase)  # python -u, PYTHONUNBUFFERED
    sys.stdout = io.TextIOWrapper(
        raw if unbuffered else io.BufferedWriter(raw),
        encoding=stdout.encoding,
        errors=stdout.errors,
        newline="\n",
        line_buffering=stdout.line_buffering,
        write_through=unbuffered,
    )


def output_failed(exc: LedgerError) -> int:
    """Report an OutputError: its line (saying whether the command's write
    was committed); stdout then goes to /dev/null, so that what is still
    buffered for it, and the interpreter's flush at exit, do not fail again."""
    diag(clip(one_line(str(exc))) + (COMMITTED if _committed else ""))
    devnull_on(1)
    return exc.exit_code


def counted(n: int, noun: str, *, commas: bool = False) -> str:
    """`1 record`, `0 records`, `2 records` (`commas`: `1,000 records`)."""
    number = f"{n:,}" if commas else str(n)
    return f"{number} {noun if n == 1 else noun + 's'}"


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def within(where: str, text: str) -> str:
    """Another message (an error's, on one line) in the context `where`, as
    every error and warning line reads: `ledger: WHERE: …`, the message's own
    `ledger:` prefix once."""
    return f"ledger: {where}: {one_line(text).removeprefix('ledger: ')}"


def at_line(number: int, text: str) -> str:
    """An error about line `number` of a batch: `ledger: line N: …`."""
    return within(f"line {number}", text)


MAX_MESSAGE = 1000
"""Longest error line printed: a hostile input (a 5,000-digit number, a huge key)
is never echoed back in full."""


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text`, its middle elided when longer than `limit` characters."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head - 40
    return f"{text[:head]}…({len(text) - head - tail} characters elided)…{text[-tail:]}"


def error_object(code: str, message: str, exit_code: int) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "exit": exit_code}}


def report(exc: LedgerError, json_mode: bool) -> int:
    """Print an error the docs/design.md §4.5 way; return its exit code."""
    if exc.code == "output":  # stdout failed: nowhere to put a JSON object
        return output_failed(exc)
    message = _prefixed(clip(one_line(exc.explained())) or exc.code)
    # The detail names the key: escaped before the lines are joined, so a
    # newline in it shows as `\\n` on stderr; --json keeps the message as it was.
    diag(_prefixed(clip(one_line(str(exc)) + shown(exc.detail)) or exc.code))
    if json_mode:
        _json_error(error_object(exc.code, message, exc.exit_code))
    return exc.exit_code


def _prefixed(message: str) -> str:
    """A Go library's text (`json: …`) gets the prefix, kept whole."""
    return message if message.startswith("ledger:") else f"ledger: {message}"


def report_unstarted(message: str, exit_code: int, json_mode: bool) -> None:
    """`ledger run`'s command could not be started (126, 127): its line on
    stderr and, with --json, its error object (code `cannot_run`) on stdout."""
    diag(message)
    if json_mode:
        _json_error(error_object("cannot_run", message, exit_code))


def _json_error(obj: dict[str, Any]) -> None:
    """An error object on stdout; when stdout fails too, that is one more line
    on stderr, and the command keeps its own exit code."""
    from ledger_cli.errors import OutputError

    try:
        json_line(obj)
        sys.stdout.flush()
    except OutputError as failed:
        output_failed(failed)


def report_internal(exc: BaseException, json_mode: bool) -> int:
    """An unexpected exception: exit 70, one line; the traceback only with LEDGER_DEBUG=1."""
    if os.environ.get("LEDGER_DEBUG") == "1":
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    detail = clip(one_line(str(exc)))
    message = f"ledger: internal error: {type(exc).__name__}" + (f": {detail}" if detail else "")
    if os.environ.get("LEDGER_DEBUG") != "1":
        message += " (set LEDGER_DEBUG=1 for a traceback)"
    diag(message)
    if json_mode:
        _json_error(error_object("internal", message, INTERNAL_EXIT))
    return INTERNAL_EXIT


def compact_duration(s: int) -> str:
    """Whole seconds as a compact duration: 45s, 4m05s, 2h03m, 3d04h (rich-free:
    `render.duration` and `ledger check` share it)."""
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def written(as_json: bool, key: str, rec: TaskState | None, text: str, **more: Any) -> None:
    """What a write to one record prints: `{"key", "record", **more}` under
    --json, else `text` (`released fetch`)."""
    if as_json:
        json_line({"key": key, "record": record(rec), **more})
    else:
        line(text)


def fence_line(as_json: bool, key: str, fence: int, rec: TaskState | None) -> None:
    """What `claim KEY` and `takeover` print: the fence (a script's `F=$(…)`)."""
    if as_json:
        json_line({"key": key, "fence": fence, "record": record(rec)})
    else:
        line(str(fence))
