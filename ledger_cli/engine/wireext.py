"""The schedule extensions in the wire format (docs/design.md §8.1): a record that has a
not-before or a priority carries them as extra members after the 14 Go
fields, `"NotBefore"` (RFC3339Nano) and `"Priority"` (an integer), which Go's
decoder ignores; a record without one is byte-identical to Go's encoding.
A task outside the `default` queue (docs/design.md §8.7; engine/queues.py) carries
`"Queue"` the same way, and a pruned record (docs/design.md §6.4) `"Pruned":true`,
so that a restore puts it back pruned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.wire.encode import encode_snapshot, record_to_json
from ledger_cli.errors import DecodeError

if TYPE_CHECKING:
    from typing import Any

    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.schedule import Schedule


def members(value: Schedule) -> str:
    nb, priority = value
    parts = []
    if not nb.is_zero():
        parts.append(f',"NotBefore":"{nb}"')
    if priority:
        parts.append(f',"Priority":{priority}')
    return "".join(parts)


def record_json(
    rec: TaskState, value: Schedule | None, queue: str | None = None, pruned: bool = False
) -> str:
    text = record_to_json(rec)
    if value is None and queue is None and not pruned:
        return text
    extra = members(value) if value is not None else ""
    if queue is not None:
        import json

        extra += ',"Queue":' + json.dumps(queue)
    if pruned:
        extra += ',"Pruned":true'
    return text[:-1] + extra + "}"


def encode(
    tasks: tuple[TaskState, ...] | None,
    schedules: dict[str, Schedule],
    queues: dict[str, str] | None = None,
    pruned: frozenset[str] = frozenset(),
) -> bytes:
    """`Snapshot(tasks).encode()`, with each scheduled, queued or pruned record's
    extra members."""
    if tasks is None or not (schedules or queues or pruned):
        return encode_snapshot(tasks)
    qs = queues or {}
    body = ",".join(
        record_json(rec, schedules.get(rec.key), qs.get(rec.key), rec.key in pruned)
        for rec in tasks
    )
    return ('{"Tasks":[' + body + "]}").encode("utf-8")


def _entries(data: bytes | str, *members: bytes) -> list[Any]:
    """The `Tasks` entries of a snapshot that `Snapshot.decode` has accepted,
    read only when its text names one of `members` (else none)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not any(b'"' + member + b'"' in raw for member in members):
        return []
    import json

    try:
        doc = json.loads(raw)
    except ValueError:
        return []
    tasks = doc.get("Tasks") if isinstance(doc, dict) else None
    return tasks if isinstance(tasks, list) else []


def decode(data: bytes | str) -> dict[str, Schedule]:
    """The extensions of a snapshot that `Snapshot.decode` has accepted."""
    found: dict[str, Schedule] = {}
    for i, obj in enumerate(_entries(data, b"NotBefore", b"Priority")):
        if not isinstance(obj, dict) or ("NotBefore" not in obj and "Priority" not in obj):
            continue
        nb_raw = obj.get("NotBefore", "")
        priority = obj.get("Priority", 0)
        try:
            nb = Instant.parse(nb_raw) if nb_raw else Instant.ZERO
        except (ValueError, TypeError):
            raise DecodeError(
                f"ledger: decode: snapshot entry {i}: NotBefore is not an RFC 3339 time"
            ) from None
        if type(priority) is not int or not -1000 <= priority <= 1000:
            raise DecodeError(
                f"ledger: decode: snapshot entry {i}: Priority is not an integer from -1000 to 1000"
            )
        if not nb.is_zero() or priority:
            found[str(obj.get("Key", ""))] = (nb, priority)
    return found


def decode_queues(data: bytes | str) -> dict[str, str]:
    """The `"Queue"` members of a snapshot that `Snapshot.decode` has accepted."""
    from ledger_cli.engine.queues import DEFAULT, MAX_NAME_BYTES

    found: dict[str, str] = {}
    for i, obj in enumerate(_entries(data, b"Queue")):
        if not isinstance(obj, dict) or "Queue" not in obj:
            continue
        queue = obj["Queue"]
        if (
            not isinstance(queue, str)
            or not queue
            or len(queue.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
            or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in queue)
            or "," in queue
            or queue != queue.strip()
        ):
            raise DecodeError(
                f"ledger: decode: snapshot entry {i}: Queue is not a queue name (1 to"
                f" {MAX_NAME_BYTES} bytes, no control characters, no comma, no space at its ends)"
            )
        if queue != DEFAULT:
            found[str(obj.get("Key", ""))] = queue
    return found


def decode_pruned(data: bytes | str) -> frozenset[str]:
    """The keys a snapshot that `Snapshot.decode` has accepted marks `"Pruned":true`."""
    found: set[str] = set()
    for i, obj in enumerate(_entries(data, b"Pruned")):
        if not isinstance(obj, dict) or "Pruned" not in obj:
            continue
        mark = obj["Pruned"]
        if not isinstance(mark, bool):
            raise DecodeError(f"ledger: decode: snapshot entry {i}: Pruned is not true or false")
        if mark:
            found.add(str(obj.get("Key", "")))
    return frozenset(found)
