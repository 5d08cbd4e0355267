"""`ledger stats` (docs/design.md §6.5): counts, ready (the Ready rule of `claim
--next`), expired leases, the oldest ready task's age; `--json`,
`--prometheus` (read back with prometheus_client's own parser) and `-o FILE`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.store import Store
from tests.cli_support import Cli, run_ledger
from tests.stores import KINDS

T0 = "2026-01-02T03:04:05Z"
T90 = "2026-01-02T03:05:35Z"  # T0 + 90 s
LATER = "2026-01-02T05:04:05Z"  # T0 + 2 h


@pytest.fixture(params=sorted(KINDS))
def cli(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cli]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        store: Store = kind.open(location, lambda: Instant.parse(T0))
        try:
            yield Cli(store, monkeypatch)
        finally:
            store.close()


def workload(cli: Cli) -> None:
    """pending a, b (needs a: not ready), c; claimed d (lease 1h); failed f; blocked g."""
    for key in ("a", "c", "d", "f"):
        cli.ok("admit", key)
    cli.ok("admit", "b", "--needs", "a")
    cli.ok("admit", "g", "--needs", "f")
    cli.ok("claim", "d", "--owner", "w", "--lease", "1h")
    fence = cli.ok("claim", "f", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "f", "--owner", "w", "--fence", fence, "--failed")


def test_json_figures(cli: Cli) -> None:
    workload(cli)
    body = cli.ok("stats", "--json", now=T90).json()
    assert body == {
        "counts": {"pending": 3, "claimed": 1, "completed": 0, "failed": 1, "blocked": 1},
        "pruned": 0,
        "ready": 2,  # a and c; b waits for a
        "expired_leases": 0,
        "oldest_ready_age_seconds": 90.0,
        "ready_invalid_keys": 0,
        "paused": False,
        "scheduled": 0,
        "queues": {"default": {"pending": 3, "claimed": 1, "ready": 2, "limit": None, "held": 1}},
    }
    later = cli.ok("stats", "--json", now=LATER).json()
    assert later["expired_leases"] == 1 and later["ready"] == 3  # d's lease ran out
    # The same rule as claim --next: exactly `ready` claims succeed, then exit 7.
    claimed = 0
    while cli("claim", "--next", "--owner", "x", "--lease", "1h", now=LATER).code == 0:
        claimed += 1
    assert claimed == later["ready"]
    empty = cli.ok("stats", "--json", now=LATER).json()
    assert (empty["ready"], empty["oldest_ready_age_seconds"]) == (0, None)


def test_pruned_records_are_counted_apart(cli: Cli) -> None:
    # docs/design.md §6.4: pruned records leave the status counts and show as `pruned`.
    workload(cli)
    fence = cli.ok("claim", "c", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "c", "--owner", "w", "--fence", fence)
    before = cli.ok("stats", "--json", now=LATER).json()
    assert before["counts"]["completed"] == 1 and before["pruned"] == 0
    cli.ok("prune", "--older-than", "1h", now=LATER)  # c; f still blocks g
    after = cli.ok("stats", "--json", now=LATER).json()
    assert after["counts"] == {**before["counts"], "completed": 0}
    assert (after["pruned"], after["ready"]) == (1, before["ready"])


def test_a_pruned_need_still_counts_as_completed(cli: Cli) -> None:
    # A task whose need was completed and then pruned is ready (docs/design.md §6.4:
    # pruned keys keep answering for what they were); the counts leave the
    # pruned need out. Checked against claim --next, as above.
    cli.ok("admit", "n")
    fence = cli.ok("claim", "n", "--owner", "w", "--lease", "1m").stdout.strip()
    cli.ok("complete", "n", "--owner", "w", "--fence", fence)
    cli.ok("prune", "--older-than", "1h", now=LATER)
    cli.ok("admit", "t", "--needs", "n", now=LATER)
    cli.ok("admit", "u", "--needs", "never-admitted", now=LATER)
    body = cli.ok("stats", "--json", now=LATER).json()
    assert body["counts"] == {"pending": 2, "claimed": 0, "completed": 0, "failed": 0, "blocked": 0}
    assert (body["pruned"], body["ready"]) == (1, 1)
    assert cli.ok("claim", "--next", "--owner", "x", "--lease", "1h", now=LATER).stdout
    assert cli("claim", "--next", "--owner", "x", "--lease", "1h", now=LATER).code == 7


def test_prometheus_text_parses(cli: Cli) -> None:
    workload(cli)
    text = cli.ok("stats", "--prometheus", now=T90).stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {
        "ledger_tasks",
        "ledger_pruned_tasks",
        "ledger_ready_tasks",
        "ledger_expired_leases",
        "ledger_oldest_ready_age_seconds",
        "ledger_paused",
        "ledger_scheduled_tasks",
        "ledger_queue_tasks",
        "ledger_queue_ready_tasks",
        "ledger_queue_held_slots",
        "ledger_queue_limit",
    }
    for fam in families.values():
        assert fam.type == "gauge" and fam.documentation
        assert f"# HELP {fam.name} " in text and f"# TYPE {fam.name} gauge" in text
    by_status = {s.labels["status"]: s.value for s in families["ledger_tasks"].samples}
    assert by_status == {"pending": 3, "claimed": 1, "completed": 0, "failed": 1, "blocked": 1}
    assert families["ledger_ready_tasks"].samples[0].value == 2
    assert families["ledger_oldest_ready_age_seconds"].samples[0].value == 90
    assert families["ledger_pruned_tasks"].samples[0].value == 0
    cli.ok("cancel", "a")
    cli.ok("cancel", "c")
    none_ready = cli.ok("stats", "--prometheus", now=T90).stdout
    assert "ledger_ready_tasks 0.0" in none_ready
    assert "ledger_oldest_ready_age_seconds 0.0" in none_ready


def test_human_table_and_output_file(cli: Cli, tmp_path: Path) -> None:
    workload(cli)
    table = cli.ok("stats", now=T90).stdout
    assert "ready" in table and "expired leases" in table and "\x1b[" not in table
    target = tmp_path / "textfile" / "ledger.prom"
    target.parent.mkdir()
    target.write_text("stale\n")
    res = cli.ok("stats", "--prometheus", "-o", str(target), now=T90)
    assert res.stdout == ""
    assert target.read_text() == cli.ok("stats", "--prometheus", now=T90).stdout
    assert sorted(p.name for p in target.parent.iterdir()) == ["ledger.prom"]  # no temp left
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o644 & ~umask
    bad = cli("stats", "-o", str(tmp_path / "missing" / "x.prom"), now=T90)
    assert bad.code == 2 and bad.stderr.startswith("ledger: cannot write ")
    assert len(bad.stderr.splitlines()) == 1


def test_json_stats_never_waits_for_the_store_lock(tmp_path: Path) -> None:
    # A writer holds the JSON store's lock (an open batch, as a long admit
    # --batch would) for as long as `ledger stats` runs: stats reads the
    # records without it, so it answers, with the figures of what is on disk.
    from ledger_cli.stores.jsonfile import JsonFileStore

    root = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(root, "admit", key).returncode == 0
    assert run_ledger(root, "admit", "c", "--needs", "a").returncode == 0
    holder = JsonFileStore(root)
    try:
        with holder.batch():
            holder.load("a")  # the batch holds the lock from its start
            assert holder._lock.held_by  # (held, not merely asked for)
            res = run_ledger(root, "stats", "--json")  # times out (60 s) if it waits
            assert res.returncode == 0, res.stderr
            body = json.loads(res.stdout)
    finally:
        holder.close()
    assert body["counts"]["pending"] == 3 and body["ready"] == 2


@pytest.mark.parametrize("name", ["s", "s.db"], ids=["json", "sqlite"])
def test_oldest_ready_is_the_longest_wait_not_the_next_claim(tmp_path: Path, name: str) -> None:
    """A newer task that `claim --next` would take first (a higher priority)
    never lowers the oldest ready age: it is the age of the task that has
    waited longest. Fresh `ledger` processes."""
    store = tmp_path / name

    def oldest() -> float:
        res = run_ledger(store, "--now", LATER, "--json", "stats")
        assert res.returncode == 0, res.stderr
        return float(json.loads(res.stdout)["oldest_ready_age_seconds"])

    assert run_ledger(store, "--now", T0, "admit", "old").returncode == 0
    assert oldest() == 7200
    assert run_ledger(store, "--now", LATER, "admit", "urgent", "--priority", "10").returncode == 0
    assert oldest() == 7200
    first = run_ledger(store, "--now", LATER, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert first.stdout.split()[0] == "urgent"  # the next claim is still the urgent one
    prom = run_ledger(store, "--now", LATER, "stats", "--prometheus")
    assert "ledger_oldest_ready_age_seconds 7200.0" in prom.stdout


def test_a_queue_name_is_shown_with_its_format_characters_as_escapes(tmp_path: Path) -> None:
    """A queue name may hold a bidirectional override (the key rules,
    docs/design.md §5.2); the human table draws it as its escape (§5.3),
    `--json` as stored."""
    store, name = tmp_path / "store", "q\u202eevil"
    assert run_ledger(store, "admit", "a", "--queue", name).returncode == 0
    res = run_ledger(store, "stats", "--queue", name)
    assert res.returncode == 0, res.stderr
    assert "queue q\\u202eevil " in res.stdout and "\u202e" not in res.stdout
    doc = json.loads(run_ledger(store, "--json", "stats", "--queue", name).stdout)
    assert name in doc["queues"]


def test_per_queue_figures_are_read_only_where_they_are_shown(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The per-queue figures read every task outside `default` (a record each):
    # the text table and `watch` without --queue do not show them, so they
    # must not pay for them (100,000 tasks in a queue made `stats` take 70 s).
    from ledger_cli.cli.commands.watch import view
    from ledger_cli.engine import queues

    cli.ok("admit", "a", "--queue", "q")
    cli.ok("admit", "b")
    calls: list[int] = []
    real = queues.figures

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(queues, "figures", counted)
    for args, shown in [
        (("stats",), False),
        (("stats", "--json"), True),
        (("stats", "--prometheus"), True),
        (("stats", "--queue", "q"), True),
    ]:
        calls.clear()
        out = cli.ok(*args).stdout
        assert len(calls) == int(shown), args
        assert ("queue q" in out or '"q"' in out or 'queue="q"' in out) == shown, out
    calls.clear()
    view(cli.store, Instant.parse(T0), None, "2s")
    assert calls == []
    view(cli.store, Instant.parse(T0), None, "2s", frozenset({"q"}))
    assert calls == [1]
