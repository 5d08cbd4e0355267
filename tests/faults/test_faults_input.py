"""Hostile input through every entry point.

`--task`, `--task-file`, `admit --batch`, `restore`, keys, owners, actors,
durations, fences, `--now`: deep nesting, huge numbers, NaN, duplicate keys,
lone surrogates, invalid UTF-8, NUL and control characters, 10,000-character
keys, 100 MB inputs. Each is refused with one short line on stderr and a
documented exit code (docs/design.md §4.4: 2 for bad input, 8 for a bad snapshot), no
traceback, in bounded time and memory, and the store's files are unchanged.

The 100 MB cases run `ledger` as a real process and measure its peak RSS
(its own VmHWM). `Snapshot.decode` is fuzzed separately (tests/faults/test_fuzz_decode.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger_cli.cli import inputs
from tests.cli_support import subprocess_env
from tests.faults_support import Outcome, files, invoke

MAX_SECONDS = 10.0
"""A generous bound for one refused command in-process (they take milliseconds)."""
MAX_LINE = 1200
"""Error lines are clipped: a hostile input is never echoed back in full."""
MAX_RSS_MB = 160
"""Peak RSS of a `ledger` process refusing a 100 MB input (interpreter + at most the
64 MiB read cap for a pipe; a regular file is refused by its size, unread)."""

DEEP = 100_000


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    assert invoke(root, "admit", "existing").code == 0
    assert invoke(root, "admit", "held").code == 0
    assert invoke(root, "claim", "held", "--owner", "w", "--lease", "1h").code == 0
    return root


def refused(res: Outcome, codes: tuple[int, ...] = (2,)) -> str:
    """A refusal: a documented code, one clipped line on stderr, nothing on stdout."""
    assert res.code in codes, (res.code, res.stdout[:300], res.stderr[:300])
    line = res.one_line_error()
    assert line.startswith(("ledger: ", "line ")), line[:200]
    assert len(line) <= MAX_LINE, f"{len(line)} characters: {line[:200]}…"
    assert res.stdout == ""
    return line


class Unchanged:
    """`with Unchanged(store):` asserts the store's files are byte-identical after."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __enter__(self) -> None:
        self.before = files(self.root)
        self.start = time.monotonic()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            assert time.monotonic() - self.start < MAX_SECONDS
            assert files(self.root) == self.before, "a refused command wrote to the store"


# -- JSON payloads ------------------------------------------------------------------------

JSON_HOSTILE: dict[str, str] = {
    "nested-arrays-100k": "[" * DEEP + "]" * DEEP,
    "nested-objects-100k": '{"a":' * DEEP + "1" + "}" * DEEP,
    "nested-unclosed-100k": "[" * DEEP,
    "int-5000-digits": "9" * 5000,
    "negative-int-5000-digits": "-" + "9" * 5000,
    "1e400": "1e400",
    "-1e400": "-1e400",
    "exponent-overflow": "1e99999999999999999999",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "nan-inside": '{"x":[1,NaN]}',
    "duplicate-keys": '{"a":1,"a":2}',
    "duplicate-keys-nested": '{"x":{"b":1,"b":1}}',
    "lone-high-surrogate": '"\\ud800"',
    "lone-low-surrogate": '"\\udfff"',
    "surrogate-in-key": '{"\\udc00":1}',
    "reversed-pair": '"\\udc00\\ud800"',
    "raw-surrogate": '"\udc80"',  # what argv decoding makes of invalid UTF-8
    "nul-byte-raw": '"a\x00b"',
    "control-raw": '"a\x07b"',
    "bom": "\ufeff{}",
    "trailing-garbage": "{} {}",
    "empty": "",
}

BYTES_HOSTILE: dict[str, bytes] = {
    **{name: text.encode("utf-8", "surrogateescape") for name, text in JSON_HOSTILE.items()},
    "invalid-utf8": b'"\xff"',
    "truncated-utf8": b'"\xc3"',
    "overlong-utf8": b'"\xc0\xaf"',
    "cesu-surrogate": b'"\xed\xa0\x80"',
}


