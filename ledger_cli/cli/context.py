"""Global settings and the per-command session: the store, the ledger, the
clock, and the history that every write through the command line leaves.

No typer and no rich here: the hot commands (admit, claim, renew, complete)
import this module and the engine, nothing more.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.inputs import parse_now, validate_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import Any

    from ledger_cli.engine.events import Event, Recorder
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

ENV_STORE = "LEDGER_STORE"
ENV_ACTOR = "LEDGER_ACTOR"
ENV_NOW = "LEDGER_NOW"
SETTINGS_KEY = "ledger.settings"
"""Where the typer app keeps the global settings given on the line (ctx.meta)."""


def env(name: str) -> str | None:
    """An environment setting; empty counts as unset (as click treats envvars)."""
    return os.environ.get(name) or None


class Settings:
    """The global settings every command takes (docs/design.md §4.1).

    `None` means "not given": the store falls back to the default store, the
    actor to user@host, now to the store's clock or the system clock.
    """

    __slots__ = ("actor", "json", "now", "now_from", "store")

    def __init__(
        self,
        store: str | None = None,
        actor: str | None = None,
        now: str | None = None,
        json: bool = False,
        now_from: str = "--now",
    ) -> None:
        self.store, self.actor, self.now, self.json = store, actor, now, json
        self.now_from = now_from
        """Where `now` came from (`--now` or LEDGER_NOW), for its error."""

    def __repr__(self) -> str:
        return (
            f"Settings(store={self.store!r}, actor={self.actor!r}, now={self.now!r}, "
            f"json={self.json!r})"
        )

    @classmethod
    def from_env(cls, **given: Any) -> Settings:
        """Command-line values where given, else LEDGER_* variables."""
        now = given.get("now")
        return cls(
            # An empty --store or LEDGER_STORE is kept (store_url refuses it,
            # exit 2) rather than read as "not given": `LEDGER_STORE=$UNSET_VAR`
            # must not quietly open the default store.
            store=given["store"] if given.get("store") is not None else os.environ.get(ENV_STORE),
            actor=given.get("actor") if given.get("actor") is not None else env(ENV_ACTOR),
            now=now or env(ENV_NOW),
            json=bool(given.get("json")),
            now_from="--now" if now else ENV_NOW,
        )


def default_actor() -> str:
    user = os.environ.get("USER") or os.environ.get("LOGNAME")
    if not user:
        try:
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError):
            user = str(os.getuid())
    return f"{user}@{os.uname().nodename}"


def store_url(settings: Settings) -> str:
    if settings.store is not None:
        return settings.store
    from ledger_cli.stores import default_store_url

    return default_store_url()


class Session:
    """One command's view of the ledger: an open store, a Ledger over it with a
    recording bus, the actor, and the clock. A context manager (closes the store).
    """

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        reads: bool = False,
        existing: bool = False,
    ) -> None:
        """`reads`: the command only reads (or, as `claim --next` without
        `--wait`, can do nothing on an empty store), so a `--store`/LEDGER_STORE
        that does not exist is a NoStoreError rather than a new, empty store:
        a mistyped path is not taken for an empty ledger. `existing`: it writes
        only to what the store holds (a record, a pause): nothing is created
        (stores.open_store)."""
        from ledger_cli.engine.events import Recorder
        from ledger_cli.engine.ledger import Ledger

        self.settings = settings
        self.actor = validate_text(
            settings.actor if settings.actor is not None else default_actor(), "actor"
        )
        self.fixed_now: Instant | None = (
            parse_now(settings.now, settings.now_from) if settings.now else None
        )
        if store is None:
            # A command that only reads never creates the store it was pointed at.
            create = not reads or settings.store is None
            store = open_store(store_url(settings), create, existing and settings.store is not None)
        self.store: Store = store
        self.recorder: Recorder = Recorder()
        from ledger_cli.cli.blockwrites import SessionBlocks

        self.blocks = SessionBlocks(self)
        """Where the long walks commit: in short blocks (cli/blockwrites.py)."""
        # A dispossessed runner may still run until its lease ends: `--next` waits
        # that out (docs/design.md §2.2, §8.1).
        self.ledger: Ledger = Ledger(
            self.store, self.recorder, self.blocks, hold_leases=True, behind_completed=True
        )
        self._depth = 0  # write units open
        self._after: list[Callable[[], object]] = []

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def now(self) -> Instant:
        """--now when given; else the store's clock when it has one (PostgreSQL:
        every host judges leases by one clock); else the system clock."""
        if self.fixed_now is not None:
            return self.fixed_now
        store_now: Callable[[], Instant] | None = getattr(self.store, "now", None)
        if store_now is not None:
            return store_now()
        from ledger_cli.engine.instant import Instant

        return Instant.now()

    def unit_now(self) -> Instant | None:
        """The now for `writes(now)`: --now when given, else None, which leaves
        the clock to each unit: it is read once the unit's batch holds the
        store's write lock (`Attempt`), so that a lease is not granted from a
        time long past when the unit waited for that lock (SQLite's BEGIN
        IMMEDIATE behind another writer), and history lines follow the order
        of their commits."""
        return self.fixed_now

    def write(self, now: Instant) -> AbstractContextManager[None]:
        """One locked unit: the engine calls in the block and their history.

        Runs the block inside `store.batch()`; every event the ledger emitted in
        it (each one a write that landed) becomes a history entry, appended in
        the same batch. When the engine refuses after writing (a Claim refused
        because an ancestor failed first marks the record blocked, as Go's
        does), its writes and their history are committed and the refusal is
        raised after the batch; a store failure discards the batch.
        """
        return self._unit(lambda: now)

    def write_clocked(self, when: Callable[[], Instant]) -> AbstractContextManager[None]:
        """`write()`, its now asked for when its history is appended: a block
        that reads the clock once its batch holds the write lock (`admit
        --batch`: each block its own now, in the order of their commits)."""
        return self._unit(when)

    def unit_open(self) -> bool:
        """Whether a `write()` unit is open (its batch not yet committed)."""
        return self._depth > 0

    def defer(self, fn: Callable[[], object]) -> None:
        """Run `fn` once the open unit has committed (dropped if it rolls back):
        a failed completion's blocking walk, in blocks of its own (blockwrites)."""
        self._after.append(fn)

    @contextlib.contextmanager
    def _unit(self, when: Callable[[], Instant | None]) -> Iterator[None]:
        """`write()`, its now (the history's time) asked for at the end."""
        from ledger_cli.errors import LedgerError, StoreError

        refusal: LedgerError | None = None
        events: list[Event] = []
        self._depth += 1
        try:
            with self.store.batch():
                start = len(self.recorder.events)
                try:
                    yield
                except StoreError:
                    raise  # the batch is rolled back: no history (nor a statement
                    # in PostgreSQL's aborted transaction, which would hide the error)
                except LedgerError as exc:
                    refusal = exc
                events = self.recorder.events[start:]
                if events:
                    now = when()
                    # (a unit that wrote took a now for its writes; failing that, the clock)
                    self._append_history(events, now if now is not None else self.now())
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self._after.clear()  # rolled back: what was to follow it never happened
            raise
        self._depth -= 1
        if events:
            output.note_committed()  # for the line a failed stdout gets (exit 74)
        if self._depth == 0 and self._after:
            self._run_after(when())
        if refusal is not None:
            raise refusal

    def _run_after(self, now: Instant | None) -> None:
        """The walks deferred to the unit's commit, each in its own blocks."""
        from ledger_cli.errors import StoreConflictError, StoreError

        todo, self._after = self._after, []
        saved = self.blocks.now
        self.blocks.now = now if now is not None else saved  # the history's time
        try:
            for fn in todo:
                fn()
        except StoreConflictError as exc:
            # Not the committed unit's conflict: `writes` must not run it again.
            raise StoreError(str(exc)) from None
        finally:
            self.blocks.now = saved

    def writes(self, now: Instant | None, hook: str | None = None) -> Iterator[Attempt]:
        """`write(now)` units, one after another until one is not rolled back:

            for attempt in s.writes(s.unit_now()):
                with attempt:
                    fence = s.ledger.claim(..., attempt.now)

        With now None (`unit_now`), each unit takes its own inside its batch,
        once the store's write lock is held: at its start, or, when the store
        has `hook`, a way to read its clock together with the unit's first
        statement (PostgreSQL: `now_with`, `ready_at_clock`, which saves the
        clock its own round trip), when the unit asks for it:

            for attempt in s.writes(s.unit_now(), "now_with"):
                with attempt:
                    s.ledger.complete(..., attempt.clock(key))

        A unit the store rolled back to break a deadlock between two writers
        (PostgreSQL: nothing of it was written) is run again after a short
        random pause, its events dropped; the last attempt's error propagates
        (engine/rerun.py). The body must not `return` or `break` out of the
        loop: a failed commit is known only after the body has left.
        """
        number = 0
        while True:
            attempt = Attempt(self, now, number, hook)
            yield attempt
            if not attempt.again:
                return
            from ledger_cli.engine.rerun import pause

            time.sleep(pause(number))
            number += 1

    def _append_history(self, events: list[Event], now: Instant) -> None:
        from ledger_cli.engine.history import HistoryEntry

        append = getattr(self.store, "append_history", None)
        if append is None:
            return
        fences: dict[str, int] = {}
        for event in events:
            if event.key not in fences:
                rec = self.store.load(event.key)
                fences[event.key] = rec.fence if rec is not None else 0
        when = str(now)
        append(
            [
                HistoryEntry(
                    time=when,
                    actor=self.actor,
                    event=event.name,
                    key=event.key,
                    fence=fences[event.key],
                    data=event.data,
                )
                for event in events
            ]
        )

    def load(self, key: str) -> TaskState | None:
        return self.store.load(key)


