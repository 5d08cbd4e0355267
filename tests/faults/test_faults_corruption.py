"""A damaged store is reported, never reset.

A record file truncated at every byte offset, random byte and bit flips, an
empty file, invalid UTF-8, valid JSON of the wrong shape, a record under
another key's name, a future format version, a damaged history: every read
path (`state`, `list`, `claim --next`, `snapshot`, `tree`, `blocked`, `log`)
and `ledger doctor` exit 9 naming the file, and no write path (`admit`,
`claim`, `renew`, `release`, `takeover`, `complete`, `admit --batch`,
`restore`, `run`, `claim --next`, `doctor --fix`) changes its bytes.

`LEDGER_FLIPS=N` sets the number of random flips (default 400).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, key_digest
from tests.faults_support import Outcome, files, invoke

LATER = "2026-01-02T03:04:06Z"
"""A second after the clock the commands run at (faults_support.T0)."""

FLIPS = int(os.environ.get("LEDGER_FLIPS", "400"))


def record_path(root: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return root / "records" / digest[:2] / f"{digest}.json"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store: `victim` (pending, with a task and needs), `bystander`, `done`.
    The victim is the first ready task (the bystander is admitted a second
    later), so `claim --next` reaches its record before any other."""
    root = tmp_path_factory.mktemp("template") / "store"
    for args in (
        ["admit", "dep"],
        ["claim", "dep", "--owner", "w", "--lease", "1h"],
        ["complete", "dep", "--owner", "w", "--fence", "1"],
        ["admit", "victim", "--needs", "dep", "--task", '{"cmd":"make test","n":[1,2.5,null]}'],
    ):
        assert invoke(root, *args).code == 0, args
    assert invoke(root, "admit", "bystander", now=LATER).code == 0
    return root


def clone(template: Path, dest: Path) -> Path:
    root = dest / "store"
    root.mkdir(mode=0o700)
    for src in sorted(template.rglob("*")):
        rel = src.relative_to(template)
        if src.is_dir():
            (root / rel).mkdir(mode=0o700)
        else:
            (root / rel).write_bytes(src.read_bytes())
            os.chmod(root / rel, 0o600)
    return root


READS: dict[str, list[str]] = {
    "state": ["state", "victim"],
    "state-json": ["--json", "state", "victim"],
    "list": ["list"],
    "list-json": ["list", "--json"],
    "claim-next": ["claim", "--next", "--owner", "x", "--lease", "1m"],
    "snapshot": ["snapshot"],
    "tree": ["tree", "victim"],
    "blocked": ["blocked", "victim"],
}

WRITES: dict[str, list[str]] = {
    "admit": ["admit", "victim", "--seq", "9"],
    "claim": ["claim", "victim", "--owner", "x", "--lease", "1m"],
    "renew": ["renew", "victim", "--owner", "x", "--fence", "0", "--lease", "1m"],
    "release": ["release", "victim", "--owner", "x", "--fence", "0"],
    "takeover": ["takeover", "victim", "--owner", "x", "--lease", "1m"],
    "complete": ["complete", "victim", "--owner", "x", "--fence", "0"],
    "run": ["run", "victim", "--owner", "x", "--lease", "1m", "--", "true"],
    "claim-next": ["claim", "--next", "--owner", "x", "--lease", "1m"],
    "doctor-fix": ["doctor", "--fix"],
}

BATCH = b'{"key":"other"}\n{"key":"victim","seq":5}\n'
SNAPSHOT = (
    b'{"Tasks":[{"Key":"victim","Status":"pending","Sequence":1,"Owner":"","Fence":0,'
    b'"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,"BlockedBy":"","Task":null,"Rev":0,'
    b'"CreatedBy":"a","CreatedAt":"2026-01-02T03:04:05Z","UpdatedBy":"a",'
    b'"UpdatedAt":"2026-01-02T03:04:05Z"}]}'
)