@pytest.mark.parametrize("name", sorted(JSON_HOSTILE))
def test_task_option_refuses(store: Path, name: str) -> None:
    with Unchanged(store):
        line = refused(invoke(store, "admit", "new", "--task", JSON_HOSTILE[name]))
    assert line.startswith("ledger: bad --task JSON: ")


@pytest.mark.parametrize("name", sorted(BYTES_HOSTILE))
def test_task_file_refuses(store: Path, tmp_path: Path, name: str) -> None:
    path = tmp_path / "task.json"
    path.write_bytes(BYTES_HOSTILE[name])
    with Unchanged(store):
        line = refused(invoke(store, "admit", "new", "--task-file", str(path)))
        assert line.startswith("ledger: bad --task-file JSON: ")
        line = refused(invoke(store, "admit", "new", "--task-file", "-", input=path.read_bytes()))
        assert line.startswith("ledger: bad --task-file JSON: ")


@pytest.mark.parametrize("name", sorted(BYTES_HOSTILE))
def test_batch_line_with_a_hostile_task_admits_nothing(store: Path, name: str) -> None:
    batch = b'{"key":"ok-1"}\n{"key":"bad","task":' + BYTES_HOSTILE[name] + b"}\n"
    with Unchanged(store):
        line = refused(invoke(store, "admit", "--batch", "-", input=batch))
    assert line.startswith("ledger: line 2: ")


BATCH_LINES: dict[str, str] = {
    "key-nul": '{"key":"a\\u0000b"}',
    "key-bell": '{"key":"\\u0007"}',
    "key-escape-sequence": '{"key":"a\\u001b[31m"}',
    "key-c1": '{"key":"a\\u0085"}',
    "key-del": '{"key":"a\\u007f"}',
    "key-10000": '{"key":"' + "k" * 10_000 + '"}',
    "key-lone-surrogate": '{"key":"\\ud800"}',
    "key-empty": '{"key":""}',
    "key-number": '{"key":7}',
    "key-missing": '{"seq":1}',
    "key-duplicate": '{"key":"a","key":"b"}',
    "seq-negative": '{"key":"a","seq":-1}',
    "seq-5000-digits": '{"key":"a","seq":' + "9" * 5000 + "}",
    "seq-1e400": '{"key":"a","seq":1e400}',
    "seq-overflow": '{"key":"a","seq":18446744073709551616}',
    "seq-float": '{"key":"a","seq":1.5}',
    "seq-string": '{"key":"a","seq":"1"}',
    "seq-bool": '{"key":"a","seq":true}',
    "needs-string": '{"key":"a","needs":"b"}',
    "needs-number": '{"key":"a","needs":[1]}',
    "needs-nul": '{"key":"a","needs":["b\\u0000"]}',
    "needs-10000": '{"key":"a","needs":["' + "n" * 10_000 + '"]}',
    "unknown-field": '{"key":"a","tsk":{}}',
    "array-line": '["key","a"]',
    "nested-line": "[" * DEEP + "]" * DEEP,
}


@pytest.mark.parametrize("name", sorted(BATCH_LINES))
def test_batch_refuses_a_bad_line_and_admits_nothing(store: Path, name: str) -> None:
    batch = '{"key":"ok-1"}\n' + BATCH_LINES[name] + '\n{"key":"ok-2"}\n'
    with Unchanged(store):
        line = refused(invoke(store, "admit", "--batch", "-", input=batch))
    assert line.startswith("ledger: line 2: ") and line.count("ledger:") == 1, line


def test_batch_of_invalid_utf8_names_the_line(store: Path) -> None:
    with Unchanged(store):
        line = refused(invoke(store, "admit", "--batch", "-", input=b'{"key":"a"}\n\xff\xfe\n'))
    assert line.startswith("ledger: line 2: ")


# -- snapshots -------------------------------------------------------------------------------


def _snapshot(record: str) -> str:
    return '{"Tasks":[' + record + "]}"


