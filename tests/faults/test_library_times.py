"""A program that gives the library a `now` whose UTC offset has seconds
leaves every durable store as the installed `ledger` expects it: the call is
refused (ValidationError, exit 8) before anything is written, on every store
(`Instant.coerce`; docs/design.md §2.11 departure 6). It used to write a
record whose RFC 3339 time named another instant, which the JSON store's ready
index then missed: `claim --next` found nothing ready (exit 7) and `doctor`
reported the index (exit 9). The program, and each `ledger`, is a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli_support import run_ledger, subprocess_env

PROGRAM = """
import sys
from datetime import datetime, timedelta, timezone
from ledger_cli import Ledger, open_store
from ledger_cli.errors import LedgerError
offset = timezone(timedelta(seconds=int(sys.argv[2])))
with open_store(sys.argv[1]) as store:
    try:
        Ledger(store).admit("me", sys.argv[3], 1, None, datetime(2026, 1, 1, tzinfo=offset))
    except LedgerError as exc:
        print(exc)
        sys.exit(exc.exit_code)
"""
"""The tester's program: admit KEY at 2026-01-01T00:00:00 in an offset of
`argv[2]` seconds; a refusal prints its message and exits with its code."""


CLAIM_NEXT = ("claim", "--next", "--owner", "w", "--lease", "1m", "--now", "2026-01-01T00:10:00Z")


def _admit(url: str, offset_seconds: int, key: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, url, str(offset_seconds), key],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )


def test_a_now_with_an_offset_of_seconds_writes_nothing_and_leaves_the_store_sound(
    url: str,
) -> None:
    """The store holds the task admitted before (in UTC) and nothing else;
    `doctor` finds no problem; `claim --next` hands that task out and then
    has nothing ready (exit 7)."""
    assert _admit(url, 0, "before").returncode == 0
    refused = _admit(url, 30, "k1")
    assert refused.returncode == 8, (refused.stdout, refused.stderr)
    assert refused.stdout == (
        "ledger: time 2026-01-01T00:00:00+00:00:30 is not a time a store can keep"
        " (RFC 3339, an offset of whole minutes)\n"
    )
    listed = run_ledger(url, "--json", "list")
    assert listed.returncode == 0, listed.stderr
    assert [rec["Key"] for rec in json.loads(listed.stdout)] == ["before"]
    doctor = run_ledger(url, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert "problem:" not in doctor.stdout
    for code in (0, 7):
        claimed = run_ledger(url, *CLAIM_NEXT)
        assert claimed.returncode == code, claimed.stderr


def test_a_now_in_a_whole_minute_offset_is_handed_out_by_claim_next(url: str) -> None:
    """The same program with an offset of 5:30 (and of one minute): admitted,
    at its instant, and `claim --next` hands both out, in order."""
    for offset, key in ((19_800, "east"), (-60, "west")):
        admitted = _admit(url, offset, key)
        assert admitted.returncode == 0, (admitted.stdout, admitted.stderr)
    for key in ("east", "west"):  # 2025-12-31T18:30:00Z, then 2026-01-01T00:01:00Z
        claimed = run_ledger(url, *CLAIM_NEXT)
        assert claimed.returncode == 0, claimed.stderr
        assert claimed.stdout.split()[0] == key
    doctor = run_ledger(url, "doctor")
    assert doctor.returncode == 0, doctor.stdout
