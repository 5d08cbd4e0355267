"""Helpers for the command-line tests.

`Cli` runs the real entry point (`ledger_cli.cli.app.run`: the fast path and
the Typer app) inside typer's `CliRunner` isolation, against one shared
in-process store, so a test can chain commands. `T0` is the fixed clock.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ledger_cli.cli import app, context
from ledger_cli.engine.memstore import MemStore
from ledger_cli.engine.store import Store

T0 = "2026-01-02T03:04:05Z"
ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class _Unclosable:
    """A store proxy whose close() does nothing, so one MemStore outlives commands."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def close(self) -> None:
        pass


class Cli:
    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.runner = CliRunner()
        monkeypatch.setattr(
            context, "open_store", lambda url, create=True, existing=False: _Unclosable(store)
        )
        for var in ("LEDGER_STORE", "LEDGER_ACTOR", "LEDGER_NOW", "NO_COLOR", "LEDGER_DEBUG"):
            monkeypatch.delenv(var, raising=False)

    def __call__(
        self,
        *args: str,
        input: str | bytes | None = None,
        now: str | None = T0,
        env: Mapping[str, str | None] | None = None,
    ) -> Outcome:
        argv = ["--store", "memory:", "--actor", "tester"]
        if now is not None:
            argv += ["--now", now]
        argv += list(args)
        with self.runner.isolation(input=input, env=env) as (out, err, _):
            try:
                code = app.run(argv)
            except SystemExit as exc:  # --show-completion and friends
                code = int(exc.code or 0)
            sys.stdout.flush()
            sys.stderr.flush()
            return Outcome(code, out.getvalue().decode(), err.getvalue().decode())

    def ok(self, *args: str, **kw: Any) -> Outcome:
        res = self(*args, **kw)
        assert res.code == 0, (res.code, res.stdout, res.stderr)
        return res

    def dump(self) -> list[tuple[str, str, int]]:
        return [(r.key, r.status, r.fence) for r in self.store.range()]


def make_cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(MemStore(), monkeypatch)


def ledger_cmd() -> list[str]:
    return [sys.executable, "-m", "ledger_cli"]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.pop("NO_COLOR", None)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_ledger(
    store: str | Path, *args: str, input: bytes | None = None, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_cmd(), "--store", str(store), *args],
        input=input.decode() if input is not None else None,
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=timeout,
        check=False,
    )


def run_sane(store: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ledger --store STORE ARGS` as a fresh process that, whatever its exit,
    never crashed (no exit 70, no traceback)."""
    res = run_ledger(store, *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def ledger_ok(store: str | Path, *args: str) -> str:
    """The stdout of `ledger --store STORE ARGS`, a fresh process that must exit 0."""
    res = run_ledger(store, *args)
    assert res.returncode == 0, (args, res.stderr)
    return res.stdout


def state_attempts(
    store: str | Path, key: str = "job", timeout: float = 60
) -> list[dict[str, Any]]:
    """KEY's attempts as `ledger --json state KEY` shows them, a fresh process."""
    res = run_ledger(store, "--json", "state", key, timeout=timeout)
    assert res.returncode == 0, res.stderr
    attempts: list[dict[str, Any]] = json.loads(res.stdout)["attempts"]
    return attempts


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def start_ledger(
    store: str | Path, *args: str, cwd: Path, session: bool = False
) -> subprocess.Popen[str]:
    """`ledger --store STORE ARGS` started in `cwd`, its stdout dropped and its
    stderr piped; `session`: in a session of its own (a signal sent to it
    reaches it alone, as from `kill`)."""
    return subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), *args],
        cwd=cwd,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=session,
    )


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln]


def args_of(*parts: str | Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in parts:
        out.extend([p] if isinstance(p, str) else p)
    return out
