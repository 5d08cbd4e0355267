"""The command line waits out a dispossessed lease for `--next` after a rebase
(single or batch) and after cancel + retry, but not for a claim by key
(docs/design.md §2.2, §8.1). The engine's rule is tested in
tests/engine/test_lease_hold.py."""

from __future__ import annotations

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import Cli, make_cli

T = Instant.parse("2026-01-02T03:04:05Z")
END = T.add_ns(30 * 10**9)  # the end of a 30 s lease claimed at T


def _at(seconds: int) -> Instant:
    return T.add_ns(seconds * 10**9)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return make_cli(monkeypatch)


@pytest.mark.parametrize("remedy", [["admit", "job", "--seq", "2"], ["cancel", "job"]])
def test_the_command_line_holds_next_but_not_a_claim_by_key(cli: Cli, remedy: list[str]) -> None:
    cli.ok("admit", "job")
    cli.ok("claim", "job", "--owner", "w1", "--lease", "30s", now=str(T))
    cli.ok(*remedy, now=str(_at(1)))
    if remedy[0] == "cancel":
        cli.ok("retry", "job", now=str(_at(2)))
    nxt = ("claim", "--next", "--owner", "w2", "--lease", "30s")
    assert cli(*nxt, now=str(_at(29))).code == 7  # nothing ready: the old lease is live
    # A claim by key is a person's choice, and keeps Go's behaviour.
    fence = cli.ok("claim", "job", "--owner", "w2", "--lease", "30s", now=str(_at(3))).stdout
    cli.ok("release", "job", "--owner", "w2", "--fence", fence.strip(), now=str(_at(4)))
    assert cli.ok(*nxt, now=str(END)).stdout.split()[0] == "job"


def test_a_batch_rebase_holds_too(cli: Cli) -> None:
    cli.ok("admit", "job")
    cli.ok("claim", "job", "--owner", "w1", "--lease", "30s", now=str(T))
    cli.ok("admit", "--batch", "-", input='{"key":"job","seq":2}\n', now=str(_at(1)))
    assert cli("claim", "--next", "--owner", "w2", "--lease", "1m", now=str(_at(29))).code == 7