GOOD_RECORD = (
    '{"Key":"restored","Status":"pending","Sequence":1,"Owner":"","Fence":0,'
    '"LeaseUntil":"0001-01-01T00:00:00Z","Needs":null,"BlockedBy":"","Task":null,"Rev":0,'
    '"CreatedBy":"a","CreatedAt":"2026-01-02T03:04:05Z","UpdatedBy":"a",'
    '"UpdatedAt":"2026-01-02T03:04:05Z"}'
)


def _with(field: str, raw: str) -> str:
    obj = json.loads(GOOD_RECORD)
    obj[field] = "@@"
    return json.dumps(obj, separators=(",", ":")).replace('"@@"', raw)


SNAPSHOT_HOSTILE: dict[str, tuple[bytes, int]] = {
    "nested-100k": (("[" * DEEP + "]" * DEEP).encode(), 8),
    "task-nested-100k": (_snapshot(_with("Task", "[" * DEEP + "]" * DEEP)).encode(), 8),
    "sequence-5000-digits": (_snapshot(_with("Sequence", "9" * 5000)).encode(), 8),
    "fence-negative": (_snapshot(_with("Fence", "-1")).encode(), 8),
    "sequence-overflow": (_snapshot(_with("Sequence", str(2**64))).encode(), 8),
    "rev-float": (_snapshot(_with("Rev", "1.0")).encode(), 8),
    "task-1e400": (_snapshot(_with("Task", "1e400")).encode(), 8),
    "task-int-5000-digits": (_snapshot(_with("Task", "9" * 5000)).encode(), 8),
    "task-nan": (_snapshot(_with("Task", "NaN")).encode(), 8),
    "status-unknown": (_snapshot(_with("Status", '"paused"')).encode(), 8),
    "key-nul": (_snapshot(_with("Key", '"a\\u0000b"')).encode(), 8),
    "key-control": (_snapshot(_with("Key", '"a\\u001b[2J"')).encode(), 8),
    "key-10000": (_snapshot(_with("Key", '"' + "k" * 10_000 + '"')).encode(), 8),
    "needs-control": (_snapshot(_with("Needs", '["x\\u0007"]')).encode(), 8),
    "not-a-snapshot": (b"[1,2,3]", 8),
    "truncated": (_snapshot(GOOD_RECORD).encode()[:-5], 8),
    "empty": (b"", 8),
    "invalid-utf8-outside-strings": (b'{"Tasks":[\xff]}', 8),
}


@pytest.mark.parametrize("name", sorted(SNAPSHOT_HOSTILE))
def test_restore_refuses(store: Path, tmp_path: Path, name: str) -> None:
    data, code = SNAPSHOT_HOSTILE[name]
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    with Unchanged(store):
        refused(invoke(store, "restore", str(path)), (code,))
        refused(invoke(store, "restore", "-", input=data), (code,))


@pytest.mark.parametrize(
    ("name", "record", "key"),
    [
        # Snapshot.decode follows Go (docs/design.md §5.3): the last duplicate wins, invalid
        # UTF-8 and lone surrogates become U+FFFD. Accepted, and the key is sane.
        ("duplicate-field", GOOD_RECORD.replace('"Key":"restored"', '"Key":"x","Key":"y"'), "y"),
        ("invalid-utf8-key", GOOD_RECORD.replace('"restored"', '"r\udcffx"'), "r\ufffdx"),
        ("surrogate-key", GOOD_RECORD.replace('"restored"', '"r\\ud800x"'), "r\ufffdx"),
        ("path-like-key", GOOD_RECORD.replace('"restored"', '"../../escape"'), "../../escape"),
    ],
)
def test_restore_follows_go_where_spec_says_so(
    store: Path, tmp_path: Path, name: str, record: str, key: str
) -> None:
    data = _snapshot(record).encode("utf-8", "surrogateescape")
    res = invoke(store, "restore", "-", input=data)
    assert res.code == 0, res.stderr
    got = json.loads(invoke(store, "--json", "state", key).stdout)
    assert got["Key"] == key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # nothing outside


