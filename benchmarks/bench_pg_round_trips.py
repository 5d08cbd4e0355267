"""Round trips and statements per task of `ledger run --next --drain` on PostgreSQL.

    .venv/bin/python benchmarks/bench_pg_round_trips.py [--tasks N] [--postgres-url URL]

A drain of N tasks and one of 2N (each `-- true`), in process, through a
counting TCP proxy (tests/pg_wire_support.py); the difference divided by N is
the cost of one drained task (claim + run + complete), without the
connection's set-up and the final "nothing ready" scan. Counts, not seconds:
the same on any machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger_cli.cli.commands.run import run  # noqa: E402
from ledger_cli.cli.context import Settings  # noqa: E402
from ledger_cli.engine.instant import Instant  # noqa: E402
from ledger_cli.engine.ledger import Ledger  # noqa: E402
from ledger_cli.stores.sql.postgres import PostgresStore  # noqa: E402
from tests.pg_wire_support import Counts, WireCounter  # noqa: E402

DEFAULT_PG = "postgresql://ledger:ledger@127.0.0.1:5432/ledger_test"


def drain_counts(base_url: str, n: int) -> Counts:
    """The wire counts of one drain of `n` fresh tasks in a fresh schema."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"bench_rt_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_conninfo(base_url, options=f"-c search_path={schema}")
        store = PostgresStore(url)
        led = Ledger(store)
        t0 = Instant.now()
        with store.batch():
            for i in range(n):
                led.admit("bench", f"t{i:05d}", 1, {"i": i}, t0)
        store.close()
        with WireCounter(url) as wire:
            code = run(
                Settings(store=wire.conninfo), None, "w", "1m", ["true"], next_=True, drain=True
            )
            if code != 0:
                raise SystemExit(f"drain exited {code}")
            return wire.snapshot()
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("LEDGER_TEST_POSTGRES_URL") or DEFAULT_PG
    )
    args = parser.parse_args()
    n = args.tasks
    one, two = drain_counts(args.postgres_url, n), drain_counts(args.postgres_url, 2 * n)
    per = two - one
    print(f"drain of {n} tasks: {one.turns} round trips, {one.statements} statements")
    print(f"drain of {2 * n} tasks: {two.turns} round trips, {two.statements} statements")
    print(f"per drained task: {per.turns / n:g} round trips, {per.statements / n:g} statements")


if __name__ == "__main__":
    main()
