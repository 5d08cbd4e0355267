"""The SQL backends and the helpers only they use (docs/design.md §3.3, §3.4).

`sqlite.py` and `postgres.py` are the stores (`SQLiteStore`, `PostgresStore`:
load, the compare-and-swap writes, pruning, history writes), each assembled
over a connection base from method groups of its own modules:
`*_conn.py` (connecting, pragmas, error mapping, batches, close; PostgreSQL's
pipelined batch is in `postgres_tx.py`), `*_schema.py` (the DDL and the
set-up or migration on open), `*_claim.py` (the Ready path and the pause),
`*_reads.py` (listings, scans and counts) and `*_sidetables.py` (schedules,
ready-index check and rebuild). Each keeps its Ready order in `sqlite_due.py`
/ `postgres_due.py` and its ready-index triggers in `sqlite_readyindex.py` /
`postgres_readyindex.py`. Both share `codec.py` (a record as a row of Go's
`ledger_tasks`), `utf8.py` (text that is not valid UTF-8), `paging.py` (paged
history and listings), `readyindex.py` (the candidate queries both backends
run), and `schedules.py`, `pause.py` and `attempts.py` (our side tables).
"""
