"""The exception classes of the ledger.

`str(err)` is the exact Go message; every class carries a stable `code`
(for `--json` error objects) and the command line's exit code (docs/design.md §4.4).
What a caller needs beyond that sentinel (the key, the state of the record
that refused the call) is the optional `detail`, which the command line
prints after it (`explained()`); the recorded Go traces compare `str(err)`,
which never includes it.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Root of every error the ledger raises on purpose."""

    code: str = "ledger_error"
    exit_code: int = 70
    message: str = ""
    detail: str = ""
    """Text to print right after the sentinel: `: KEY` or ` (KEY is completed)`."""

    def __init_subclass__(
        cls, *, code: str = "", exit_code: int = 0, message: str = "", **kwargs: object
    ) -> None:
        """A class names its code, exit code and sentinel message in its
        header (`class FencedError(LedgerError, code="fenced", ...)`); what it
        does not name it keeps from its parent."""
        super().__init_subclass__(**kwargs)
        cls.code = code or cls.code
        cls.exit_code = exit_code or cls.exit_code
        cls.message = message or cls.message

    def __init__(self, message: str | None = None, *, detail: str = "") -> None:
        super().__init__(message if message is not None else self.message)
        if detail:
            self.detail = detail

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.message

    def explained(self) -> str:
        """The sentinel, then what the caller needs: the line the CLI prints."""
        return f"{self}{self.detail}"


def state_detail(key: str, status: str, blocked_by: str = "", owner: str = "") -> str:
    """` (KEY is STATUS)`: the state of the record that refused a call, with
    its blocker when blocked and its owner when claimed."""
    if status == "blocked" and blocked_by:
        return f" ({key} is blocked by {blocked_by})"
    if status == "claimed" and owner:
        return f" ({key} is claimed by {owner})"
    return f" ({key} is {status})"


# The sentinels of the Go package: str(err) is Go's message, to the letter.
class LeaseActiveError(
    LedgerError, code="lease_active", exit_code=4, message="ledger: lease is still active"
):
    """A claim of a record whose lease has not run out."""


class FencedError(LedgerError, code="fenced", exit_code=5, message="ledger: fence token is stale"):
    """A renew, release or completion with a fence other than the holder's."""


class NotStaleError(
    LedgerError, code="not_stale", exit_code=4, message="ledger: lease is not stale"
):
    """A takeover of a lease that has not run out."""


class NotClaimedError(
    LedgerError, code="not_claimed", exit_code=6, message="ledger: record is not claimed"
):
    """A renew, release or completion of a record nobody holds."""


class NoKeyError(LedgerError, code="no_key", exit_code=3, message="ledger: key has no record"):
    """A call naming a key the store has no record of."""

    def __init__(self, message: str | None = None, *, key: str | None = None) -> None:
        """`key`: the key that has no record, printed after the sentinel."""
        super().__init__(message, detail=f": {key}" if key is not None else "")


class UnknownStatusError(
    LedgerError,
    code="unknown_status",
    exit_code=2,
    message="ledger: status must be StatusCompleted or StatusFailed",
):
    """A status other than completed or failed where only those are allowed
    (a completion, `prune --status`)."""


class EmptyOwnerError(
    LedgerError, code="empty_owner", exit_code=2, message="ledger: owner must not be empty"
):
    """A claim, renew, release, takeover or completion without an owner."""


class InvalidMaxEntriesError(
    LedgerError,
    code="invalid_max_entries",
    exit_code=2,
    message="ledger: MaxEntries must not be negative",
):
    """A ledger opened with a negative history bound."""


class InvalidLeaseError(
    LedgerError, code="invalid_lease", exit_code=2, message="ledger: lease must be positive"
):
    """A claim, renew or takeover with a lease of zero or less."""


class ValidationError(LedgerError, code="validation", exit_code=8):
    """A record (or an admit) that TaskState.validate rejects."""


class CycleError(ValidationError, code="cycle"):
    """An admit whose needs would close a cycle of needs (exit 8; nothing is
    written). An extension beyond the Go package (docs/design.md §2.2; engine/cycles.py)."""

    def __init__(self, message: str, *, cycle: list[str]) -> None:
        super().__init__(message)
        self.cycle = cycle
        """The keys round the cycle, the first one again at the end."""


