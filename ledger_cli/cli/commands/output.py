"""`ledger output KEY [--attempt N] [--follow] [--tail LINES]` (docs/design.md §7.2):
the kept output of a key's attempt, byte for byte."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_uint
from ledger_cli.errors import FencedError, LedgerError, NoKeyError

if TYPE_CHECKING:
    from ledger_cli.engine.attempts import Attempt, AttemptLog

FOLLOW_EVERY = 0.2
"""`--follow` reads at most this often (seconds), and only what is new."""
RECORD_EVERY = 1.0
"""`--follow` checks the record this often: a runner that died never ends its attempt."""
ABANDONED_EXIT = FencedError.exit_code
"""`--follow` of an attempt that was abandoned (docs/design.md §7.1): exit 5, the
lease it ran under is lost."""


class NoRunError(LedgerError):
    """KEY has no recorded attempt (or no attempt N): exit 1."""

    code = "no_attempt"
    exit_code = 1


def last_lines(data: bytes, lines: int) -> bytes:
    """The last `lines` lines of `data` (a final line without a newline counts)."""
    if lines == 0:
        return b""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    at = end
    for _ in range(lines):
        at = data.rfind(b"\n", 0, at)
        if at < 0:
            return data
    return data[at + 1 :]


def ended_text(att: Attempt) -> str:
    from ledger_cli.engine.attempts import seconds_text

    if att.abandoned:
        return "was abandoned: no end was recorded and the lease it ran under is over"
    took = att.seconds()
    after = f" after {seconds_text(took)}" if took is not None else ""
    if att.timed_out:
        how = "timed out"
    elif att.signal is not None:
        how = f"was killed by {att.signal}"
    elif att.exit is not None:
        how = f"exited {att.exit}"
    else:
        how = "ended"
    return f"{how}{after}"


def _write(data: bytes) -> None:
    if not data:
        return
    # Through stdout's own layers, whose failures are output.py's (74; a reader gone: 141).
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def none_kept(key: str, att: Attempt) -> str | None:
    """The note for an attempt that kept no output, else None: an empty
    stdout alone would not tell it from a failure to read. With
    `--keep-output 0` the output went straight through, uncounted, so such an
    attempt looks like one whose command wrote nothing: the note names both."""
    if att.kept_bytes or att.output_bytes:
        return None
    wrote = "it wrote none" if att.ended is not None or att.abandoned else "none written yet"
    why = f"{wrote}, or it ran with --keep-output 0"
    return f"ledger: no output was kept for attempt {att.n} of {key} ({why})"


def _pick(log: AttemptLog, key: str, n: int | None) -> int:
    atts = log.list_attempts(key)
    if not atts:
        raise NoRunError(f"ledger: {key} has no recorded run")
    if n is None:
        return atts[-1].n
    if all(a.n != n for a in atts):
        kept = ", ".join(str(a.n) for a in atts)
        raise NoRunError(f"ledger: {key} has no attempt {n} (kept: {kept})")
    return n


def output_cmd(
    settings: Settings,
    key: str,
    attempt: str | None = None,
    follow: bool = False,
    tail: str | None = None,
) -> int:
    n_wanted = parse_attempt(attempt) if attempt is not None else None
    lines = parse_uint(tail, "--tail") if tail is not None else None
    from ledger_cli.engine.attempts import judge, taken_lease
    from ledger_cli.stores.attemptlog import attempt_log

    with Session(settings, reads=True) as s:
        rec = s.load(key)
        if rec is None:
            raise NoKeyError(key=key)
        log = attempt_log(s.store)
        n = _pick(log, key, n_wanted)
        att, data = log.read_new(key, n, 0)
        if att is None:
            raise NoRunError(f"ledger: {key} has no attempt {n}")
        judge((att,), rec, s.now(), taken_lease(s.store, key))
        dropped = att.output_bytes - len(data)
        if follow and not settings.json:
            _write(last_lines(data, lines) if lines is not None else data)
            if dropped > 0:
                output.diag(f"ledger: the first {dropped:,} bytes of attempt {n} were not kept")
            att = _follow(s, log, att)
            if (note := none_kept(key, att)) is not None:
                output.diag(note)
            output.diag(f"ledger: attempt {n} of {key} {ended_text(att)}")
            return ABANDONED_EXIT if att.abandoned else 0
        if follow:  # --json: the object once the attempt ended or was abandoned
            abandoned = _follow(s, log, att, quiet=True).abandoned
            att, data = log.read_new(key, n, 0)
            assert att is not None
            att.abandoned = abandoned and att.ended is None
            dropped = att.output_bytes - len(data)
    shown = last_lines(data, lines) if lines is not None else data
    if settings.json:
        output.json_line(
            {
                "key": key,
                "attempt": att.shown_obj(),
                "output": shown.decode("utf-8", "replace"),
            }
        )
    else:
        _write(shown)
    if dropped > 0:
        output.diag(f"ledger: the first {dropped:,} bytes of attempt {n} were not kept")
    if (note := none_kept(key, att)) is not None:
        output.diag(note)
    if att.abandoned and not settings.json:
        output.diag(f"ledger: attempt {n} of {key} {ended_text(att)}")
    return ABANDONED_EXIT if follow and att.abandoned else 0


def _follow(s: Session, log: AttemptLog, att: Attempt, quiet: bool = False) -> Attempt:
    """Print new output until the attempt ends, or is abandoned (docs/design.md
    §7.1: its runner is gone, so no end will come); returns it as last read,
    judged."""
    from ledger_cli.engine.attempts import is_live, taken_lease

    seen = att.output_bytes
    checked = time.monotonic()
    while att.ended is None and not att.abandoned:
        time.sleep(FOLLOW_EVERY)
        got, new = log.read_new(att.key, att.n, seen)
        if got is None:
            return att  # removed (pruned) meanwhile
        if got.output_bytes > seen:
            if not quiet:
                gap = got.output_bytes - seen - len(new)
                if gap > 0:
                    output.diag(f"ledger: {gap:,} bytes of attempt {att.n} were not kept")
                _write(new)
            seen = got.output_bytes
        att = got
        if att.ended is None and time.monotonic() - checked >= RECORD_EVERY:
            checked = time.monotonic()
            held = taken_lease(s.store, att.key)
            if not is_live(att, s.load(att.key), s.now(), held):
                # Read once more: the end lands before the completion, and may have just.
                again, new = log.read_new(att.key, att.n, seen)
                if again is None:
                    return att
                if not quiet:
                    _write(new)
                att = again
                att.abandoned = att.ended is None
    return att


def parse_attempt(text: str) -> int:
    """`--attempt N`: attempts count from 1, so 0 and -1 are refused alike
    (exit 2, `bad_number`), in the words of every other number's refusal."""
    if not (text.isascii() and text.isdigit()) or not text.strip("0"):
        from ledger_cli.engine.record import go_quote

        raise InputError(
            f"ledger: --attempt must be a positive integer (attempts count from 1), "
            f"got {go_quote(text)}",
            "bad_number",
        )
    return parse_uint(text, "--attempt")