# -- keys, owners, actors ----------------------------------------------------------------------

BAD_KEYS: dict[str, str] = {
    "empty": "",
    "nul": "a\x00b",
    "bell": "\x07",
    "newline": "a\nb",
    "escape-sequence": "a\x1b[31mred",
    "del": "a\x7f",
    "c1": "a\x85b",
    "10000-chars": "k" * 10_000,
    "1025-bytes": "é" * 512 + "k",
    "invalid-utf8-from-argv": "a\udcffb",
}

KEY_COMMANDS: dict[str, list[str]] = {
    "admit": ["admit", "{}"],
    "admit-needs": ["admit", "fine", "--needs", "{}"],
    "claim": ["claim", "{}", "--owner", "w", "--lease", "1m"],
    "renew": ["renew", "{}", "--owner", "w", "--fence", "1", "--lease", "1m"],
    "release": ["release", "{}", "--owner", "w", "--fence", "1"],
    "takeover": ["takeover", "{}", "--owner", "w", "--lease", "1m"],
    "complete": ["complete", "{}", "--owner", "w", "--fence", "1"],
    "state": ["state", "{}"],
    "blocked": ["blocked", "{}"],
    "tree": ["tree", "{}"],
    "log": ["log", "{}"],
    "run": ["run", "{}", "--owner", "w", "--lease", "1m", "--", "true"],
}


def _fill(template: list[str], value: str) -> list[str]:
    return [value if part == "{}" else part for part in template]


KEY_CREATORS = ("admit", "admit-needs")
"""docs/design.md §5.2: the key rule applies where a key is created; every other command
accepts any key a store can hold (the Go service may have written it), and a
key with no record is exit 3 ("key has no record"); no store holds an empty key,
so that one is exit 2 everywhere."""


@pytest.mark.parametrize("command", sorted(KEY_COMMANDS))
def test_bad_keys_are_refused_where_created_and_missing_elsewhere(
    store: Path, command: str
) -> None:
    with Unchanged(store):
        for name, key in BAD_KEYS.items():
            res = invoke(store, *_fill(KEY_COMMANDS[command], key))
            bad_input = command in KEY_CREATORS or not key
            line = refused(res, (2,) if bad_input else (3,))
            assert "Traceback" not in line, name


@pytest.mark.parametrize("key", ["../../etc/passwd", "a/b", "..", "/", ".", " ", "ключ/🔑"])
def test_path_like_keys_are_ordinary_keys(store: Path, tmp_path: Path, key: str) -> None:
    assert invoke(store, "admit", key).code == 0
    assert invoke(store, "claim", key, "--owner", "w", "--lease", "1m").stdout == "1\n"
    assert invoke(store, "complete", key, "--owner", "w", "--fence", "1").code == 0
    assert json.loads(invoke(store, "--json", "state", key).stdout)["Key"] == key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert not Path("/etc/passwd.json").exists()


BAD_TEXT = {
    "nul": "w\x00",
    "control": "w\x1b]0;title\x07",
    "10000-chars": "o" * 10_000,
    "invalid-utf8-from-argv": "w\udc80",
}


@pytest.mark.parametrize("name", sorted(BAD_TEXT))
def test_bad_owners_and_actors_are_refused(store: Path, name: str) -> None:
    value = BAD_TEXT[name]
    with Unchanged(store):
        refused(invoke(store, "claim", "existing", "--owner", value, "--lease", "1m"))
        refused(invoke(store, "complete", "held", "--owner", value, "--fence", "1"))
        refused(invoke(store, "list", "--owner", value))
        refused(invoke(store, "admit", "new", actor=value))


# -- numbers and durations ---------------------------------------------------------------------

BAD_UINTS = {
    "negative": "-1",
    "5000-digits": "9" * 5000,
    "overflow": str(2**64),
    "exponent": "1e3",
    "hex": "0x10",
    "float": "1.0",
    "plus": "+1",
    "space": " 1",
    "fullwidth": "\uff11",
    "arabic-indic": "٣",
    "empty": "",
    "nan": "NaN",
}


