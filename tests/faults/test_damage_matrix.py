"""The damage matrix, as the user meets it: every kind of file the
JSON store keeps, damaged five ways (truncated, random bytes, empty, deleted,
valid JSON of the wrong shape), then the commands a person runs, each as a
fresh `ledger` process (tests/cli_support.py).

Checked for every case:
- never exit 70, never a traceback, one line on stderr for exit 9, and the
  damaged file's bytes never echoed;
- a damaged primary file (record, metadata, history, schedule, attempt,
  journal, pruned keys) is never overwritten;
- `claim --next` and `run --next` (of every queue, and of queue `night`)
  never report "nothing ready" (exit 7): the store always holds ready tasks,
  so that answer would be wrong; they claim, or exit 9 naming the damage;
- `stats` agrees with a scan of the records (`list --json`) whenever both answer;
- after `doctor --fix`, a derived file (ready, deps, tally, live, pruned count) is
  repaired: `doctor` is clean and `claim --next` claims;
- a deleted record is named by `doctor` as lost, before and after `--fix`; a
  damaged or deleted record, a deleted history and one cut mid-line are accepted by
  `doctor --fix --drop-damaged` (damaged bytes kept in damaged/), after which
  `doctor` is clean and `claim --next` claims.

CI runs one truncation offset and one random seed per file;
LEDGER_DAMAGE_FULL=1 runs seven offsets and five seeds (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

FULL = os.environ.get("LEDGER_DAMAGE_FULL") == "1"
NOW = "2026-03-04T05:06:07Z"
PAST = "2026-01-01T00:00:00Z"


def _digest(key: str) -> str:
    d = key_digest(key)
    assert d is not None
    return d


# kind -> (path in the store, primary?)
KINDS: dict[str, tuple[str, bool]] = {
    "record": (f"records/{_digest('p2')[:2]}/{_digest('p2')}.json", True),
    "metadata": ("ledger-store.json", True),
    "history": ("history.jsonl", True),
    "journal": ("journal.json", True),
    "schedule": (f"schedule/{_digest('later')}.json", True),
    "attempt": (f"attempts/{_digest('p1')[:2]}/{_digest('p1')}/1.att", True),
    "pause": ("paused.json", True),
    "ready-chunk": ("ready/c0", False),
    "ready-manifest": ("ready/manifest", False),
    # The partition of queue `night` ("night".encode().hex()).
    "ready-queue-chunk": ("ready/q/6e69676874/c0", False),
    "ready-queue-manifest": ("ready/q/6e69676874/manifest", False),
    "deps-manifest": ("deps/manifest", False),
    "deps-entry": (f"deps/{_digest('p1')[:2]}/{_digest('p1')}", False),
    "tally-counts": ("tally/counts", False),
    "tally-shard": (f"tally/{_digest('held')[:2]}", False),
    "live": (f"live/{_digest('p2')}", False),
    # A pruned key's line is the only copy of its record (prunedfile.py): primary.
    "pruned-keys": (f"pruned/{_digest('old')[:2]}.jsonl", True),
    "pruned-count": ("pruned/count", False),
}

# Files a healthy store holds only sometimes: their damage is a file that
# appears (there is nothing to delete).
ABSENT_WHEN_HEALTHY = {"journal", "pause"}
SAMPLE = {  # what such a file looks like when present, to truncate
    "journal": b'{"records": [], "history": [], "tally": null}\n',
    "pause": b'{"since": "2026-03-04T05:06:07Z", "by": "matrix"}\n',
}

WAYS = ["truncated", "random", "empty", "deleted", "wrongshape"]

# Known failures the matrix found that are not fixed yet: each is a
# case the store gets wrong today. strict: a fix makes the test say so.
KNOWN: dict[tuple[str, str], str] = {}


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ledger(store, "--now", NOW, "--actor", "matrix", *args)


def _ok(store: Path, *args: str) -> None:
    res = _ledger(store, *args)
    assert res.returncode == 0, (args, res.returncode, res.stderr)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a file of every kind: ready tasks, a task waiting on a
    need, a scheduled task, a run with kept output, a pruned key, a held lease."""
    store = tmp_path_factory.mktemp("damage") / "store"
    for key in ("p1", "p2", "p3", "p4"):
        _ok(store, "admit", key, "--task", '{"n":1}')
    _ok(store, "admit", "child", "--needs", "p2")
    _ok(store, "admit", "waits", "--needs", "p1")
    _ok(store, "admit", "later", "--delay", "1h", "--priority", "5")
    _ok(store, "admit", "z-nightly", "--queue", "night")  # sorts after p2…p4
    _ok(store, "run", "p1", "--owner", "w", "--lease", "60s", "--", "echo", "hi")
    _ok(store, "admit", "old", "--now", PAST)
    _ok(store, "claim", "old", "--owner", "w", "--lease", "60s", "--now", PAST)
    _ok(store, "complete", "old", "--owner", "w", "--fence", "1", "--now", PAST)
    _ok(store, "prune", "--older-than", "1d")
    _ok(store, "admit", "held")
    _ok(store, "claim", "held", "--owner", "w", "--lease", "1h")
    return store


