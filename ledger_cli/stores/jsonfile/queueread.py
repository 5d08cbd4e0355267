"""Reading a key's queue in the JSON store (issue 32): `queue/<key digest>.json`
holds a key's queue when it is not `default`. Kept apart from queuefile.py,
which writes those files and updates the ready index, so the ready index
(readyindex.py) reads them without importing its own writer."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Callable

QUEUE_DIR = "queue"
DEFAULT = "default"
"""engine/queues.py's DEFAULT."""


def decode(data: bytes, shown: str) -> tuple[str, str]:
    try:
        obj = json.loads(data)
        key, queue = obj["key"], obj["queue"]
        if type(key) is not str or type(queue) is not str:
            raise TypeError("queue")
        return key, queue
    except (ValueError, TypeError, KeyError):
        raise fail(shown, "is not a queue file this release can read") from None


def reader(root: str) -> Callable[[str], str]:
    """A key's queue (`default` without a queue file), read from the store at
    `root`: nothing at all on a store that keeps no queue (no queue/
    directory), else one small file per key asked, never a listing (the ready
    index's partitions, readyindex.py). For one operation only: it caches what
    it read."""
    if not os.path.isdir(os.path.join(root, QUEUE_DIR)):
        return lambda key: DEFAULT
    cache: dict[str, str] = {}

    def read(key: str) -> str:
        got = cache.get(key)
        if got is not None:
            return got
        digest = key_digest(key)
        queue = DEFAULT
        if digest is not None:
            path = os.path.join(root, QUEUE_DIR, digest + ".json")
            try:
                with open(path, "rb") as fh:
                    data: bytes | None = fh.read()
            except FileNotFoundError:
                data = None
            except OSError as exc:
                raise fail(path, "cannot read", exc) from None
            if data is not None:
                stored, name = decode(data, path)
                if stored == key:
                    queue = name
        cache[key] = queue
        return queue

    return read
