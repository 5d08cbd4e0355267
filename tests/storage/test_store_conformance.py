"""One conformance suite for every store (docs/design.md §3.5), over the kinds of tests/stores.py.

The CAS contract (insert-if-absent, the (sequence, status, fence, rev)
compare, rev bumps), range order and consistency, reopen persistence,
history, batch() semantics, hostile keys, no lost update under concurrent
writers, and the replay of every unbounded recorded trace. A meta-test fails
when a URL scheme of open_store has no entry in KINDS.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.engine.store import Store
from ledger_cli.errors import StoreError, StoreURLError
from ledger_cli.stores import SCHEMES, open_store, scheme_of
from tests.conformance import load_trace, replay, trace_names
from tests.stores import KINDS, StoreKind

T0 = Instant.parse("2024-01-01T00:00:00Z")
BOUNDED_SCENARIOS = {"scenario-0011", "scenario-0012", "scenario-0013", "scenario-0014"}
UNBOUNDED = [n for n in trace_names() if not n.startswith("evict-") and n not in BOUNDED_SCENARIOS]


def _clock() -> Instant:
    return T0


class Place:
    """A fresh location of one store kind; `open()` opens (or reopens) a store there."""

    def __init__(self, kind: StoreKind, location: str) -> None:
        self.kind = kind
        self.location = location
        self.opened: list[Store] = []

    def open(self) -> Store:
        store = self.kind.open(self.location, _clock)
        self.opened.append(store)
        return store

    def reopen(self, store: Store) -> Store:
        if not self.kind.durable:
            return store
        store.close()
        return self.open()


@pytest.fixture(params=sorted(KINDS))
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        p = Place(kind, location)
        try:
            yield p
        finally:
            for store in p.opened:
                store.close()


@pytest.fixture
def store(place: Place) -> Store:
    return place.open()


def rec(key: str, status: str = "pending", **fields: Any) -> TaskState:
    base: dict[str, Any] = {
        "key": key,
        "status": status,
        "sequence": 1,
        "created_by": "tester",
        "created_at": T0,
        "updated_by": "tester",
        "updated_at": T0,
    }
    if status == "claimed":
        base.update(owner="w1", lease_until=T0 + timedelta(minutes=5))
    if status == "blocked":
        base.update(blocked_by="root")
    base.update(fields)
    return TaskState(**base)


def same(a: TaskState | None, b: TaskState | None) -> bool:
    """Equal as the wire shows them (a store may hand back lists as tuples etc.)."""
    from ledger_cli.engine.wire.encode import record_to_json

    if a is None or b is None:
        return a is b
    return record_to_json(a) == record_to_json(b)


# -- the meta-test ------------------------------------------------------------------------


def test_every_open_store_scheme_is_under_the_suite(tmp_path: Path) -> None:
    missing = [scheme for scheme in SCHEMES if scheme not in KINDS]
    assert not missing, f"open_store schemes without a conformance entry: {missing}"
    for name, kind in KINDS.items():
        assert kind.scheme == name
        assert name in SCHEMES, f"KINDS entry {name!r} is not an open_store scheme"


def test_each_kind_url_resolves_to_its_store(place: Place) -> None:
    url = place.kind.url(place.location)
    assert scheme_of(url) == place.kind.scheme
    direct = place.open()
    resolved = open_store(url)
    try:
        assert type(resolved) is type(direct)
        if place.kind.durable:
            assert direct.compare_and_swap("via-direct", None, rec("via-direct"))
            got = resolved.load("via-direct")
            assert got is not None and got.key == "via-direct"
    finally:
        resolved.close()


# -- compare-and-swap ---------------------------------------------------------------------


def test_insert_if_absent(store: Store) -> None:
    first = rec("k", task={"n": 1})
    assert store.compare_and_swap("k", None, first)
    assert same(store.load("k"), first)
    assert not store.compare_and_swap("k", None, rec("k", sequence=2))
    assert same(store.load("k"), first)


def test_insert_stores_rev_zero_and_updates_bump_it(store: Store) -> None:
    assert store.compare_and_swap("k", None, rec("k", rev=7))
    cur = store.load("k")
    assert cur is not None and cur.rev == 0
    for expected in (1, 2, 3):
        nxt = cur.replace(updated_by=f"u{expected}", rev=99)
        assert store.compare_and_swap("k", cur, nxt)
        cur = store.load("k")
        assert cur is not None
        assert cur.rev == expected
        assert cur.updated_by == f"u{expected}"


@pytest.mark.parametrize(
    ("field", "value"),
    [("sequence", 2), ("status", "claimed"), ("fence", 1), ("rev", 1)],
)
def test_a_differing_compare_field_fails(store: Store, field: str, value: Any) -> None:
    stored = rec("k")
    assert store.compare_and_swap("k", None, stored)
    cur = store.load("k")
    assert cur is not None
    stale = cur.replace(**{field: value})
    if field == "status":
        stale = stale.replace(owner="w1", lease_until=T0 + timedelta(minutes=1))
    assert not store.compare_and_swap("k", stale, cur.replace(updated_by="lost"))
    after = store.load("k")
    assert after is not None and after.updated_by == "tester" and after.rev == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"task": "something else"},
        {"owner": "someone"},
        {"lease_until": T0 + timedelta(hours=1)},
        {"needs": ("x",)},
        {"updated_by": "other", "updated_at": T0 + timedelta(seconds=3)},
        {"created_by": "other"},
    ],
    ids=lambda c: "+".join(c),
)
def test_fields_outside_the_compare_tuple_do_not_matter(
    store: Store, changes: dict[str, Any]
) -> None:
    assert store.compare_and_swap("k", None, rec("k"))
    cur = store.load("k")
    assert cur is not None
    assert store.compare_and_swap("k", cur.replace(**changes), cur.replace(updated_by="won"))
    after = store.load("k")
    assert after is not None and after.updated_by == "won" and after.rev == 1


def test_an_old_record_against_a_missing_key_fails(store: Store) -> None:
    assert not store.compare_and_swap("ghost", rec("ghost"), rec("ghost", sequence=2))
    assert store.load("ghost") is None
    assert list(store.range()) == []


def test_records_round_trip_every_field(store: Store) -> None:
    full = rec(
        "full",
        "claimed",
        sequence=3,
        fence=4,
        needs=("a", "b"),
        task={"cmd": ["echo", "hi"], "n": 1.5, "nested": {"ok": True, "none": None}},
        created_at=Instant.parse("2023-05-06T07:08:09.123456789+02:00"),
        updated_at=Instant.parse("2024-01-01T00:00:00.5Z"),
    )
    assert store.compare_and_swap("full", None, full)
    assert same(store.load("full"), full)
    empty_needs = rec("empty-needs", needs=())
    assert store.compare_and_swap("empty-needs", None, empty_needs)
    got = store.load("empty-needs")
    assert got is not None and got.needs == ()
    no_needs = store.load("full")
    assert no_needs is not None and no_needs.needs == ("a", "b")


def _absent_or_refused(store: Store, key: str) -> None:
    with contextlib.suppress(StoreError):
        assert store.load(key) is None


HOSTILE_KEYS = [
    "../x",
    "../../etc/passwd",
    "a/b",
    "/abs",
    ".",
    "..",
    "a\x00b",
    "\x00",
    "k" * 1024,
    "é" * 512,
    "日本語/キー",
    "\U0001f600 emoji",
    "line\nbreak",
    "back\\slash",
    "A",
    "a",
]


def test_hostile_keys_round_trip_without_colliding(store: Store, place: Place) -> None:
    stored: list[str] = []
    for i, key in enumerate(HOSTILE_KEYS):
        try:
            ok = store.compare_and_swap(key, None, rec(key, sequence=i + 1))
        except StoreError:
            _absent_or_refused(store, key)  # a store may refuse a key it cannot hold
            continue
        assert ok, key
        stored.append(key)
    assert len(stored) >= len(HOSTILE_KEYS) - 2  # at most NUL keys refused (PostgreSQL)
    for i, key in enumerate(HOSTILE_KEYS):
        if key in stored:
            got = store.load(key)
            assert got is not None and got.key == key and got.sequence == i + 1
    assert [r.key for r in store.range()] == sorted(stored, key=byte_order)


def test_a_lone_surrogate_key_is_stored_or_refused(store: Store) -> None:
    key = "bad\udc80key"
    try:
        ok = store.compare_and_swap(key, None, rec(key))
    except StoreError:
        _absent_or_refused(store, key)
        assert list(store.range()) == []
        return
    assert ok
    assert store.load(key) is not None


# -- range ----------------------------------------------------------------------------------


def test_range_is_sorted_by_utf8_bytes(store: Store) -> None:
    keys = ["b", "a", "\U0001f600", "\uff21", "Z", "é", "a/b", "a b", "10", "9"]
    for key in keys:
        assert store.compare_and_swap(key, None, rec(key))
    assert [r.key for r in store.range()] == sorted(keys, key=lambda k: k.encode("utf-8"))


def test_range_is_a_point_in_time_view(store: Store) -> None:
    for key in ("a", "b", "c"):
        assert store.compare_and_swap(key, None, rec(key))
    view = store.range()
    cur = store.load("b")
    assert cur is not None
    assert store.compare_and_swap("b", cur, cur.replace(updated_by="later"))
    assert store.compare_and_swap("d", None, rec("d"))
    seen = list(view)
    assert [r.key for r in seen] == ["a", "b", "c"]
    assert all(r.updated_by == "tester" for r in seen)


def test_empty_store(store: Store) -> None:
    assert list(store.range()) == []
    assert store.load("anything") is None


# -- persistence ------------------------------------------------------------------------------


def test_reopen_keeps_records_and_history(place: Place) -> None:
    if not place.kind.durable:
        pytest.skip("not a durable store")
    store = place.open()
    assert store.compare_and_swap("a", None, rec("a", task=[1, "two"]))
    cur = store.load("a")
    assert cur is not None
    assert store.compare_and_swap("a", cur, cur.replace(sequence=2, updated_by="u2"))
    assert store.compare_and_swap("b", None, rec("b", "blocked", needs=("root",)))
    _history(store).append_history([_entry("a", 1), _entry("b", 2)])
    before = list(store.range())
    store = place.reopen(store)
    after = list(store.range())
    assert len(after) == 2 and all(same(x, y) for x, y in zip(before, after, strict=True))
    a = store.load("a")
    assert a is not None and a.rev == 1 and a.sequence == 2
    assert [e.key for e in _history(store).read_history()] == ["a", "b"]


# -- history -----------------------------------------------------------------------------------


def _entry(key: str, fence: int, event: str = "ledger.admitted") -> HistoryEntry:
    return HistoryEntry(
        time=str(T0 + timedelta(seconds=fence)),
        actor="tester@host",
        event=event,
        key=key,
        fence=fence,
        data=f"key {key} admitted at sequence {fence} — ünïcode",
    )


def _history(store: Store) -> Any:
    assert hasattr(store, "append_history") and hasattr(store, "read_history")
    return store


def test_history_appends_and_reads_oldest_first(store: Store) -> None:
    h = _history(store)
    assert list(h.read_history()) == []
    h.append_history([_entry("a", 1), _entry("b", 2)])
    h.append_history([_entry("a", 3, "ledger.claimed")])
    h.append_history([])
    assert list(h.read_history()) == [
        _entry("a", 1),
        _entry("b", 2),
        _entry("a", 3, "ledger.claimed"),
    ]
    assert [e.fence for e in h.read_history("a")] == [1, 3]
    assert list(h.read_history("nobody")) == []


def test_a_long_history_reads_back_whole_and_in_order(store: Store) -> None:
    # Longer than one page of the SQL stores' paged reader (1,000 rows).
    h = _history(store)
    entries = [_entry("ab"[i % 2], i) for i in range(2_345)]
    with store.batch():
        h.append_history(entries)
    assert list(h.read_history()) == entries
    assert [e.fence for e in h.read_history("b")] == list(range(1, 2_345, 2))


# -- batch --------------------------------------------------------------------------------------


def test_batch_reads_its_own_writes_and_persists(place: Place) -> None:
    store = place.open()
    with store.batch():
        assert store.compare_and_swap("a", None, rec("a"))
        cur = store.load("a")
        assert cur is not None and cur.rev == 0
        assert store.compare_and_swap("a", cur, cur.replace(updated_by="in-batch"))
        assert store.compare_and_swap("b", None, rec("b"))
        assert not store.compare_and_swap("b", None, rec("b"))
        assert [r.key for r in store.range()] == ["a", "b"]
        _history(store).append_history([_entry("a", 1)])
        assert [e.key for e in _history(store).read_history()] == ["a"]
    store = place.reopen(store)
    a = store.load("a")
    assert a is not None and a.updated_by == "in-batch" and a.rev == 1
    assert [r.key for r in store.range()] == ["a", "b"]
    assert [e.key for e in _history(store).read_history()] == ["a"]


def test_batch_is_reentrant(place: Place) -> None:
    store = place.open()
    with store.batch():
        assert store.compare_and_swap("outer", None, rec("outer"))
        with store.batch():
            assert store.compare_and_swap("inner", None, rec("inner"))
            with store.batch():
                assert store.load("outer") is not None
        assert store.load("inner") is not None
    store = place.reopen(store)
    assert [r.key for r in store.range()] == ["inner", "outer"]


def test_empty_batch_and_batch_of_reads(store: Store) -> None:
    with store.batch():
        pass
    with store.batch():
        assert store.load("x") is None
        assert list(store.range()) == []
    assert store.compare_and_swap("x", None, rec("x"))
    with store.batch():
        assert store.load("x") is not None


def test_batch_exception_rolls_back(place: Place) -> None:
    if not place.kind.transactional:
        pytest.skip("batch() is not a transaction in this store")
    store = place.open()
    assert store.compare_and_swap("kept", None, rec("kept"))
    with pytest.raises(RuntimeError), store.batch():
        assert store.compare_and_swap("lost", None, rec("lost"))
        cur = store.load("kept")
        assert cur is not None
        assert store.compare_and_swap("kept", cur, cur.replace(updated_by="lost"))
        _history(store).append_history([_entry("lost", 1)])
        raise RuntimeError("boom")
    assert store.load("lost") is None
    kept = store.load("kept")
    assert kept is not None and kept.updated_by == "tester" and kept.rev == 0
    assert list(_history(store).read_history()) == []
    store = place.reopen(store)
    assert [r.key for r in store.range()] == ["kept"]


def test_nested_batch_exception_rolls_back_only_the_inner_block(place: Place) -> None:
    if not place.kind.transactional:
        pytest.skip("batch() is not a transaction in this store")
    store = place.open()
    with store.batch():
        assert store.compare_and_swap("a", None, rec("a"))
        with pytest.raises(RuntimeError), store.batch():
            cur = store.load("a")
            assert cur is not None
            assert store.compare_and_swap("a", cur, cur.replace(updated_by="inner"))
            assert store.compare_and_swap("b", None, rec("b"))
            _history(store).append_history([_entry("b", 1)])
            raise RuntimeError("inner")
        a = store.load("a")
        assert a is not None and a.updated_by == "tester" and a.rev == 0
        assert store.load("b") is None
        assert store.compare_and_swap("c", None, rec("c"))
        _history(store).append_history([_entry("c", 2)])
    store = place.reopen(store)
    assert [r.key for r in store.range()] == ["a", "c"]
    assert [e.key for e in _history(store).read_history()] == ["c"]


def test_batch_writes_are_invisible_elsewhere_until_commit(place: Place) -> None:
    if not (place.kind.durable and place.kind.transactional):
        pytest.skip("needs a durable, transactional store")
    writer = place.open()
    reader = place.open()
    with writer.batch():
        assert writer.compare_and_swap("a", None, rec("a"))
        assert writer.load("a") is not None
        assert reader.load("a") is None
    got = reader.load("a")
    assert got is not None and got.key == "a"


# -- optional: the claimable-work scan ----------------------------------------------------------


def test_by_status_when_offered(store: Store) -> None:
    by_status = getattr(store, "by_status", None)
    if by_status is None:
        pytest.skip("this store has no by_status scan")
    times = {"p-late": 30, "p-early": 10, "c-mid": 20, "done": 5, "blk": 1, "p-tie-b": 10}
    for key, sec in times.items():
        status = {"c": "claimed", "d": "completed", "b": "blocked"}.get(key[0], "pending")
        assert store.compare_and_swap(
            key, None, rec(key, status, created_at=T0 + timedelta(seconds=sec))
        )
    got = [r.key for r in by_status(["pending", "claimed"])]
    assert got == ["p-early", "p-tie-b", "c-mid", "p-late"]
    assert [r.key for r in by_status(["completed"])] == ["done"]
    assert by_status([]) == []
    # A record leaving the claimable set leaves the scan.
    cur = store.load("p-early")
    assert cur is not None
    assert store.compare_and_swap("p-early", cur, cur.replace(status="completed"))
    assert [r.key for r in by_status(["pending"])] == ["p-tie-b", "p-late"]


# -- concurrency ----------------------------------------------------------------------------------


def _increment(store: Store, key: str, times: int) -> int:
    """Read-modify-write `times` increments of the record's sequence; count CAS retries."""
    retries = 0
    for _ in range(times):
        while True:
            cur = store.load(key)
            assert cur is not None
            if store.compare_and_swap(key, cur, cur.replace(sequence=cur.sequence + 1)):
                break
            retries += 1
    return retries