class Attempt:
    """One run of a `Session.writes` unit: a context manager around `write()`
    that swallows a StoreConflictError and asks for another run, unless it was
    the last (`rerun.ATTEMPTS`).

    `now`: the unit's now (its writes' and its history's time). When `writes`
    was given None, each run reads the clock in its own batch: at its start,
    once the store's write lock is held; or, when the store has `hook`, None
    until the unit takes it from the store (`clock`, or `attempt.now = ...`).
    """

    __slots__ = ("again", "hook", "now", "number", "session", "start", "unit")

    def __init__(
        self, session: Session, now: Instant | None, number: int, hook: str | None = None
    ) -> None:
        self.session = session
        self.now = now
        self.number = number
        self.hook = hook
        self.again = False
        self.start = 0
        self.unit: AbstractContextManager[None] | None = None

    def __enter__(self) -> None:
        self.start = len(self.session.recorder.events)
        self.unit = self.session._unit(lambda: self.now)
        self.unit.__enter__()
        if self.now is not None or (
            self.hook is not None and getattr(self.session.store, self.hook, None) is not None
        ):
            return
        try:
            self.now = self.session.now()  # the write lock is held (docs/design.md §3)
        except BaseException as exc:
            self.unit.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def clock(self, key: str) -> Instant:
        """The unit's now: the one `writes` was given; else the store's clock,
        read in this batch with the load of `key` (`now_with`: one round trip
        for both; the engine's next `load(key)` then costs none)."""
        if self.now is None:
            now_with: Callable[[str], Instant] | None = getattr(
                self.session.store, "now_with", None
            )
            self.now = now_with(key) if now_with is not None else self.session.now()
        return self.now

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        from ledger_cli.errors import StoreConflictError

        assert self.unit is not None
        try:
            if self.unit.__exit__(kind, exc, tb):
                return True
        except StoreConflictError as raised:  # at the commit
            if not self._again():
                raise
            raised.__traceback__ = None
            return True
        return isinstance(exc, StoreConflictError) and self._again()

    def _again(self) -> bool:
        from ledger_cli.engine.rerun import ATTEMPTS

        del self.session.recorder.events[self.start :]  # their writes were rolled back
        self.again = self.number + 1 < ATTEMPTS
        return self.again


def open_store(url: str, create: bool = True, existing: bool = False) -> Store:
    """The store behind a URL (a seam tests may replace)."""
    from ledger_cli.stores import open_store as resolve

    return resolve(url, create, existing)