@pytest.mark.parametrize("name", sorted(BAD_UINTS))
def test_bad_fences_sequences_and_limits(store: Path, name: str) -> None:
    value = BAD_UINTS[name]
    with Unchanged(store):
        for args in (
            ["renew", "held", "--owner", "w", "--fence", value, "--lease", "1m"],
            ["release", "held", "--owner", "w", "--fence", value],
            ["complete", "held", "--owner", "w", "--fence", value],
            ["admit", "new", "--seq", value],
            ["list", "--limit", value],
        ):
            refused(invoke(store, *args))


BAD_DURATIONS = {
    "1e400": "1e400",
    "nan": "NaN",
    "inf": "inf",
    "negative": "-1s",
    "zero": "0s",
    "below-resolution": "0.0000001s",
    "5000-digits": "9" * 5000,
    "5000-digits-unit": "9" * 5000 + "s",
    "overflow": "99999999999999999999d",
    "mixed-sign": "1h-5m",
    "unicode-digit": "٣s",
    "space": "1 s",
    "empty": "",
    "unit-only": "ms",
}


@pytest.mark.parametrize("name", sorted(BAD_DURATIONS))
def test_bad_durations(store: Path, name: str) -> None:
    value = BAD_DURATIONS[name]
    with Unchanged(store):
        for args in (
            ["claim", "existing", "--owner", "w", "--lease", value],
            ["renew", "held", "--owner", "w", "--fence", "1", "--lease", value],
            ["takeover", "held", "--owner", "w", "--lease", value],
            ["run", "existing", "--owner", "w", "--lease", value, "--", "true"],
        ):
            refused(invoke(store, *args))
        if name not in ("zero", "below-resolution"):  # a zero wait is a fine wait
            refused(
                invoke(store, "claim", "--next", "--owner", "w", "--lease", "1m", "--wait", value)
            )


@pytest.mark.parametrize("value", ["9" * 5000, "NaN", "2026-13-45T00:00:00Z", "now", "1e400"])
def test_bad_now(store: Path, value: str) -> None:
    with Unchanged(store):
        refused(invoke(store, "admit", "new", now=value))


def test_a_nul_in_the_store_url_is_a_usage_error(store: Path) -> None:
    refused(invoke(str(store) + "\x00x", "state", "existing"), (2,))


def test_error_lines_are_clipped(store: Path, tmp_path: Path) -> None:
    """A hostile value is never echoed back in full (a 5000-digit number, a 1 MB key)."""
    path = tmp_path / "snap.json"
    path.write_bytes(_snapshot(_with("Sequence", "9" * 50_000)).encode())
    line = refused(invoke(store, "restore", str(path)), (8,))
    assert "elided" in line
    line = refused(invoke(store, "admit", "\x01" * 1_000_000))
    assert len(line) <= MAX_LINE


# -- 100 MB inputs, as real processes ------------------------------------------------------------

BIG = 100 * 1024 * 1024


@pytest.fixture(scope="module")
def big_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four 100 MB inputs: a task, a one-line batch, a many-line batch, a snapshot."""
    d = tmp_path_factory.mktemp("big")
    out: dict[str, Path] = {}

    def write(name: str, head: bytes, fill: bytes, tail: bytes) -> None:
        path = d / name
        with open(path, "wb") as fh:
            fh.write(head)
            left = BIG - len(head) - len(tail)
            chunk = fill * (1024 * 1024 // len(fill))
            while left > 0:
                piece = chunk[:left]
                fh.write(piece)
                left -= len(piece)
            fh.write(tail)
        out[name] = path

    write("task.json", b'{"blob":"', b"x", b'"}')
    write("batch-one-line.jsonl", b'{"key":"big","task":"', b"x", b'"}\n')
    write("batch-many-lines.jsonl", b"", b'{"key":"k","task":"' + b"y" * 100 + b'"}\n', b"")
    record = GOOD_RECORD.encode()
    write("snapshot.json", b'{"Tasks":[', record + b",", record + b"]}")
    return out


# The peak RSS of the `ledger` process itself. Not ru_maxrss from wait4: the
# kernel folds the pre-exec RSS into it, and a child forked (or vforked) from
# a pytest process that has grown to hundreds of MB reports that size. The
# exec'd image's own high-water mark (VmHWM) is written out at exit.
_PEAK_PROBE = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def _peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                with open(out, "w") as fh:
                    fh.write(line.split()[1])
atexit.register(_peak)
sys.argv[0] = "ledger"
runpy.run_module("ledger_cli", run_name="__main__")
"""