def _wrong_shape(data: bytes) -> bytes:
    try:
        value = json.loads(data)
    except ValueError:
        return b'{"unexpected": [1, 2, 3]}\n'
    if isinstance(value, dict):
        return b'["valid", "json", "of", "the", "wrong", "shape"]\n'
    return b'{"unexpected": [1, 2, 3]}\n'


def _damages(way: str, data: bytes) -> Iterator[bytes | None]:
    size = len(data)
    if way == "truncated":
        fractions = [i / 8 for i in range(1, 8)] if FULL else [0.5]
        for off in sorted({max(1, int(size * f)) for f in fractions}):
            if off < size:
                yield data[:off]
    elif way == "random":
        for seed in range(5 if FULL else 1):
            rnd = random.Random(seed)
            yield bytes(rnd.randrange(256) for _ in range(max(size, 48)))
    elif way == "empty":
        yield b""
    elif way == "deleted":
        yield None
    else:
        yield _wrong_shape(data)


def _echoed(damaged: bytes | None, shown: str) -> bool:
    """Whether a run of 12 printable bytes of the damage appears in the output."""
    if not damaged:
        return False
    text = damaged.decode("latin-1")
    run = ""
    for ch in text:
        run = run + ch if ch.isprintable() and ch.isascii() and ch not in " {}[]\"':,." else ""
        if len(run) >= 12 and run in shown:
            return True
    return False


def _scan_counts(listing: list[dict[str, object]]) -> dict[str, int]:
    counts = dict.fromkeys(("pending", "claimed", "completed", "failed", "blocked"), 0)
    for rec in listing:
        counts[str(rec["Status"])] += 1
    return counts


def _run_case(
    template: Path, store: Path, kind: str, damaged: bytes | None, random_bytes: bool
) -> None:
    rel, primary = KINDS[kind]
    shutil.copytree(template, store)
    target = store / rel
    if damaged is None:
        target.unlink(missing_ok=True)
    else:
        target.write_bytes(damaged)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        res = _ledger(store, *args)
        where = f"{kind}: ledger {' '.join(args)} -> {res.returncode}: {res.stderr!r}"
        assert res.returncode != 70, where
        assert "Traceback" not in res.stderr + res.stdout, where
        if res.returncode == 9:  # one line on stderr (doctor reports on stdout)
            assert len(res.stderr.splitlines()) <= 1, where
        if random_bytes:  # a truncated file's bytes are genuine content, shown as such
            assert not _echoed(damaged, res.stdout + res.stderr), where
        return res

    def untouched() -> None:
        if primary:
            got = target.read_bytes() if target.exists() else None
            if kind == "history" and got is not None and damaged is not None:
                # history is append-only: later lines may follow, the damage stays
                assert got.startswith(damaged), f"{kind}: {rel} was overwritten"
            else:
                assert got == damaged, f"{kind}: {rel} was overwritten"

    run("state", "p2")
    listing = run("list", "--json")
    stats = run("stats", "--json")
    run("log")
    run("output", "p1")
    doctor = run("doctor")
    if kind == "record" and damaged is None:  # lost primary data: named by key
        assert doctor.returncode == 9 and "record p2 is lost" in doctor.stdout, doctor.stdout
    untouched()
    if stats.returncode == 0 and listing.returncode == 0:
        scan = _scan_counts(json.loads(listing.stdout))
        assert json.loads(stats.stdout)["counts"] == scan, f"{kind}: stats disagrees with a scan"
    for args in (
        ("claim", "--next", "--owner", "m", "--lease", "60s"),
        ("run", "--next", "--owner", "m", "--lease", "60s", "--", "true"),
        ("claim", "--next", "--queue", "night", "--owner", "m", "--lease", "60s"),
    ):
        res = run(*args)
        assert res.returncode in (0, 9), f"{kind}: {args[0]} --next -> {res.returncode}"
    assert run("admit", "newkey", "--task", "{}").returncode in (0, 9)
    assert run("complete", "held", "--owner", "w", "--fence", "1").returncode in (0, 9)
    untouched()
    run("doctor", "--fix")
    untouched()
    if kind == "record" and damaged is None:  # --fix does not accept the loss
        after = run("doctor")
        assert after.returncode == 9 and "record p2 is lost" in after.stdout, after.stdout
    # A history cut mid-line (whole lines before it): its torn line is damage.
    torn = kind == "history" and bool(damaged) and not random_bytes
    torn = torn and damaged is not None and not damaged.endswith(b"\n")
    if kind == "record" or (kind == "history" and damaged is None) or torn:
        # Accepting the loss explicitly: the damaged file moved aside (its bytes
        # kept), a history line, and a store that works again.
        dropped = run("doctor", "--fix", "--drop-damaged")
        assert dropped.returncode == 0, f"{kind}: --drop-damaged: {dropped.stdout}"
        assert "fixed: " in dropped.stdout, dropped.stdout
        if damaged is not None and kind in ("record", "history"):
            aside = [p.read_bytes() for p in (store / "damaged").iterdir()]
            kept = damaged if kind == "record" else damaged[damaged.rfind(b"\n") + 1 :]
            assert aside == [kept], f"{kind}: the damaged bytes were not kept"
        assert run("doctor").returncode == 0, f"{kind}: doctor after --drop-damaged"
        again = run("claim", "--next", "--owner", "m3", "--lease", "60s")
        assert again.returncode == 0, f"{kind}: claim --next after --drop-damaged"
    if not primary:
        after = run("doctor")
        assert after.returncode == 0, f"{kind}: doctor after --fix: {after.stdout}"
        again = run("claim", "--next", "--owner", "m2", "--lease", "60s")
        assert again.returncode == 0, f"{kind}: claim --next after --fix: {again.stderr}"


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damage(template: Path, tmp_path: Path, kind: str, way: str) -> None:
    if kind in ABSENT_WHEN_HEALTHY and way == "deleted":
        pytest.skip("a healthy store has no such file to delete")
    if (kind, way) in KNOWN:
        pytest.xfail(KNOWN[kind, way])
    path = template / KINDS[kind][0]
    data = path.read_bytes() if path.exists() else SAMPLE[kind]
    for n, damaged in enumerate(_damages(way, data)):
        _run_case(template, tmp_path / f"case{n}", kind, damaged, way == "random")


