"""`ledger admit`: one key, or many from JSON Lines with `--batch`."""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import (
    MAX_INPUT_BYTES,
    MAX_TASK_BYTES,
    InputError,
    parse_json,
    parse_uint,
    validate_key,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import IO, Any

    from ledger_cli.engine.conflict import Outcome
    from ledger_cli.engine.instant import Instant

INT64_MAX = 2**63 - 1
"""Every store holds a sequence up to here (SQLite stops at it: cli/numberlimit.py)."""
CONFLICT = "conflict"  # engine.conflict.CONFLICT, without importing it for every admit

_BATCH_FIELDS = ("key", "seq", "task", "needs", "not_before", "priority", "queue")


def read_source(path: str, what: str, limit: int, advice: str) -> bytes:
    """The bytes of a file argument (`-` is standard input), refused with InputError
    when longer than `limit`: a regular file by its size, unread; anything else
    after reading at most `limit` + 1 bytes, so memory stays bounded."""
    shown = "(standard input)" if path == "-" else path
    try:
        if path == "-":
            if sys.stdin is None:  # closed at start-up (`<&-`)
                raise InputError(f"ledger: cannot read {what} {shown}: it is closed", "bad_file")
            return _read_capped(sys.stdin.buffer, what, shown, limit, advice)
        with open(path, "rb") as fh:
            return _read_capped(fh, what, shown, limit, advice)
    except OSError as exc:
        raise InputError(
            f"ledger: cannot read {what} {shown}: {exc.strerror or exc}", "bad_file"
        ) from None


def _read_capped(fh: IO[bytes], what: str, shown: str, limit: int, advice: str) -> bytes:
    def too_large() -> InputError:
        mib = limit >> 20
        return InputError(f"ledger: {what} {shown} is larger than {mib} MiB; {advice}", "too_large")

    try:
        st: os.stat_result | None = os.fstat(fh.fileno())
    except (OSError, ValueError, AttributeError):  # no descriptor (an in-memory stream)
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise too_large()
    data = fh.read(limit + 1)
    if len(data) > limit:
        raise too_large()
    return data


def admit(
    settings: Settings,
    key: str | None,
    seq: str | None = None,
    needs: list[str] | None = None,
    task: str | None = None,
    task_file: str | None = None,
    batch: str | None = None,
    not_before: str | None = None,
    delay: str | None = None,
    priority: str | None = None,
    queue: str | None = None,
) -> int:
    if batch is not None:
        if key is not None or seq is not None or needs or task is not None or task_file:
            raise InputError(
                "ledger: admit --batch takes no KEY, --seq, --needs, --task or --task-file"
            )
        if not_before is not None or delay is not None or priority is not None or queue:
            raise InputError(
                "ledger: admit --batch takes no --not-before, --delay, --priority or --queue"
                ' (give "not_before", "priority" and "queue" on each line)'
            )
        return admit_batch(settings, batch)
    if key is None:
        raise InputError("ledger: admit needs a KEY (or --batch FILE)")
    validate_key(key)
    seq_n = parse_uint(seq if seq is not None else "1", "--seq")
    if seq_n > INT64_MAX:  # past what an SQLite store holds: a rare path, imported here
        from ledger_cli.cli.numberlimit import refuse_sequence

        refuse_sequence(settings, seq_n, "--seq")
    need_keys = [validate_key(n, "need") for n in needs or ()]
    if task is not None and task_file is not None:
        raise InputError("ledger: give --task or --task-file, not both")
    value: Any = None
    if task is not None:
        value = parse_json(task, "ledger: bad --task JSON", MAX_TASK_BYTES)
    elif task_file is not None:
        raw = read_source(
            task_file, "--task-file", MAX_TASK_BYTES, "that is the limit for a task payload"
        )
        value = parse_json(raw, "ledger: bad --task-file JSON")
    queue_name = "default"
    if queue is not None:
        from ledger_cli.cli.queueargs import validate_name

        queue_name = validate_name(queue)
    when = None
    prio = 0
    if not_before is not None or delay is not None or priority is not None:
        from ledger_cli.cli.when import When, parse_priority

        when = When(not_before, delay)
        prio = parse_priority(priority)
        when.check(settings)  # before the store is opened: a refusal writes nothing
    with Session(settings) as s:
        for attempt in s.writes(s.unit_now()):  # now: once the write lock is held
            with attempt:
                now = attempt.clock(key)
                nb = when.at(now) if when is not None else None
                got = s.ledger.admit_outcome(
                    s.actor,
                    key,
                    seq_n,
                    value,
                    now,
                    *need_keys,
                    not_before=nb,
                    priority=prio,
                    queue=queue_name,
                )
    return _report_one(settings, key, got)


def outcome_object(key: str, got: Outcome) -> dict[str, Any]:
    """An admit's outcome in --json (a batch line's after its `line`)."""
    return {
        "key": key,
        "admitted": got.admitted,
        "outcome": got.word,
        "record": output.record(got.record),
    }


def _report_one(settings: Settings, key: str, got: Outcome) -> int:
    """Print an admit's outcome (docs/design.md §8.4); its exit status: 8 for a conflict."""
    from ledger_cli.errors import ValidationError

    obj = outcome_object(key, got)
    if got.word != CONFLICT:
        if settings.json:
            output.json_line(obj)
        else:
            output.line(got.word)
        return 0
    message = output.clip(output.one_line(got.message(key)))
    output.diag(message)
    if settings.json:
        obj.update(output.error_object("conflict", message, ValidationError.exit_code))
        output.json_line(obj)
    else:
        output.line(got.word)
    return ValidationError.exit_code


def parse_batch_line(number: int, raw: bytes) -> tuple[str, int, Any, tuple[str, ...], Any, str]:
    """One JSON Lines entry: `{"key", "seq"?, "task"?, "needs"?, "not_before"?,
    "priority"?, "queue"?}`; the last items are `(not_before, priority)` or None,
    and the queue."""
    where = f"line {number}"
    obj = parse_json(raw, where, MAX_TASK_BYTES)
    if not isinstance(obj, dict):
        raise InputError(f'{where}: want a JSON object with a "key"', "bad_batch")
    unknown = [k for k in obj if k not in _BATCH_FIELDS]
    if unknown:
        raise InputError(
            f"{where}: unknown field {output.dumps(unknown[0])}"
            " (fields: key, seq, task, needs, not_before, priority, queue)",
            "bad_batch",
        )
    key = obj.get("key")
    if not isinstance(key, str):
        raise InputError(f'{where}: "key" must be a string', "bad_batch")
    seq = obj.get("seq", 1)
    if type(seq) is not int or not 0 <= seq < 2**64:
        raise InputError(f'{where}: "seq" must be a non-negative integer', "bad_batch")
    needs_raw = obj.get("needs")
    if needs_raw is not None and (
        not isinstance(needs_raw, list) or not all(isinstance(n, str) for n in needs_raw)
    ):
        raise InputError(f'{where}: "needs" must be an array of keys', "bad_batch")
    when = None
    if "not_before" in obj or "priority" in obj:
        from ledger_cli.cli.when import batch_members

        when = batch_members(where, obj)
    queue = obj.get("queue", "default")
    if not isinstance(queue, str):
        raise InputError(f'{where}: "queue" must be a string', "bad_batch")
    from ledger_cli.cli.queueargs import validate_name

    try:  # the values, once their types are known
        validate_key(key)
        needs = tuple(validate_key(n, "need") for n in needs_raw or ())
        validate_name(queue)
    except InputError as exc:  # `ledger: line N: …`, the prefix once (output.report)
        raise InputError(f"{where}: {str(exc).removeprefix('ledger: ')}", exc.code) from None
    return key, seq, obj.get("task"), needs, when, queue


def admit_batch(settings: Settings, source: str) -> int:
    from ledger_cli.errors import ValidationError

    data = read_source(
        source, "--batch", MAX_INPUT_BYTES, "split it into several batches of at most that size"
    )
    entries: list[tuple[int, str, int, Any, tuple[str, ...], Any, str]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            entries.append((number, *parse_batch_line(number, raw)))
    for entry in entries:  # before anything is written, as a malformed line is
        if entry[2] > INT64_MAX:
            from ledger_cli.cli.numberlimit import refuse_sequence

            refuse_sequence(settings, entry[2], f'line {entry[0]}: "seq"')
    results: list[dict[str, Any]] = []
    block_lines: list[str] = []  # printed once their block is committed
    refused = 0
    conflicts = 0
    exc_code = ValidationError.exit_code
    progress = _Progress(len(entries), enabled=not settings.json and sys.stderr.isatty())
    with Session(settings) as s, progress:
        fixed = s.unit_now()
        # The open block's now: read by its first admission, once the block's
        # batch holds the write lock, so that the lines follow the commits' order.
        block_now: list[Instant] = []

        def block() -> AbstractContextManager[None]:
            block_now.clear()
            return s.write_clocked(lambda: block_now[0])

        # An admission with needs may block: then (PostgreSQL) each chunk takes
        # the block writers' lock before its first row write (engine/serial.py).
        from ledger_cli.engine.serial import take

        lock_first = any(entry[4] for entry in entries)

        def admit_one(entry: tuple[int, str, int, Any, tuple[str, ...], Any, str]) -> None:
            nonlocal refused, conflicts
            number, key, seq, task, needs, when, queue = entry
            nb, prio = when if when is not None else (None, 0)
            if lock_first:
                take(s.store)  # once per chunk's transaction; a no-op on other stores
            if not block_now:
                block_now.append(fixed if fixed is not None else s.now())
            now = block_now[0]
            try:
                got = s.ledger.admit_outcome(
                    s.actor, key, seq, task, now, *needs, not_before=nb, priority=prio, queue=queue
                )
            except ValidationError as exc:
                refused += 1
                message = output.clip(output.at_line(number, str(exc)))
                progress.note(message)
                results.append(
                    {
                        "line": number,
                        "key": key,
                        "error": output.error_object(exc.code, message, exc.exit_code)["error"],
                    }
                )
            else:
                item = {"line": number, **outcome_object(key, got)}
                if got.word == CONFLICT:
                    conflicts += 1
                    message = output.clip(output.at_line(number, got.message(key)))
                    progress.note(message)
                    item.update(output.error_object("conflict", message, exc_code))
                if settings.json:
                    results.append(item)
                else:
                    block_lines.append(f"{got.word} {key}")
            progress.advance()

        def report_block() -> None:
            for text in block_lines:
                output.line(text)
            block_lines.clear()
            sys.stdout.flush()  # what a reader sees as it streams is durable

        # Committed in short blocks (docs/design.md §5.4 "Short lock holds"): a Go writer
        # sharing the store never waits long. Admission is idempotent, so a
        # re-run after a crash admits what is missing, `duplicate` for the rest.
        from ledger_cli.cli.chunks import chunked, gap_for  # batches only: it imports typing

        # A line is printed only once its block is committed: a kill never
        # leaves an `admitted` line for a key that is not in the store.
        chunked(
            entries,
            block,
            admit_one,
            gap=gap_for(s.store),
            committed=report_block,
        )
    if settings.json:
        output.json_line(results)
    return ValidationError.exit_code if refused or conflicts else 0


class _Progress:
    """A rich progress bar on stderr when it is a terminal; otherwise nothing
    (and rich is not imported)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and total > 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from ledger_cli.cli import render

            self._bar = render.progress_bar()
            self._bar.__enter__()
            self._task = self._bar.add_task("admitting", total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def note(self, message: str) -> None:
        if self._bar is not None:
            # soft_wrap: one line, however narrow the terminal (the terminal wraps it).
            self._bar.console.print(
                output.shown(message), markup=False, highlight=False, soft_wrap=True
            )
        else:
            output.diag(message)
