"""Outages for the fault tests of tests/faults/test_faults_outage.py: a throwaway
PostgreSQL server that can be restarted (`pg_ctl restart -m fast|immediate`),
and a loopback TCP proxy that cuts or stalls the connections through it.

The server is its own cluster (initdb in a temporary directory, a free
port), never the shared 5432 one: restarting that would cut other tests'
connections. As root, initdb and pg_ctl run as the `postgres` user (initdb
refuses root). When no server can be started the tests skip with the reason,
and fail under CI.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sql_support import in_ci


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _skip(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI is set and {reason}", pytrace=False)
    pytest.skip(reason)


class PgServer:
    """A PostgreSQL cluster of the test's own, listening on 127.0.0.1:port."""

    def __init__(self, bindir: Path, root: Path, port: int) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.port = port
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"postgresql://ledger@127.0.0.1:{self.port}/postgres?connect_timeout=5"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stdout}{done.stderr}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "ledger", "--no-sync")
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c shared_buffers=16MB -c max_connections=40"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", opts, "-w", "start"
        )

    def restart(self, mode: str) -> None:
        """`pg_ctl restart -m MODE`: every connection is cut; back when this returns."""
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-m",
            mode,
            "-w",
            "restart",
        )
        self.restarts += 1

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")


@contextlib.contextmanager
def pg_server() -> Iterator[PgServer]:
    """A throwaway server; skip (fail under CI) when none can be started."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _skip("psycopg is not installed (pip install 'ledger_cli[postgres]')")
    bindir = _bindir()
    if bindir is None:
        _skip("no PostgreSQL server binaries (initdb, pg_ctl): install postgresql-15")
    assert bindir is not None
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        _skip("running as root without runuser: initdb refuses root")
    root = Path(tempfile.mkdtemp(prefix="ledger-outage-pg-"))
    server = PgServer(bindir, root, free_port())
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        try:
            server.init()
        except (RuntimeError, OSError, LookupError, subprocess.TimeoutExpired) as exc:
            _skip(f"cannot start a throwaway PostgreSQL server: {str(exc).strip()[:300]}")
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


class Proxy:
    """A TCP proxy on 127.0.0.1 (its own event loop in a thread) in front of
    `target_port`. `cut()` closes every connection through it; `stall()`
    stops moving bytes (and leaves new connections hanging) until `resume()`."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.cuts = 0
        self.stalls = 0
        self.refusing = False
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> Proxy:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        assert self._flowing is not None
        self.refusing = True
        self._flowing.set()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.wait(tasks, timeout=10) if tasks else None

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0)
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        if self.refusing:
            writer.transport.abort()
            return
        self._writers.add(writer)
        try:
            await self._flowing.wait()
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
            self._writers.add(up_w)
            await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in list(self._writers):
                if w is writer or w.get_extra_info("peername") is None:
                    self._writers.discard(w)
            writer.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        try:
            while data := await src.read(65536):
                await self._flowing.wait()
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()

    def _call(self, fn: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(30)

    def cut(self) -> None:
        """Close every connection through the proxy (both sides), at once."""

        def cut() -> None:
            for w in list(self._writers):
                transport = w.transport
                transport.abort()
            self._writers.clear()

        self._call(cut)
        self.cuts += 1

    def down(self) -> None:
        """Cut every connection and refuse new ones (closed at once) until `up()`."""
        self.refusing = True
        self.cut()

    def up(self) -> None:
        self.refusing = False

    def stall(self) -> None:
        assert self._flowing is not None
        self._call(self._flowing.clear)
        self.stalls += 1

    def resume(self) -> None:
        assert self._flowing is not None
        self._call(self._flowing.set)