def test_template_holds_every_kind(template: Path) -> None:
    missing = [
        k
        for k, (rel, _) in KINDS.items()
        if k not in ABSENT_WHEN_HEALTHY and not (template / rel).exists()
    ]
    assert not missing


# wal.log holds the writes since the last checkpoint (stores/jsonfile/wal.py);
# the template's last two writes are in it. wal.applied is its mark.
LOG_COMMANDS: list[tuple[str, ...]] = [
    ("state", "p2"),
    ("list", "--json"),
    ("stats", "--json"),
    ("log",),
    ("output", "p1"),
    ("claim", "--next", "--owner", "m", "--lease", "60s"),
    ("run", "--next", "--owner", "m", "--lease", "60s", "--", "true"),
    ("admit", "newkey", "--task", "{}"),
    ("complete", "held", "--owner", "w", "--fence", "1"),
]


def _store_files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name not in ("ledger.lock", "wal.applied")
    }


@pytest.mark.parametrize("way", WAYS)
def test_damaged_log(template: Path, tmp_path: Path, way: str) -> None:
    """A damaged wal.log is refused by every command (exit 9, one line naming
    it, nothing written); `doctor` names it; `doctor --fix` keeps its bytes in
    damaged/ and makes its writes durable, after which every record reads as
    before the damage and the queue works."""
    log = template / "wal.log"
    data = log.read_bytes()
    assert data, "the template's last writes are in wal.log"
    before = json.loads(_ledger(template, "list", "--json").stdout)
    for n, damaged in enumerate(_damages(way, data)):
        store = tmp_path / f"case{n}"
        shutil.copytree(template, store)
        if damaged is None:
            (store / "wal.log").unlink()
        else:
            (store / "wal.log").write_bytes(damaged)
        files = _store_files(store)
        for args in LOG_COMMANDS:
            res = _ledger(store, *args)
            assert res.returncode == 9, (way, args, res.returncode, res.stderr)
            assert res.stderr.splitlines() == [res.stderr.strip()], (way, args, res.stderr)
            assert f"{store}/wal.log: damaged" in res.stderr, (way, args, res.stderr)
        doctor = _ledger(store, "doctor")
        assert doctor.returncode == 9 and "wal.log: damaged" in doctor.stdout, doctor.stdout
        assert _store_files(store) == files, f"{way}: a refused command wrote"
        fixed = _ledger(store, "doctor", "--fix")
        assert fixed.returncode == 0, (way, fixed.stdout)
        assert "fixed: " in fixed.stdout and "its writes are durable" in fixed.stdout
        if damaged is not None:
            assert (store / "damaged" / "wal.log.1").read_bytes() == damaged
        assert _ledger(store, "doctor").returncode == 0
        after = json.loads(_ledger(store, "list", "--json").stdout)
        assert after == before, f"{way}: records changed by the repair"
        assert _ledger(store, "claim", "--next", "--owner", "m", "--lease", "60s").returncode == 0


@pytest.mark.parametrize("way", WAYS)
def test_damaged_log_mark(template: Path, tmp_path: Path, way: str) -> None:
    """wal.applied is derived (how far this boot applied the log): damaged any
    way, the next command applies every frame again, and every answer is the
    healthy store's."""
    mark = template / "wal.applied"
    before = json.loads(_ledger(template, "list", "--json").stdout)
    for n, damaged in enumerate(_damages(way, mark.read_bytes())):
        store = tmp_path / f"case{n}"
        shutil.copytree(template, store)
        if damaged is None:
            (store / "wal.applied").unlink()
        else:
            (store / "wal.applied").write_bytes(damaged)
        listing = _ledger(store, "list", "--json")
        assert listing.returncode == 0, (way, listing.stderr)
        assert json.loads(listing.stdout) == before, f"{way}: another answer"
        assert _ledger(store, "doctor").returncode == 0
        assert _ledger(store, "claim", "--next", "--owner", "m", "--lease", "60s").returncode == 0