def _measured(args: list[str], stdin: object) -> tuple[int, str, float, float]:
    """Run `ledger ARGS`; (exit code, stderr, seconds, peak RSS in MB)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = Path(tmp) / "peak"
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK_PROBE, str(peak_file), *args],
            stdin=stdin,  # type: ignore[arg-type]
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
            check=False,
        )
        seconds = time.monotonic() - start
        peak_kb = int(peak_file.read_text())
    return proc.returncode, proc.stderr.decode("utf-8", "replace"), seconds, peak_kb / 1024


def _pipe_from(path: Path) -> Iterator[int]:
    """A pipe fed from `path` by a thread (so the reader sees a pipe, not a file)."""
    r, w = os.pipe()

    def feed() -> None:
        try:
            with open(path, "rb") as src:
                while chunk := src.read(1 << 20):
                    os.write(w, chunk)
        except BrokenPipeError:
            pass
        finally:
            os.close(w)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    try:
        yield r
    finally:
        os.close(r)
        t.join(30)


BIG_CASES = [
    ("task-file", ["admit", "big", "--task-file", "{task.json}"], None),
    ("task-file-stdin-pipe", ["admit", "big", "--task-file", "-"], "task.json"),
    ("batch-one-line", ["admit", "--batch", "{batch-one-line.jsonl}"], None),
    ("batch-many-lines", ["admit", "--batch", "{batch-many-lines.jsonl}"], None),
    ("batch-stdin-pipe", ["admit", "--batch", "-"], "batch-many-lines.jsonl"),
    ("restore", ["restore", "{snapshot.json}"], None),
    ("restore-stdin-pipe", ["restore", "-"], "snapshot.json"),
]


@pytest.mark.parametrize(("name", "args", "pipe"), BIG_CASES, ids=[c[0] for c in BIG_CASES])
def test_a_100_mb_input_is_refused_in_bounded_time_and_memory(
    store: Path, big_inputs: dict[str, Path], name: str, args: list[str], pipe: str | None
) -> None:
    argv = ["--store", str(store)]
    for part in args:
        argv.append(str(big_inputs[part[1:-1]]) if part.startswith("{") else part)
    before = files(store)
    if pipe is None:
        code, err, seconds, rss = _measured(argv, subprocess.DEVNULL)
    else:
        gen = _pipe_from(big_inputs[pipe])
        fd = next(gen)
        try:
            code, err, seconds, rss = _measured(argv, fd)
        finally:
            gen.close()
    print(f"\n100 MB {name}: exit {code} in {seconds:.2f}s, peak RSS {rss:.0f} MB: {err.strip()}")
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert seconds < 30
    assert rss < MAX_RSS_MB, f"peak RSS {rss:.0f} MB"
    assert files(store) == before


def test_a_100_mb_task_option_is_refused_unparsed(store: Path) -> None:
    """An argument cannot be 100 MB long (the kernel caps one at 128 KiB), but main()
    can be handed one: it is refused by its length, before any parsing."""
    task = '"' + "x" * BIG + '"'
    with Unchanged(store):
        start = time.monotonic()
        line = refused(invoke(store, "admit", "big", "--task", task))
        assert time.monotonic() - start < 2.0
    assert "larger than the limit of 1 MiB" in line


def test_the_limits_are_the_documented_ones() -> None:
    assert inputs.MAX_TASK_BYTES == 1 << 20
    assert inputs.MAX_INPUT_BYTES == 64 << 20
    assert inputs.MAX_JSON_DEPTH == 512
