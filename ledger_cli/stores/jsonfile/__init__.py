"""JsonFileStore: the durable, concurrent, embedded default store (docs/design.md §3.2).

Layout of a store directory (mode 0700; every file 0600):

    ledger-store.json     format marker and version, the fence floor  (layout.py)
    ledger.lock           the filelock lock file; never deleted        (locking.py,
    waiters/              the FIFO queue in front of the lock           fairlock.py)
    records/ab/<sha256 of the UTF-8 key>.json
                          one file per key: the wire record object with a
                          checksum member last                          (records.py)
    live/                 the index of pending and claimed records      (liveindex.py,
                          (doctor's check and repair: liveview.py)       liveview.py)
    ready/                the ready index of `claim --next`: default's  (readyindex.py,
                          queue, and each other's in ready/q/<hex>/,     readyview.py,
                          each a manifest and sorted chunks; ready/'s    chunkindex.py,
                          manifest lists the other partitions            readyrebuild.py)
    deps/                 every record by the needs it names: the       (depsindex.py,
                          dependents walk of retry/cancel/failures,      depsview.py)
                          and the ready/ promotion when a need completes
    tally/                the counts of `stats` and `watch`, and the    (tally.py,
                          unfinished records they judge one by one       tallyview.py)
    pruned/               pruned records, many keys a file, and what    (prunedfile.py,
                          each file holds (count)                        prunedcount.py,
                                                                         pruning.py)
    attempts/ab/<digest>/ each run attempt of a key, its output after   (attemptfiles.py,
                          its header                                     attempts.py,
                                                                         attemptdamage.py)
    queue/, schedule/     a key's queue and its schedule, a small file  (queuefile.py,
                          a key that has one: <digest>.json; one lost,   schedulefile.py,
                          the ready index's entry of its task tells      sidelost.py)
    paused.json, limits.json   the pause and the queues' limits          (pausefile.py,
    revoked.json          the revoked leases still holding a slot       queuefile.py)
    history.jsonl         the history of writes, one JSON object a line (historyfile.py,
                          rewritten by `prune` without pruned keys       historyrewrite.py)
    history.started       the history is kept: its first line's sum     (historymark.py)
    wal.log, wal.applied  the frames of the small writes since the last (wal.py,
                          checkpoint (their commit point), and how far   walcheck.py)
                          this boot has applied them
    journal.json          only while a large batch commits (or after a  (journal.py)
                          crash in it)

The derived indexes (ready/, deps/, tally/) are kept, read, checked by
`ledger doctor` and rebuilt as derived.py says; each index's module declares
what it derives from a record. How writes reach the disk durably is
apply.py (a large batch: one syncfs or an fsync per file, durability.py;
its record files made before the lock, spares.py); the writes of an open
batch wait in locking.py, and commit.py hands a commit's writes to apply.py
and finishes those a crash interrupted (the journal, then wal.log, wal.py);
reading.py reads records; store.py is the public face tying the parts
together, with repairs.py the methods only `ledger doctor` calls. fsutil.py
holds the durable, symlink-safe file primitives every part uses (swap.py
puts an unsynced file in place without ext4's writeback); the attempts
(docs/design.md §7.1) are attempts.py over attemptfiles.py (their files under `attempts/`),
schedules and the pause schedulefile.py and pausefile.py.

The store refuses, never resets: a record file that is not valid UTF-8, not
a JSON record, fails validation or sits under the wrong name, a history line
that is corrupt (except a torn last line, the trace of a crash, which is
ignored), a journal that does not parse, or an unknown format version raise
StoreError naming the file, and nothing is overwritten.
"""

from __future__ import annotations

from ledger_cli.stores.jsonfile.apply import SYNC_EACH_MAX
from ledger_cli.stores.jsonfile.layout import FORMAT, FORMAT_VERSION
from ledger_cli.stores.jsonfile.records import decode_record_file, key_digest
from ledger_cli.stores.jsonfile.store import JsonFileStore

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "SYNC_EACH_MAX",
    "JsonFileStore",
    "decode_record_file",
    "key_digest",
]