def reported(res: Outcome, path: Path) -> None:
    """Exit 9 and the file named: on stderr (one line), or as a doctor problem."""
    assert res.code == 9, (res.code, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    if res.stderr:
        assert str(path) in res.one_line_error()
    else:
        problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem: ")]
        assert any(str(path) in p for p in problems), res.stdout


def check_every_path(root: Path, path: Path, *, reads: bool = True, writes: bool = True) -> None:
    damaged = path.read_bytes()
    if reads:
        for args in READS.values():
            reported(invoke(root, *args), path)
        reported(invoke(root, "doctor"), path)
    if writes:
        for name, args in WRITES.items():
            res = invoke(root, *args)
            reported(res, path)
            assert path.read_bytes() == damaged, f"{name} rewrote the damaged file"
        for args, data in (
            (["admit", "--batch", "-"], BATCH),
            (["restore", "-"], SNAPSHOT),
        ):
            reported(invoke(root, *args, input=data), path)
            assert path.read_bytes() == damaged, f"{args[0]} rewrote the damaged file"
        assert invoke(root, "state", "other").code == 3  # the batch admitted nothing
    assert path.read_bytes() == damaged


def store_level_refuses(root: Path, path: Path) -> None:
    """The store API: load, range, the live scan and a write all refuse, naming the file."""
    store = JsonFileStore(root)
    attempts: list[Callable[[], object]] = [
        lambda: store.load("victim"),
        lambda: list(store.range()),
        lambda: store.by_status(["pending"]),
        lambda: store.compare_and_swap("victim", None, bystander),
    ]
    bystander = store.load("bystander")
    assert bystander is not None
    bystander = bystander.replace(key="victim")
    for attempt in attempts:
        with pytest.raises(StoreError) as info:
            attempt()
        assert str(path) in str(info.value)


# -- shapes of damage ----------------------------------------------------------------------

SHAPES: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda good: b"",
    "newline-only": lambda good: b"\n",
    "truncated-half": lambda good: good[: len(good) // 2],
    "no-final-newline": lambda good: good[:-1],
    "invalid-utf8": lambda good: good.replace(b"make test", b"make\xfftest"),
    "nul-bytes": lambda good: b"\x00" * len(good),
    "array": lambda good: b"[]\n",
    "null": lambda good: b"null\n",
    "object": lambda good: b"{}\n",
    "string": lambda good: b'"victim"\n',
    "number": lambda good: b"42\n",
    "record-in-array": lambda good: b"[" + good.rstrip(b"\n") + b"]\n",
    "two-records": lambda good: good + good,
    "wrong-type": lambda good: good.replace(b'"Sequence":1', b'"Sequence":"1"'),
    "bad-status": lambda good: good.replace(b'"pending"', b'"paused"'),
    "other-task": lambda good: good.replace(b"make test", b"rm -rf /"),
    "other-owner": lambda good: good.replace(b'"Owner":""', b'"Owner":"mallory"'),
    "duplicate-field": lambda good: good.replace(b'{"Key"', b'{"Status":"claimed","Key"'),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_damaged_record_is_reported_everywhere_and_left_alone(
    template: Path, tmp_path: Path, shape: str
) -> None:
    root = clone(template, tmp_path)
    path = record_path(root, "victim")
    path.write_bytes(SHAPES[shape](path.read_bytes()))
    store_level_refuses(root, path)
    check_every_path(root, path)


def test_a_record_under_another_keys_name_is_reported(template: Path, tmp_path: Path) -> None:
    root = clone(template, tmp_path)
    path = record_path(root, "victim")
    path.write_bytes(record_path(root, "bystander").read_bytes())
    store_level_refuses(root, path)
    check_every_path(root, path)


def test_a_record_truncated_at_every_offset(template: Path, tmp_path: Path) -> None:
    root = clone(template, tmp_path)
    path = record_path(root, "victim")
    good = path.read_bytes()
    for cut in range(len(good)):
        path.write_bytes(good[:cut])
        store_level_refuses(root, path)
        reported(invoke(root, "--json", "state", "victim"), path)
        reported(invoke(root, "claim", "victim", "--owner", "x", "--lease", "1m"), path)
        if cut % 8 == 0:
            reported(invoke(root, "doctor"), path)
        assert path.read_bytes() == good[:cut]
        if cut % 64 == 0:  # every path, on a sample of offsets
            check_every_path(root, path)
    print(f"\n{len(good)} truncation offsets, each reported")


def test_random_byte_and_bit_flips(template: Path, tmp_path: Path) -> None:
    root = clone(template, tmp_path)
    path = record_path(root, "victim")
    good = path.read_bytes()
    rng = random.Random(int(os.environ.get("LEDGER_FLIPS_SEED", "6")))
    for i in range(FLIPS):
        damaged = bytearray(good)
        for _ in range(1 + (i % 3 == 0) * rng.randint(1, 4)):  # mostly one flip, some several
            pos = rng.randrange(len(damaged))
            damaged[pos] ^= 1 << rng.randrange(8) if i % 2 else rng.randrange(1, 256)
        if bytes(damaged) == good:
            continue
        path.write_bytes(bytes(damaged))
        store_level_refuses(root, path)
        reported(invoke(root, "--json", "state", "victim"), path)
        if i % 10 == 0:
            reported(invoke(root, "doctor"), path)
        if i % 50 == 0:
            check_every_path(root, path)
        assert path.read_bytes() == bytes(damaged)
    print(f"\n{FLIPS} random flips, each reported")


# -- the rest of the store --------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 99, "2", None])
def test_a_future_or_unknown_format_version_is_reported(
    template: Path, tmp_path: Path, version: object
) -> None:
    root = clone(template, tmp_path)
    meta = root / "ledger-store.json"
    doc = json.loads(meta.read_text())
    doc["version"] = version
    meta.write_text(json.dumps(doc) + "\n")
    before = files(root)
    for args in [*READS.values(), *WRITES.values(), ["log"], ["doctor"]]:
        reported(invoke(root, *args), meta)
    assert files(root) == before


HISTORY_DAMAGE: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "invalid-utf8": lambda lines: [lines[0], lines[1][:10] + b"\xff" + lines[1][11:], *lines[2:]],
    "not-json": lambda lines: [lines[0], b"garbage{", *lines[2:]],
    "wrong-shape": lambda lines: [lines[0], b"[1,2]", *lines[2:]],
    "missing-field": lambda lines: [lines[0], b'{"time":"x"}', *lines[2:]],
    "empty-line": lambda lines: [lines[0], b"", *lines[2:]],
}


@pytest.mark.parametrize("damage", sorted(HISTORY_DAMAGE))
def test_a_damaged_history_is_reported_and_kept(
    template: Path, tmp_path: Path, damage: str
) -> None:
    root = clone(template, tmp_path)
    path = root / "history.jsonl"
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) > 4
    damaged = b"\n".join(HISTORY_DAMAGE[damage](lines[:-1])) + b"\n"
    path.write_bytes(damaged)
    reported(invoke(root, "log"), path)
    reported(invoke(root, "log", "victim"), path)
    reported(invoke(root, "doctor"), path)
    # Writers append after it; they never rewrite what is there.
    assert invoke(root, "admit", "later").code == 0
    assert path.read_bytes().startswith(damaged)
    reported(invoke(root, "log"), path)
