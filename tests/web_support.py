"""`ledger serve` as a real process on a free port, for the web tests.

`Served` starts `ledger --store STORE serve --bind 127.0.0.1:0 [--token T]`,
reads the URL the command prints on its first line, and stops the process at
the end; `get` is a small urllib client that never follows redirects.
"""

from __future__ import annotations

import http.client
import json
import queue
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

START_TIMEOUT = 60.0
"""Seconds the server has to print its URL (a busy CI machine)."""


class Reply(NamedTuple):
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.stderr = ""
        """What the server wrote on stderr, once it has stopped (after `served`)."""

    def request(self, method: str, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, headers=dict(headers or {}))
            res = conn.getresponse()
            return Reply(res.status, res.headers, res.read())
        finally:
            conn.close()

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers)


def _first_line(proc: subprocess.Popen[str]) -> str:
    """The first stdout line, or an AssertionError with stderr if none comes."""
    got: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: got.put(out.readline()), daemon=True).start()
    try:
        line = got.get(timeout=START_TIMEOUT)
    except queue.Empty:
        line = ""
    if not line:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"ledger serve printed no URL; stderr: {err!r}")
    return line.strip()


@contextmanager
def served(store: str | Path, *args: str, **env: str) -> Iterator[Served]:
    proc = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "serve", "--bind", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(**env),
    )
    web: Served | None = None
    try:
        url = _first_line(proc)
        assert url.startswith("http://127.0.0.1:"), url
        web = Served(proc, url)
        yield web
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if web is not None:
            web.stderr = err


def admit(store: str | Path, key: str, *args: str) -> None:
    done = run_ledger(store, "admit", key, *args)
    assert done.returncode == 0, done.stderr


def wait_for(check: Any, what: str, timeout: float = 60.0) -> Any:
    """Poll `check()` until it returns something truthy (a state, not a time)."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
