"""`ledger serve`: a read-only web view of the ledger for on-call.

`server.py` binds the standard library's `ThreadingHTTPServer` and routes GET
and HEAD (anything else is 405, after the token: 401 first); `auth.py` checks
the bearer token or the session cookie; `api.py` reads the store (one open
store, one reader at a time) into the shapes of the CLI's `--json`; `pages.py` renders them as HTML,
every untrusted string through `html.escape`; `static/app.js` polls `/api/`
for what changed and writes it with `textContent` only.
"""
