"""The SQL backends and the helpers only they use (docs/design.md §3.3, §3.4).

One SQL store over two dialects: `sqlite.py` and `postgres.py` are the
stores (`SQLiteStore`, `PostgresStore`: load, the compare-and-swap writes,
history writes) and each supplies its dialect (`dialect.py`: placeholder,
key order, fetching rows, which text the database holds) to the method
groups written once: `claims.py` (the Ready path, the ready figures and the
pause), `reads.py` (listings, scans and counts) and `sidetables.py`
(schedules, queues and limits, pruning, ready-index check and rebuild);
`dialect.py` also holds what the connections share (`batch()` around each
dialect's transaction, `close()`). What truly differs stays per database:
the store modules (PostgreSQL's clock hooks, its pause read with the claim;
each one's named-queue scan), `*_conn.py` (connecting, pragmas, error
mapping, the transaction and its savepoints; PostgreSQL's pipelined
transaction is in `postgres_tx.py`, its refused logins told from outages in
`postgres_login.py`, a URL's settings libpq would refuse in
`postgres_url.py`), `*_schema.py` (the DDL, the ready index's and the
Ready order's triggers included, and the set-up or migration on open). Both
share `codec.py` (a record as a row of Go's `ledger_tasks`), `utf8.py` (text
that is not valid UTF-8), `paging.py` (paged history and listings),
`readyindex.py` and `due.py` (the candidate queries and the Ready order's
walk, their rebuild and checks), `schedules.py`, `queues.py`, `pause.py` and
`attempts.py` (the SQL of our side tables), all written over `ddl.py` (each
dialect's column types and the expressions the index's shared statements
take).
"""
