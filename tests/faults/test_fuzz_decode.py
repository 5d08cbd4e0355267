"""Byte-mutation fuzzing of Snapshot.decode: whatever the input, it returns a
Snapshot or raises DecodeError / ValidationError — never anything else.

The CI tier runs 100,000 inputs; `LEDGER_FUZZ=N` runs N (e.g. 2,000,000) and
`LEDGER_FUZZ_SEED` picks another seed.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.errors import DecodeError, ValidationError

CASES = Path(__file__).parents[1] / "data" / "conformance" / "decode-cases.json"
INPUTS = int(os.environ.get("LEDGER_FUZZ", "100000"))

INTERESTING = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b"\\",
    b":",
    b",",
    b"null",
    b"true",
    b"-",
    b"0",
    b"1e400",
    b"18446744073709551616",
    b"18446744073709551615",
    b"-9223372036854775808",
    b"1234567890123456789",
    b"9.223372036854776e18",
    b"\\ud800",
    b"\\u0000",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"NaN",
    b"Infinity",
    b"\x00",
    b"1.5",
    b"-0",
    b'"Tasks"',
    b'"tasks"',
    b'"Key"',
    b'"Status"',
    b'"claimed"',
    b'"blocked"',
    b'"Needs"',
    b'"LeaseUntil"',
    b'"0000-01-01T00:00:00Z"',
    b'"9999-12-31T23:59:59.999999999+23:59"',
    b"[" * 600,
]


def _seeds() -> list[bytes]:
    cases = json.loads(CASES.read_text(encoding="utf-8"))["ops"]
    return [case["input"].encode("utf-8", "surrogatepass") for case in cases]


def _mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(6)
        pos = rng.randint(0, len(buf))
        if choice == 0 and buf:  # flip a byte
            buf[min(pos, len(buf) - 1)] = rng.randrange(256)
        elif choice == 1:  # insert a token
            buf[pos:pos] = rng.choice(INTERESTING)
        elif choice == 2 and buf:  # delete a span
            del buf[pos : pos + rng.randint(1, 16)]
        elif choice == 3:  # truncate
            del buf[pos:]
        elif choice == 4:  # splice another seed
            other = rng.choice(seeds)
            cut = rng.randint(0, len(other))
            buf[pos:] = other[cut:]
        else:  # duplicate a span
            span = bytes(buf[pos : pos + rng.randint(1, 32)])
            buf[pos:pos] = span
    return bytes(buf)


def test_decode_raises_only_decode_or_validation_errors() -> None:
    seeds = _seeds()
    rng = random.Random(int(os.environ.get("LEDGER_FUZZ_SEED", "20261129")))
    outcomes = {"ok": 0, "decode": 0, "validate": 0}
    for _ in range(INPUTS):
        data = _mutate(rng, rng.choice(seeds), seeds)
        try:
            snap = Snapshot.decode(data)
        except DecodeError as exc:
            assert str(exc).startswith("ledger: decode: "), (data, exc)
            outcomes["decode"] += 1
        except ValidationError:
            outcomes["validate"] += 1
        else:
            # What decodes re-encodes, and that text is a fixed point: it decodes
            # to records that encode to the same bytes. (Not always to equal
            # records: a float such as 9.223372036854776e18 is written as Go
            # writes it, 9223372036854776000, which reads back as that exact int.)
            text = snap.encode()
            again = Snapshot.decode(text)
            assert again.encode() == text, data
            assert Snapshot.decode(again.encode()) == again, data
            outcomes["ok"] += 1
    assert sum(outcomes.values()) == INPUTS
    # The mutator must reach all three outcomes, or the fuzzing is not exercising much.
    assert min(outcomes.values()) > INPUTS // 100, outcomes
