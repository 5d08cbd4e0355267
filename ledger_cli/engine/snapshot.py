"""Snapshot: every record of a ledger, and its Go-compatible wire form (docs/design.md §2.10)."""

from __future__ import annotations

import dataclasses

from ledger_cli.engine.record import TaskState, check_str, go_quote
from ledger_cli.engine.wire.decode import decode_snapshot
from ledger_cli.engine.wire.encode import encode_snapshot
from ledger_cli.errors import RestoreConflictError, ValidationError

__all__ = ["Snapshot"]


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """`tasks` is None (Go's nil: encodes as `null`) or a tuple (`()` encodes as `[]`)."""

    tasks: tuple[TaskState, ...] | None = None

    def __post_init__(self) -> None:
        if self.tasks is not None and not isinstance(self.tasks, tuple):
            object.__setattr__(self, "tasks", tuple(self.tasks))

    def validate(self) -> None:
        """TaskState.validate on each entry in order; the first failure wins."""
        for i, rec in enumerate(self.tasks or ()):
            try:
                rec.validate()
            except ValidationError as exc:
                raise ValidationError(f"ledger: snapshot entry {i}: {exc}") from None

    def check_restorable(self) -> None:
        """What `Ledger.restore` refuses beyond `validate`, before writing
        anything: a key, need, blocker, owner or actor that is not a str or
        not valid Unicode (ValidationError, `ledger: snapshot entry I: …`: a
        store would write it as something `doctor` reports, or fail), and a
        key that appears twice (RestoreConflictError naming both entries, as
        `ledger restore` says it). Not part of `validate`: Go's Decode reads
        a snapshot with a key twice (tests/data/conformance/decode-cases.json,
        "duplicate-record-keys"), and so does `decode`."""
        first: dict[str, int] = {}
        for i, rec in enumerate(self.tasks or ()):
            try:
                _check_names(rec)
            except ValidationError as exc:
                raise ValidationError(f"ledger: snapshot entry {i}: {exc}") from None
            if first.setdefault(rec.key, i) != i:
                raise RestoreConflictError(
                    f"ledger: restore: key {go_quote(rec.key)} appears twice in the snapshot "
                    f"(entries {first[rec.key]} and {i})"
                )

    def encode(self) -> bytes:
        """Validate, then Go's compact JSON (no trailing newline), UTF-8."""
        self.validate()
        return encode_snapshot(self.tasks)

    @classmethod
    def decode(cls, data: bytes | str) -> Snapshot:
        """Go's Decode: unmarshal (DecodeError `ledger: decode: ...`), then validate."""
        snap = cls(decode_snapshot(data))
        snap.validate()
        return snap


def _check_names(rec: TaskState) -> None:
    """Each text field of `rec` a str (`check_str`) of valid Unicode
    (engine/arguments.py, imported only for one beyond ASCII)."""
    named = [
        ("key", rec.key),
        ("owner", rec.owner),
        ("blocked_by", rec.blocked_by),
        ("created_by", rec.created_by),
        ("updated_by", rec.updated_by),
        *(("need", need) for need in rec.needs or ()),
    ]
    for what, value in named:
        if not check_str(value, what).isascii():
            from ledger_cli.engine.arguments import check_text

            check_text(value, what)
