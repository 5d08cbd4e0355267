"""Write docs/reference.md from the CLI itself.

    .venv/bin/python docs/make_reference.py          # rewrite docs/reference.md
    .venv/bin/python docs/make_reference.py --check  # exit 1 when it is stale

The commands, their arguments, options, help and examples are read from the
Typer app (`ledger_cli.cli.declarations.build_cli()`); the error codes and their
exit codes from the error classes (`ledger_cli.errors`). What the code keeps in
no one place (what each exit code means, the environment variables, each
command's `--json` shape) is the data below, and `render()` refuses to write
a page missing a command, an exit code or an environment variable the code
uses. `tests/docs/test_reference.py` fails when the page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "reference.md"

EXIT_CODES: dict[int, str] = {
    0: "success (an admit `duplicate` included)",
    1: '"no" from a predicate: `ledger blocked KEY` when KEY is not blocked; '
    "`run --drain` when any command failed; `wait` when a task failed or is blocked; "
    "`output` when the key has no recorded run (or no attempt N)",
    2: "usage error: bad option, bad duration, bad JSON, bad key, empty owner, "
    "non-positive lease (or a lease or delay under 0.001ms, the clock's resolution), "
    "unknown status, an input over its size limit, "
    "an empty `--store`/`LEDGER_STORE`, an unknown store URL scheme, a malformed PostgreSQL URL,"
    " a store URL naming the other kind of store",
    3: "the key has no record",
    4: (
        "a live lease is in the way (`claim` of a claimed task, `takeover` of a live lease;"
        " `claim KEY`, or `renew`/`takeover` of an expired lease, in a queue at its limit)"
    ),
    5: "the fence is stale: this caller no longer owns the task (`ledger run`: the lease was lost; "
    "`output --follow`: the attempt was abandoned, its runner gone and the lease it ran under "
    "over)",
    6: "the record is not in a state that allows this (terminal, blocked, not claimed; "
    "`retry` of a task that is not failed, `cancel` of a finished one)",
    7: "nothing is ready to claim (`claim --next`, `run --next`), or claiming is paused",
    8: "invalid data: a record or snapshot fails validation or decoding; "
    "a batch line the ledger refused; `admit`: a conflict (the key holds another task), "
    "or needs that would close a cycle",
    9: "the store failed (unreadable, corrupt, locked too long, unreachable); "
    "`doctor` found a problem; a read command (`list`, `stats`, `state`, `log`, `wait`…), "
    "or `claim --next`/`run --next` without `--wait`, "
    "on a `--store`/`LEDGER_STORE` path that does not exist: `no store at PATH` "
    "(only a write creates a store, and a read creates no file; the default store "
    "may be missing: a fresh user's `list` is empty); `list` on a store holding a record "
    "that does not decode, after printing every record that does (one line names the bad "
    "ones; `snapshot` then writes nothing)",
    70: "a bug: one line on stderr; set `LEDGER_DEBUG=1` for the traceback",
    74: "the output could not be written to stdout (closed, disk full, I/O error): "
    "one line on stderr, ending `(the command's write was committed)` when it was; "
    "a command that failed for its own reason keeps its own code",
    124: "`wait --timeout` ran out; `run --timeout` stopped the last attempt",
    126: "`ledger run`: the command cannot be executed",
    127: "`ledger run`: the command was not found",
    130: "interrupted (Ctrl-C) outside `ledger run`; `log --follow` and `watch` "
    "are left with Ctrl-C and exit 0 (or, for `watch`, its last refresh's error)",
    141: "the output pipe was closed early (`ledger list | head`): quiet",
}
"""Every exit code a command can end with (`ledger run` otherwise exits with its
command's own status, and 128+N when signal N ended it)."""

OTHER_CODES: dict[str, tuple[str, str]] = {
    "conflict": (
        "8",
        "`admit` (and each line of `admit --batch`): the key holds another task (a "
        'different task, needs or queue); the object keeps `"outcome": "conflict"` and '
        'the stored `"record"` beside `"error"`',
    ),
    "cannot_run": (
        "126, 127",
        "`ledger run`: the command cannot be started (126: not executable; 127: not found); "
        "its task is released",
    ),
    "internal": ("70", "an unexpected error: a bug"),
}
"""The `--json` error codes no error class carries (`error_object` called with
the code itself); `tests/docs/test_error_codes.py` finds every code the
package emits and fails on one the table lacks."""

ENVIRONMENT: dict[str, str] = {
    "LEDGER_STORE": "the store URL or path, when `--store` is not given "
    "(set but empty: a usage error, exit 2)",
    "LEDGER_ACTOR": "who is writing, when `--actor` is not given (default `user@host`)",
    "LEDGER_NOW": "an RFC 3339 instant to use as the clock, when `--now` is not given "
    "(replays and tests)",
    "LEDGER_HOST": "the host name `ledger run` records in its attempts (default: the "
    "machine's name; a container's random one is no help to a person)",
    "LEDGER_DEBUG": "`1`: print the traceback of an unexpected error (exit 70)",
    "LEDGER_ALLOW_NETWORK_FS": "`1`: let the JSON store open a directory on a network "
    "file system (its locks do not exclude other hosts)",
    "NO_COLOR": "set: no colour on a terminal",
    "LEDGER_KEY": "set by `ledger run` for its command: the task's key",
    "LEDGER_FENCE": "set by `ledger run` for its command: the fence of its claim",
    "LEDGER_TASK": "set by `ledger run` for its command: the task payload as JSON",
    "LEDGER_ATTEMPT": "set by `ledger run` for its command: 1, 2, … with `--retries`",
    "PGPASSWORD, PGPASSFILE, PGHOST, PGUSER, PGDATABASE, PGSSLMODE, …": "libpq's own "
    "variables, read for a `postgresql://` store (keep the password out of the URL)",
}

RECORD = (
    '`{"Key","Status","Sequence","Owner","Fence","LeaseUntil","Needs","BlockedBy",'
    '"Task","Rev","CreatedBy","CreatedAt","UpdatedBy","UpdatedAt"}`'
)

JSON_SHAPES: dict[str, str] = {
    "admit": '`{"key", "admitted", "outcome", "record"}` (a conflict adds `"error"`); '
    '`--batch`: an array of `{"line", "key", "admitted", "outcome", "record"}` '
    'or `{"line", "key", "error"}`',
    "claim": '`{"key", "fence", "record"}`; `--next`: `{"key", "fence", "record", "task"}`',
    "takeover": '`{"key", "fence", "record"}`',
    "renew": '`{"key", "record"}`',
    "release": '`{"key", "record"}`',
    "complete": '`{"key", "record"}`',
    "state": 'the record, with `"attempts"` added (the design.md §7.1 fields of each kept '
    'attempt, and `"abandoned"`: no end recorded and the lease it ran under is over)',
    "blocked": '`{"key", "blocked", "blocked_by"}` (exit 1 when not blocked)',
    "list": "an array of records (`--jsonl`: one record per line)",
    "prune": '`{"pruned", "dry_run"}`',
    "tree": '`{"failed": [{"key", "pruned", "blocked", "dependents", "escaped", "exit", '
    '"signal", "timed_out"}]}`; with a key `{"key", "status", "pruned", "needs": '
    '[{"key", "status", "pruned", "blocked_by"}], "cycles": [[keys]]}` '
    "(a failed need adds `exit`, `signal`, `timed_out`; "
    "`status` null: never admitted; `pruned` true: a pruned record, shown with the "
    "status it keeps, listed when a listed task needs it; `cycles`: each cycle of needs "
    "below KEY, its first key again at its end)",
    "graph": '`{"nodes": [{"key", "status"}], "edges": [{"from", "to", "blocking"}]}` '
    '(`status` "missing": a need without a record; an edge runs from a need to the task that '
    "needs it; `blocking`: a failure, or a task it blocked, blocking the task)",
    "log": 'an array of `{"time", "actor", "event", "key", "fence", "data"}` '
    "(`--jsonl`: one per line)",
    "run": '`{"key", "fence", "status", "exit", "attempts", "attempt", "record"}` (`attempt`: the '
    "last attempt's fields, as `output` shows them; `--drain`: one per task), alone on stdout: "
    "under `--json` the "
    "command's own stdout goes to stderr, so `ledger --json run … | jq` reads the result",
    "output": '`{"key", "attempt": {"n", "fence", "try", "owner", "host", "pid", "started", '
    '"ended", "exit", "signal", "timed_out", "output_bytes", "kept_bytes", "abandoned"}, '
    '"output"}` (the output as UTF-8 text, invalid bytes as U+FFFD; `abandoned`: no end '
    "recorded and the lease it ran under is over, its runner gone)",
    "wait": '`{"settled": [{"key", "status", "blocked_by", "exit"}], "unsettled": [keys], '
    '"timed_out"}` (`exit`: the latest attempt\'s, null when none ran or a `cancel` was the '
    "last ending; `--all`: `settled` lists every failed and blocked record, and "
    "on a timeout `unsettled` every pending and claimed one)",
    "retry": '`{"key", "record", "unblocked": [keys]}`',
    "cancel": '`{"key", "record", "blocked": [keys]}`',
    "stats": '`{"counts": {"pending", "claimed", "completed", "failed", "blocked"}, "pruned", '
    '"ready", "expired_leases", "oldest_ready_age_seconds", "ready_invalid_keys", "paused", '
    '"scheduled", "queues": {NAME: {"pending", "claimed", "ready", "limit", "held"}}}` '
    "(`queues`: `default`, each queue with a limit and each queue the store keeps a task "
    "of, of any status, pruned ones included, so a drained queue reads 0s; with `--queue`, "
    "the named ones only; the age null with nothing ready; `ready_invalid_keys`: tasks "
    "ready by the rule but keyed with bytes that are not valid UTF-8, as another program "
    "such as the Go service may write them: `claim --next` never hands one out, so "
    "`ready` and the age leave them out and count them here; `ledger doctor` names them)",
    "check": '`{"key", "owner", "fence", "lease_until", "left_seconds"}`',
    "pause": '`{"paused", "changed", "since", "actor", "reason"}`',
    "resume": '`{"paused", "changed"}`',
    "limit": 'setting: `{"queue", "limit", "held"}` (`limit` null once cleared); '
    'listing: `[{"queue", "limit", "held"}]`',
    "watch": "none: `watch` needs a terminal (exit 2 outside one)",
    "serve": "none: it prints its URL, then serves JSON under `/api/` in the shapes of "
    "`list`, `state`, `output` and `stats` (README: The web view)",
    "snapshot": 'the snapshot itself (`-o F`: `{"output", "records"}`)',
    "restore": '`{"restored", "already_there"}`',
    "doctor": '`{"store", "records", "pruned", "problems", "notes", "fixed"}` (`records` '
    "null when doctor could not count them: a `records/` it cannot walk, a `wal.log` it cannot "
    "replay; a damaged record file is counted out and named among the problems; `pruned` null "
    "too then, or when the pruned keys could not be read)",
    "demo": '`{"store", "runs", "records"}`',
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _usage(name: str, command: Any, ctx: Any) -> str:
    pieces = command.collect_usage_pieces(ctx)
    line = " ".join(["ledger", name, *pieces])
    if command.__class__.__name__ == "RunCommand":
        line += " -- CMD [ARG…]"
    return line


def _examples(epilog: str | None) -> list[str]:
    if not epilog:
        return []
    _, _, body = epilog.partition("\b\n")
    return [line.strip() for line in body.splitlines() if line.strip()]


def _param_rows(params: list[Any]) -> list[str]:
    rows = []
    for p in params:
        if p.param_type_name == "argument":
            label = f"`{p.metavar or p.name.upper()}`"
            value = ""
        else:
            label = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
            value = "" if p.is_flag else f"`{p.metavar}`" if p.metavar else ""
        meaning = _cell(p.help or "")
        if p.required:
            meaning += " (required)"
        rows.append(f"| {label} | {value} | {meaning} |")
    return rows


def render() -> str:
    from ledger_cli import errors
    from ledger_cli.cli import context
    from ledger_cli.cli.declarations import build_cli
    from ledger_cli.cli.declarations.base import _GLOBAL_NAMES
    from ledger_cli.cli.typer_compat import Context

    _import_every_module()  # error classes live beside their commands too (cli/commands/claim.py…)
    group: Any = build_cli()
    root = Context(group, info_name="ledger")
    names = list(group.commands)
    missing = sorted(set(names) - set(JSON_SHAPES))
    assert not missing, f"no --json shape in make_reference.py for: {missing}"
    classes = [errors.LedgerError, *_subclasses(errors.LedgerError)]
    codes = {c.exit_code for c in classes}
    assert codes <= set(EXIT_CODES), f"exit codes not described: {codes - set(EXIT_CODES)}"
    for var in (context.ENV_STORE, context.ENV_ACTOR, context.ENV_NOW):
        assert var in ENVIRONMENT, var

    out = [
        "# Reference",
        "",
        "<!-- Generated by docs/make_reference.py from the CLI itself; do not edit. -->",
        "<!-- Regenerate: .venv/bin/python docs/make_reference.py -->",
        "",
        "Every command, option, environment variable, exit code and `--json` shape of",
        "`ledger`. For workflows see [the guide](guide.md); for the stores,",
        "[stores.md](stores.md).",
        "",
        "- [Global options](#global-options)",
        "- [Commands](#commands): " + ", ".join(f"[{n}](#ledger-{n})" for n in names),
        "- [Environment](#environment)",
        "- [Exit codes](#exit-codes)",
        "- [Error codes](#error-codes)",
        "- [JSON output](#json-output)",
        "",
        "## Global options",
        "",
        "Accepted before the command name and after it (the later one wins):",
        "",
        "| option | value | meaning |",
        "|---|---|---|",
    ]
    group_params = [p for p in group.params if p.name in _GLOBAL_NAMES or p.name == "version"]
    out += _param_rows(group_params)
    out += ["", "Before the command name only:", ""]
    out += ["| option | value | meaning |", "|---|---|---|"]
    for p in group.params:
        if p.name in ("install_completion", "show_completion"):
            out.append(f"| `{p.opts[0]}` | `[SHELL]` | {_cell(p.help or '')} |")
    out += ["", "## Commands", ""]
    for name in names:
        command = group.commands[name]
        ctx = Context(command, info_name=name, parent=root)
        own = [p for p in command.params if p.name not in _GLOBAL_NAMES]
        out += [f"### `ledger {name}`", "", "```text", _usage(name, command, ctx), "```", ""]
        out += [" ".join((command.help or "").split()), ""]
        if own:
            out += ["| argument / option | value | meaning |", "|---|---|---|"]
            out += _param_rows(own)
            out.append("")
        examples = _examples(command.epilog)
        if examples:
            out += ["<!-- illustration -->", "```sh", *examples, "```", ""]
        out += [f"`--json`: {JSON_SHAPES[name]}.", ""]
    out += ["## Environment", "", "| variable | meaning |", "|---|---|"]
    out += [f"| `{k}` | {_cell(v)} |" for k, v in ENVIRONMENT.items()]
    out += ["", "## Exit codes", "", "| code | meaning |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in sorted(EXIT_CODES.items())]
    out += [
        "",
        "`ledger run` otherwise exits with its command's status (128+N when signal N",
        "ended it). SIGINT, SIGTERM or SIGHUP sent to `ledger run` itself stops the",
        "command (SIGHUP is passed on as SIGTERM), releases its task and exits 128+N",
        "(130, 143, 129; under `nohup` SIGHUP stays ignored).",
        "",
        "An error is one line on stderr, the ledger's exact message",
        "(`ledger: fence token is stale`), then what the caller needs: the key",
        "(`ledger: key has no record: nope`) or the state of the record that refused",
        "the call (`ledger: record is not claimed (r4 is completed)`, `… (merge-a is",
        "blocked by part-03)`). A usage error the parser finds (an unknown command or",
        "option, a missing argument or option) shows the usage line and hint first; one",
        "found after parsing (a bad duration or JSON, `ledger: wait needs a KEY (or",
        "--all)`, `ledger: --kill-after goes with --timeout`) is the one line.",
        "",
        "## Error codes",
        "",
        'With `--json` an error is `{"error": {"code", "message", "exit"}}` on stdout.',
        "",
        "| code | exit | message, or what it is raised for |",
        "|---|---|---|",
    ]
    seen: set[str] = set()
    for cls in sorted(classes[1:], key=lambda c: (c.exit_code, c.code)):
        if cls.code in seen:
            continue
        seen.add(cls.code)
        own = cls.message and cls.message != cls.__mro__[1].message  # not a parent's sentinel
        doc = f"`{cls.message}`" if own else (cls.__doc__ or "").strip().split("\n\n")[0]
        if cls.code == "usage":
            doc += " (also every usage error the argument parser finds)"
        out.append(f"| `{cls.code}` | {cls.exit_code} | {_cell(doc)} |")
    from ledger_cli.cli.inputs import INPUT_CODES

    for code, doc in sorted(INPUT_CODES.items()):
        out.append(f"| `{code}` | 2 | {_cell(doc)} (a usage error) |")
    out += [f"| `{code}` | {ex} | {_cell(doc)} |" for code, (ex, doc) in OTHER_CODES.items()]
    out += [
        "",
        "## JSON output",
        "",
        "`--json` makes every command print JSON on stdout, errors included. Records are",
        "always the wire record objects of the Go package (the codec of `ledger snapshot`",
        f"and the JSON store): {RECORD}.",
        "",
        "| command | `--json` prints |",
        "|---|---|",
    ]
    out += [f"| `{n}` | {JSON_SHAPES[n]} |" for n in names]
    out.append('| any error | `{"error": {"code", "message", "exit"}}` |')
    return "\n".join(out) + "\n"


def _import_every_module() -> None:
    import contextlib
    import pkgutil

    import ledger_cli

    for info in pkgutil.walk_packages(ledger_cli.__path__, "ledger_cli."):
        with contextlib.suppress(ImportError):  # an optional driver (psycopg) not installed
            __import__(info.name)


def _subclasses(cls: type) -> list[Any]:
    found: list[Any] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if OUT.read_text(encoding="utf-8") != text:
            print("docs/reference.md is stale: run .venv/bin/python docs/make_reference.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
