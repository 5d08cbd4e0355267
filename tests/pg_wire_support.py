"""Count client/server round trips to PostgreSQL: a TCP proxy in a thread.

    with WireCounter(upstream_conninfo) as wire:
        store = PostgresStore(wire.conninfo)  # talks through the proxy
        before = wire.snapshot()
        ...
        used = wire.snapshot() - before

A round trip is a turn of the conversation: the server's answer to client
bytes sent since its previous answer (the client is waiting for it). Pipelined
statements sent before one Sync are one turn. PostgreSQL sends nothing before
a Sync, Flush or simple Query, so the count does not depend on timing. The
frontend messages are parsed too: `queries` counts simple Query messages and
Execute messages (one statement each), for a report of what a turn carried.
"""

from __future__ import annotations

import dataclasses
import selectors
import socket
import struct
import threading
from types import TracebackType
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict


@dataclasses.dataclass(frozen=True)
class Counts:
    turns: int = 0
    statements: int = 0

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.turns - other.turns, self.statements - other.statements)


class _Link:
    """One proxied connection: client socket, server socket, and its counts."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.client_sent = False  # client bytes since the server last answered
        self.buf = b""
        self.started = False  # the startup packet (no type byte) was seen
        self.turns = 0
        self.statements = 0

    def from_client(self, data: bytes) -> None:
        self.client_sent = True
        self.buf += data
        while True:
            if not self.started:
                if len(self.buf) < 8:
                    return
                (length,) = struct.unpack("!I", self.buf[:4])
                if len(self.buf) < length:
                    return
                self.buf = self.buf[length:]
                self.started = True
                continue
            if len(self.buf) < 5:
                return
            kind = self.buf[:1]
            (length,) = struct.unpack("!I", self.buf[1:5])
            if len(self.buf) < 1 + length:
                return
            if kind in (b"Q", b"E"):
                self.statements += 1
            self.buf = self.buf[1 + length :]

    def from_server(self) -> None:
        if self.client_sent:
            self.turns += 1
            self.client_sent = False


class WireCounter:
    """A proxy to the server of `conninfo`; `self.conninfo` goes through it."""

    def __init__(self, conninfo: str) -> None:
        params = conninfo_to_dict(conninfo)
        self._upstream = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        params.update(host="127.0.0.1", port=str(port), sslmode="disable", gssencmode="disable")
        self.conninfo = "postgresql://?" + urlencode(params, quote_via=quote)
        """A `postgresql://` URL (what `ledger --store` takes) through the proxy."""
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="wire-counter", daemon=True)

    def __enter__(self) -> WireCounter:
        self._thread.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._listener.close()

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(
                sum(link.turns for link in self._links),
                sum(link.statements for link in self._links),
            )

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.05):
                if key.data is None:
                    client, _addr = self._listener.accept()
                    server = socket.create_connection(self._upstream)
                    for s in (client, server):
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    link = _Link(client, server)
                    with self._lock:
                        self._links.append(link)
                    sel.register(client, selectors.EVENT_READ, (link, True))
                    sel.register(server, selectors.EVENT_READ, (link, False))
                    continue
                link, is_client = key.data
                src = link.client if is_client else link.server
                dst = link.server if is_client else link.client
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    for s in (link.client, link.server):
                        if s.fileno() != -1:
                            sel.unregister(s)
                            s.close()
                    continue
                with self._lock:
                    if is_client:
                        link.from_client(data)
                    else:
                        link.from_server()
                dst.sendall(data)
        for key in list(sel.get_map().values()):
            if key.data is not None:
                key.fileobj.close()  # type: ignore[union-attr]
        sel.close()
