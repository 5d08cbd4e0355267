"""A refused PostgreSQL login told from an outage (docs/design.md §3.4).

A failed connection attempt is an outage (StoreUnavailableError: the server
restarting or shutting down, a refused or cut connection, too many clients)
unless the server answered and turned this login down for good: a wrong
password, an unknown role or database, no pg_hba.conf entry for this client,
no CONNECT privilege. Trying again changes nothing then, so it is a
StoreLoginError, and the commands that ride out outages (cli/outage.py) exit
9 at once instead of retrying until `--give-up-after`.

libpq keeps the SQLSTATE of an error at start-up to itself: psycopg's error
has no `sqlstate` and an empty `diag` there (psycopg/psycopg#1188). So the
verdicts are told by `pgconn.needs_password` (the server asked for a password
and none was given: libpq's own flag) and by the server's message, in
PostgreSQL's English. A server whose `lc_messages` is another language words
its refusals otherwise: they stay outages, as they were. Whatever is not
recognised stays an outage: a verdict taken for an outage costs a wait up to
`--give-up-after`; an outage taken for a verdict would give up on a server
that was coming back.
"""

from __future__ import annotations

import re
from typing import Any

_VERDICT = (
    # 28P01, 28000: "password authentication failed for user", and every other
    # method's ("Ident", "peer", "PAM", "LDAP", "certificate"…).
    r'authentication failed for user "'
    # 28000: an unknown role (trust or peer auth), a role without LOGIN.
    r'|role ".*" (?:does not exist|is not permitted to log in)'
    # 28000: pg_hba.conf has no line letting this user in from here.
    r"|no pg_hba\.conf entry for |pg_hba\.conf rejects connection"
    # 3D000: no such database.
    r'|database ".*" does not exist'
    # 42501: no CONNECT privilege on the database.
    r'|permission denied for database "'
)
"""The server's refusals that are verdicts (PostgreSQL's messages, in English,
with their SQLSTATE). Not here, so outages: 57P03 (`the database system is
starting up`, `… shutting down`, `… in recovery mode`, `… not yet accepting
connections`), 53300 (`sorry, too many clients already`, `remaining connection
slots are reserved …`, `too many connections for role …`)."""

_SERVER_TEXT = r"(?:FATAL|ERROR):\s+(.*)$"
_HOST_PREFIX = " failed: "
"""libpq's prefix of each attempt's error: `connection to server at "H", port P failed: `."""


def refusal(exc: BaseException, text: str) -> str | None:
    """The reason the server gave for refusing the login, when `exc` (a failed
    `psycopg.connect`, `text` its message on one line) is a verdict; None for
    an outage."""
    pgconn: Any = getattr(exc, "pgconn", None)
    needs_password = bool(getattr(pgconn, "needs_password", False))
    if not needs_password and re.search(_VERDICT, text) is None:
        return None
    server = re.search(_SERVER_TEXT, text)
    if server is not None:
        return server.group(1)
    return text.rpartition(_HOST_PREFIX)[2] or text