def test_no_lost_update_between_threads(store: Store) -> None:
    assert store.compare_and_swap("counter", None, rec("counter", sequence=0))
    threads = [threading.Thread(target=_increment, args=(store, "counter", 25)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cur = store.load("counter")
    assert cur is not None and cur.sequence == 100 and cur.rev == 100


def _process_increments(kind_name: str, location: str, times: int) -> None:
    store = KINDS[kind_name].open(location, _clock)
    try:
        _increment(store, "counter", times)
    finally:
        store.close()


def test_no_lost_update_between_processes(place: Place) -> None:
    if not place.kind.durable:
        pytest.skip("not shared between processes")
    store = place.open()
    assert store.compare_and_swap("counter", None, rec("counter", sequence=0))
    method = "spawn" if place.kind.scheme == "postgresql" else "fork"
    ctx: Any = multiprocessing.get_context(method)
    procs = [
        ctx.Process(target=_process_increments, args=(place.kind.scheme, place.location, 20))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cur = store.load("counter")
    assert cur is not None and cur.sequence == 80 and cur.rev == 80


# -- the recorded traces ---------------------------------------------------------------------------


def test_unbounded_traces_are_all_collected() -> None:
    assert len(UNBOUNDED) == 311
    for name in UNBOUNDED[:: len(UNBOUNDED) // 10]:
        assert load_trace(name)["max_entries"] == 0


@pytest.mark.parametrize("name", UNBOUNDED)
def test_trace_replays(name: str, place: Place) -> None:
    trace = load_trace(name)
    assert trace["max_entries"] == 0

    def make(clock: Any) -> Store:
        store = place.kind.open(place.location, clock)
        place.opened.append(store)
        return store

    replay(trace, make)


# -- open_store's URL table ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("memory:", "memory"),
        ("json:/tmp/x", "json"),
        ("json:relative/dir", "json"),
        ("/var/lib/ledger", "json"),
        ("./store", "json"),
        ("store", "json"),
        ("~/ledger", "json"),
        ("sqlite:/tmp/x.db", "sqlite"),
        ("sqlite:data", "sqlite"),
        ("/tmp/ledger.db", "sqlite"),
        ("jobs.sqlite", "sqlite"),
        ("json:/tmp/odd.db", "json"),
        ("postgresql://u:p@localhost/db", "postgresql"),
        ("postgres://localhost/db", "postgresql"),
    ],
)
def test_open_store_url_table(url: str, scheme: str) -> None:
    assert scheme_of(url) == scheme


@pytest.mark.parametrize(
    "url", ["", "   ", "json:", "sqlite:", "mysql://localhost/x", "memory:extra", "a\x00b"]
)
def test_a_bad_url_is_a_one_line_usage_error(url: str) -> None:
    with pytest.raises(StoreURLError) as info:
        open_store(url)
    message = str(info.value)
    assert "\n" not in message and message.startswith("ledger: ")
    assert "json:PATH" in message  # says what to do


def test_a_missing_backend_module_is_not_available_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> Any:
        if name == "ledger_cli.stores.sql.sqlite":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(StoreError, match="not available yet"):
        open_store("sqlite:/tmp/never.db")


def test_the_default_store_is_the_json_store_in_the_user_data_dir() -> None:
    import platformdirs

    from ledger_cli.stores import default_store_url

    url = default_store_url()
    assert url == f"json:{platformdirs.user_data_path('ledger_cli') / 'store'}"
    assert scheme_of(url) == "json"


# -- the Ready order of docs/design.md §8.2 (priorities, not-before) ------------------------------


def test_claim_next_agrees_with_the_brute_force_ready_rule(store: Store) -> None:
    """After admits with priorities and delays, the clock moving past them,
    rebases, completions (failed too), prunes: the first ready record the store
    offers is the brute-force rule's first, every step."""
    import random

    from ledger_cli.engine import ready
    from ledger_cli.engine.ledger import Ledger
    from tests.schedule_support import brute_ready

    rng = random.Random(20)
    led = Ledger(store)
    now = T0
    keys: list[str] = []
    claimed: list[tuple[str, int]] = []
    for step in range(160):
        now = now + timedelta(seconds=rng.choice((0, 1, 30, 120)))
        op = rng.random()
        if op < 0.45 or not keys:
            key = f"k{len(keys):03d}"
            needs = rng.sample(keys, k=min(len(keys), rng.choice((0, 0, 0, 1, 2))))
            nb = now + timedelta(minutes=rng.choice((1, 5))) if rng.random() < 0.3 else None
            led.admit_outcome(
                "t",
                key,
                1,
                step,
                now,
                *needs,
                not_before=nb,
                priority=rng.choice((0, 0, 1, 2, -1, 1000, -1000)),
            )
            keys.append(key)
        elif op < 0.55:  # a rebase: new values, or none (cleared)
            key = rng.choice(keys)
            cur = store.load(key)
            assert cur is not None
            prio = rng.choice((0, 3, -3))
            led.admit_outcome("t", key, cur.sequence + 1, step, now, priority=prio)
        elif op < 0.85:
            with store.batch():
                first = next(iter(ready.ready_iter(store, store.load, now)), None)
                want = brute_ready(store, now)
                assert (first.key if first is not None else None) == (want[0] if want else None), (
                    step
                )
                if first is not None:
                    fence = led.claim("t", first.key, "w", timedelta(minutes=2), now)
                    claimed.append((first.key, fence))
        elif claimed:
            key, fence = claimed.pop(rng.randrange(len(claimed)))
            cur = store.load(key)
            if cur is not None and cur.status == "claimed" and cur.fence == fence:
                led.complete(
                    "t", key, "w", fence, rng.choice(("completed", "completed", "failed")), now
                )
        if step % 40 == 39:
            led.prune(timedelta(minutes=1), now, ("completed",))
    # Finally everything due: the whole order, drained one by one.
    later = now + timedelta(hours=1)
    while True:
        first = next(iter(ready.ready_iter(store, store.load, later)), None)
        want = brute_ready(store, later)
        assert (first.key if first is not None else None) == (want[0] if want else None)
        if first is None:
            break
        led.claim("t", first.key, "w", timedelta(minutes=2), later)