class DecodeError(LedgerError, code="decode", exit_code=8):
    """Snapshot.decode could not parse its input (`ledger: decode: ...`)."""


class RestoreConflictError(LedgerError, code="restore_conflict", exit_code=8):
    """`restore`: a key of the snapshot holds another record in the store, or
    appears twice in the snapshot (checked before anything is written; a long
    restore says what landed)."""


class EncodeError(LedgerError, code="encode", exit_code=8):
    """A value Go's encoding/json cannot marshal (NaN, infinity, odd types)."""


class StoreError(LedgerError, code="store", exit_code=9):
    """A backend's own failure: I/O, corruption, lock timeout, lost connection."""


class StoreDamageError(StoreError):
    """A file of the store whose content is damaged (not an I/O error, not an
    outage): waiting does not mend it, so a caller that rides out outages
    (`ledger run`'s completion) stops trying. The message names the file;
    `ledger doctor` reports it. Exit 9, like every store failure."""


class StoreConflictError(StoreError):
    """The store rolled a transaction back to break a deadlock between two
    writers (PostgreSQL): nothing of it was written, and running it again is
    safe. `ledger` and `Ledger` run it again themselves (engine/rerun.py); it
    reaches a caller after the last attempt, or from inside a batch that the
    caller opened (then the whole batch is gone: run it again). Exit 9, like
    every store failure."""


class StoreUnavailableError(StoreError):
    """The store could not be reached for a while: a lost or refused
    connection (PostgreSQL: a restart, a network cut), or SQLite's write lock
    held by another process past the busy timeout. An outage, not a verdict:
    the same call may succeed once the store is back (a PostgresStore then
    opens a new connection by itself). A write that failed so may or may not
    have landed (a COMMIT whose connection dropped): read it back to know.
    Exit 9, like every store failure; `ledger run` and `claim --next --wait`
    ride such outages out (cli/outage.py)."""


class StoreLoginError(StoreError, code="store_login"):
    """The PostgreSQL server answered and refused the login: a wrong password,
    an unknown role or database, no pg_hba.conf entry, no CONNECT privilege.
    A verdict, not an outage: trying again changes nothing, so `claim --wait`,
    `run --drain` and `--give-up-after` do not wait it out. Exit 9, like every
    store failure; the message names the server's reason, never the password."""


class NoStoreError(StoreError, code="no_store"):
    """A command that only reads (or `claim --next`/`run --next` without
    `--wait`, which find nothing to claim there) was pointed (by `--store` or
    LEDGER_STORE) at a JSON directory or SQLite file that does not exist: exit 9, and nothing is
    created, so a mistyped path is not mistaken for an empty ledger. The first
    write creates a store; the default store is the exception (a new user's
    `ledger list` is an empty list)."""


class StoreURLError(LedgerError, code="store_url", exit_code=2):
    """A store URL that names no store: empty (`--store ''`, an empty
    LEDGER_STORE), an unknown scheme, a NUL byte, a scheme with no path, a
    path holding the other kind of store (a JSON store's directory as
    `sqlite:`, an SQLite file as a JSON store: stores/otherkind.py).
    A usage error (exit 2): nothing was opened."""


SENTINELS: tuple[type[LedgerError], ...] = (
    LeaseActiveError,
    FencedError,
    NotStaleError,
    NotClaimedError,
    NoKeyError,
    UnknownStatusError,
    EmptyOwnerError,
    InvalidMaxEntriesError,
    InvalidLeaseError,
)


class NotFailedError(
    LedgerError, code="not_failed", exit_code=6, message="ledger: record is not failed"
):
    """`retry` of a record that is not failed (exit 6, as NotClaimedError).

    An extension beyond the Go package (docs/design.md §6.2).
    """


class AlreadyFinishedError(
    LedgerError, code="finished", exit_code=6, message="ledger: record is already finished"
):
    """`cancel` of a record that is already completed or failed (exit 6).

    An extension beyond the Go package (docs/design.md §6.3).
    """


class OutputError(LedgerError, code="output", exit_code=74):
    """The command's output could not be written to stdout: closed, a full
    disk, an I/O error (a reader that went away is the quiet 141 instead).
    Exit 74, sysexits' EX_IOERR; what the command wrote to the store is
    committed all the same, and the message says so (cli/output.py)."""
