"""A key's queue in the JSON store (engine/queues.py):
`queue/<key digest>.json` (`{"key", "queue"}`, keyfiles.py) when it is not
`default`. Kept apart from queuefile.py, which writes those files and updates
the ready index, so the ready index (readyindex.py) reads them without
importing its own writer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile.keyfiles import KeyFiles

if TYPE_CHECKING:
    from collections.abc import Callable

QUEUE_DIR = "queue"
DEFAULT = "default"
"""engine/queues.py's DEFAULT."""


REMEDY = "repair or remove it (without it the task is in the default queue)"


def _decode(obj: dict[str, object]) -> tuple[str, str]:
    queue = obj["queue"]
    if type(queue) is not str:
        raise TypeError("queue")
    return obj["key"], queue  # type: ignore[return-value]  # KeyFiles checks the key


def files(root: str) -> KeyFiles[str]:
    return KeyFiles(root, QUEUE_DIR, _decode, REMEDY)


def reader(root: str) -> Callable[[str], str]:
    """A key's queue (`default` without a queue file), for one operation
    (KeyFiles.reader)."""
    return files(root).reader(DEFAULT)
