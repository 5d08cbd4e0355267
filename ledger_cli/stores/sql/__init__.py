"""The SQL backends and the helpers only they use (SPEC §3.3, §3.4).

`sqlite.py` and `postgres.py` are the stores; each keeps its Ready order in
`sqlite_due.py` / `postgres_due.py`, and PostgreSQL its pipelined batch in
`postgres_tx.py`. Both share `codec.py` (a record as a row of Go's
`ledger_tasks`), `readyindex.py` (the trigger-kept claimable-work tables),
`schedules.py`, `pause.py` and `attempts.py` (our side tables).
"""
