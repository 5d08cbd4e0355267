"""Every documented exit code (docs/design.md §4.4), table-driven; errors are one line on
stderr, and with --json also an error object on stdout; a refused command
writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ledger_cli.cli import context
from ledger_cli.errors import StoreError
from tests.cli_support import Cli, make_cli


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    c = make_cli(monkeypatch)
    c.ok("admit", "pending")
    c.ok("admit", "held")
    c.ok("claim", "held", "--owner", "w", "--lease", "1h")
    c.ok("admit", "root")
    c.ok("admit", "child", "--needs", "root")
    c.ok("claim", "root", "--owner", "w", "--lease", "1h")
    c.ok("complete", "root", "--owner", "w", "--fence", "1", "--failed")
    return c


def _store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(url: str, create: bool = True, existing: bool = False) -> object:
        raise StoreError("ledger: store: /nowhere: cannot open the store directory")

    monkeypatch.setattr(context, "open_store", broken)


def _bug(monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger_cli.engine.ledger import Ledger

    def boom(*args: object) -> int:
        raise RuntimeError("something broke")

    monkeypatch.setattr(Ledger, "claim", boom)


Setup = Callable[[pytest.MonkeyPatch], None] | None

CASES: list[tuple[int, str, list[str], str | None, Setup]] = [
    (0, "admit duplicate", ["admit", "pending"], None, None),
    (1, "blocked: no", ["blocked", "pending"], None, None),
    (2, "unknown option", ["claim", "held", "--bogus"], None, None),
    (2, "missing option", ["claim", "held", "--owner", "w"], None, None),
    (2, "bad duration", ["claim", "pending", "--owner", "w", "--lease", "5x"], None, None),
    (2, "bad JSON", ["admit", "new", "--task", "{nope}"], None, None),
    (2, "duplicate JSON key", ["admit", "new", "--task", '{"a":1,"a":2}'], None, None),
    (2, "NaN", ["admit", "new", "--task", "[NaN]"], None, None),
    (2, "number out of range", ["admit", "new", "--task", "1e999"], None, None),
    (2, "too deep", ["admit", "new", "--task", "[" * 513 + "]" * 513], None, None),
    (2, "lone surrogate", ["admit", "new", "--task", '"\\ud800"'], None, None),
    (2, "invalid UTF-8", ["admit", "new", "--task-file", "-"], "BADUTF8", None),
    (2, "empty key", ["admit", ""], None, None),
    (2, "control char key", ["admit", "a\tb"], None, None),
    (2, "key too long", ["admit", "k" * 1025], None, None),
    (2, "negative seq", ["admit", "new", "--seq", "-1"], None, None),
    (
        2,
        "overflowing fence",
        ["release", "held", "--owner", "w", "--fence", str(2**64)],
        None,
        None,
    ),
    (2, "empty owner", ["claim", "pending", "--owner", "", "--lease", "1m"], None, None),
    (2, "non-positive lease", ["claim", "pending", "--owner", "w", "--lease", "0s"], None, None),
    (2, "unknown status", ["list", "--status", "done"], None, None),
    (2, "bad --now", ["--now", "yesterday", "state", "pending"], None, None),
    (3, "no record", ["state", "ghost"], None, None),
    (3, "claim no record", ["claim", "ghost", "--owner", "w", "--lease", "1m"], None, None),
    (4, "lease active", ["claim", "held", "--owner", "x", "--lease", "1m"], None, None),
    (4, "not stale", ["takeover", "held", "--owner", "x", "--lease", "1m"], None, None),
    (5, "fenced", ["renew", "held", "--owner", "w", "--fence", "9", "--lease", "1m"], None, None),
    (6, "not claimed", ["complete", "pending", "--owner", "w", "--fence", "0"], None, None),
    (6, "blocked", ["claim", "child", "--owner", "w", "--lease", "1m"], None, None),
    (7, "nothing ready", ["claim", "--next", "--owner", "w", "--lease", "1m"], None, None),
    (8, "self need", ["admit", "selfish", "--needs", "selfish"], None, None),
    (8, "bad snapshot", ["restore", "-"], '{"Tasks":[{"Key":"k","Status":"nope"}]}', None),
    (8, "undecodable snapshot", ["restore", "-"], '{"Tasks":[{"Sequence":-1}]}', None),
    (9, "store failed", ["state", "pending"], None, _store_error),
    (70, "bug", ["claim", "pending", "--owner", "w", "--lease", "1m"], None, _bug),
]


def _ids() -> list[str]:
    return [f"{code}-{name}" for code, name, *_ in CASES]


@pytest.mark.parametrize(("code", "name", "args", "stdin", "setup"), CASES, ids=_ids())
@pytest.mark.parametrize("json_mode", [False, True], ids=["text", "json"])
def test_exit_code(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    name: str,
    args: list[str],
    stdin: str | None,
    setup: Setup,
    json_mode: bool,
) -> None:
    pending = "pending" if code == 7 else None
    if pending:  # make sure nothing is ready: take the one pending task
        cli.ok("claim", "pending", "--owner", "w", "--lease", "1h")
    before = (cli.dump(), list(cli.store.read_history()))  # type: ignore[attr-defined]
    if setup is not None:
        setup(monkeypatch)
    data: str | bytes | None = b'"\xff"' if stdin == "BADUTF8" else stdin
    res = cli(*(["--json"] if json_mode else []), *args, input=data)
    assert res.code == code, (res.stdout, res.stderr)
    if code in (0, 1):
        assert res.stderr == ""
        return
    assert "Traceback" not in res.stderr
    err_lines = res.stderr.splitlines()
    if code == 2 and res.stderr.startswith("Usage:"):
        # click's conventional usage error: usage, hint, blank, error
        assert err_lines[-1].startswith("Error: ")
    else:
        assert len(err_lines) == 1, res.stderr
        assert err_lines[0].startswith(("ledger: ", "line "))
    if json_mode:
        doc = json.loads(res.stdout)
        assert set(doc) == {"error"}
        assert doc["error"]["exit"] == code
        assert isinstance(doc["error"]["code"], str) and doc["error"]["message"]
    else:
        assert res.stdout == ""
    if code not in (6, 9, 70) or name == "not claimed":
        # Refused: nothing written, no history. (Claim of a record with a failed
        # ancestor writes the block, as Go's does.)
        assert (cli.dump(), list(cli.store.read_history())) == before  # type: ignore[attr-defined]


def test_engine_messages_are_exact(cli: Cli) -> None:
    res = cli("renew", "held", "--owner", "w", "--fence", "9", "--lease", "1m")
    assert res.stderr == "ledger: fence token is stale (the current fence of held is 1)\n"
    res = cli("--json", "claim", "held", "--owner", "x", "--lease", "1m")
    assert json.loads(res.stdout) == {
        "error": {
            "code": "lease_active",
            "message": "ledger: lease is still active (held is claimed by w)",
            "exit": 4,
        }
    }


def test_debug_traceback_only_with_ledger_debug(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _bug(monkeypatch)
    quiet = cli("claim", "pending", "--owner", "w", "--lease", "1m")
    assert quiet.code == 70 and "Traceback" not in quiet.stderr
    assert quiet.stderr == (
        "ledger: internal error: RuntimeError: something broke "
        "(set LEDGER_DEBUG=1 for a traceback)\n"
    )
    loud = cli("claim", "pending", "--owner", "w", "--lease", "1m", env={"LEDGER_DEBUG": "1"})
    assert loud.code == 70 and "Traceback" in loud.stderr and "something broke" in loud.stderr
