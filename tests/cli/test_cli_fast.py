"""The fast path (no typer import) agrees with the Typer app: same option
table, same behaviour; it declines whatever it is unsure of; and the hot
commands import neither typer nor rich."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_cli.cli import fast
from ledger_cli.cli.declarations import build_cli
from tests.cli_support import Cli, Outcome, make_cli, subprocess_env


def _click_table(
    name: str,
) -> tuple[dict[str, tuple[str, bool, bool, bool]], list[tuple[str, bool]]]:
    group = build_cli()
    command = group.commands[name]  # type: ignore[attr-defined]
    options: dict[str, tuple[str, bool, bool, bool]] = {}
    positionals: list[tuple[str, bool]] = []
    for param in command.params:
        if param.param_type_name == "argument":
            positionals.append((param.name, param.required))
            continue
        for opt in param.opts:
            if opt in ("--help", "-h") or opt in fast.GLOBAL:
                continue
            options[opt] = (param.name, bool(param.is_flag), param.multiple, param.required)
    return options, positionals


@pytest.mark.parametrize("name", sorted(fast.COMMANDS))
def test_fast_table_matches_the_click_command(name: str) -> None:
    spec = fast.COMMANDS[name]
    options, positionals = _click_table(name)
    mine = {o: (opt.dest, opt.flag, opt.multiple, opt.required) for o, opt in spec.options.items()}
    assert mine == options
    assert list(spec.positionals) == positionals


def test_global_options_match_the_group() -> None:
    group = build_cli()
    names = {o for p in group.params for o in p.opts if o.startswith("--")}
    assert set(fast.GLOBAL) <= names
    for command in group.commands.values():  # type: ignore[attr-defined]
        opts = {o for p in command.params for o in p.opts}
        assert set(fast.GLOBAL) <= opts, command.name


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["admit", "--help"],
        ["admit", "-h"],
        ["claim", "k", "--owner", "o"],  # --lease missing
        ["claim", "k", "--owner"],  # value missing
        ["claim", "k", "--bogus", "x", "--owner", "o", "--lease", "1m"],
        ["renew", "k", "--owner", "o", "--fence", "1"],
        ["complete", "k", "--owner", "o", "--fence", "1", "--failed=yes"],
        ["admit", "a", "b"],
        ["admit", "--", "a"],
        ["admit", "-x"],
        ["list"],
        ["--bogus", "admit", "a"],
        ["run", "k", "--owner", "o", "--lease", "1m"],  # no command: the usage error is click's
        ["run", "k", "--owner", "o", "--lease", "1m", "--"],
        ["list", "--status", "pending"],  # a table: rich's
        ["--json", "list"],
    ],
)
def test_fast_path_declines(args: list[str]) -> None:
    assert fast.parse(args) is None


def test_fast_path_takes_global_options_anywhere() -> None:
    parsed = fast.parse(
        ["--json", "--store=x", "claim", "--owner", "o", "k", "--lease", "1m", "--actor", "me"]
    )
    assert parsed is not None
    assert parsed.settings == {"json": True, "store": "x", "actor": "me"}
    assert parsed.kwargs == {
        "key": "k",
        "owner": "o",
        "lease": "1m",
        "next_": False,
        "wait": None,
        "give_up_after": None,
    }


SCRIPT: list[list[str]] = [
    ["admit", "a", "--task", '{"n": 1}'],
    ["admit", "a", "--task", '{"n": 1.0}'],
    ["admit", "b", "--needs", "a", "--needs=c", "--seq", "3", "--json"],
    ["admit", "bad", "--seq", "x"],
    ["admit", "bad", "--task", "[1,]"],
    ["admit", "--batch", "-"],
    ["claim", "a", "--owner", "w", "--lease", "5m"],
    ["claim", "a", "--owner", "w", "--lease", "5m"],
    ["--json", "claim", "--owner", "w", "--lease", "5m", "--next"],
    ["claim", "--next", "--owner", "w", "--lease", "5m", "--wait", "0s"],
    ["renew", "a", "--owner", "w", "--fence", "1", "--lease", "1h", "--json"],
    ["renew", "a", "--owner", "w", "--fence", "7", "--lease", "1h"],
    ["release", "a", "--owner", "w", "--fence", "1"],
    ["claim", "a", "--owner", "w", "--lease", "1s"],
    ["takeover", "a", "--owner", "v", "--lease", "1m", "--now", "2027-01-01T00:00:00Z"],
    ["complete", "a", "--owner", "v", "--fence", "3", "--failed"],
    ["complete", "a", "--owner", "v", "--fence", "3"],
    ["complete", "", "--owner", "v", "--fence", "3", "--json"],
    ["admit", "r1"],
    ["admit", "r2", "--needs", "r1"],
    ["run", "--next", "--owner", "w", "--lease", "1m", "--", "true"],
    # --until-idle: a lease claimed above is live at the fixed --now for ever (a drain waits)
    [
        "--json",
        "run",
        "--next",
        "--drain",
        "--until-idle",
        "--owner",
        "w",
        "--lease",
        "1m",
        "--",
        "false",
    ],
    ["run", "r1", "--drain", "--owner", "w", "--lease", "1m", "--", "true"],
    ["list", "--jsonl"],
    ["list", "--jsonl", "--status", "completed", "--limit", "1", "--owner", "w"],
    ["list", "--jsonl", "--status", "bogus"],
    ["claim", "--next", "--owner", "w", "--lease", "5m", "--give-up-after", "1s"],  # no --wait
    ["run", "a", "--owner", "w", "--lease", "1m", "--give-up-after", "1s", "--", "true"],
    ["admit", "c1", "--needs", "c2"],
    ["admit", "c2", "--needs", "c1"],  # would close a cycle
    ["claim", "a", "--owner", "w", "--lease", "1m"],  # a is failed: the state is named
    ["claim", "nope", "--owner", "w", "--lease", "1m", "--json"],  # the key is named
]


def _steady(outcomes: list[Outcome]) -> list[Outcome]:
    """`run --json`'s "attempt" holds a pid and wall-clock times: compare its fields' names."""

    def line(text: str) -> str:
        try:
            doc = json.loads(text)
        except ValueError:
            return text
        if isinstance(doc, dict) and isinstance(doc.get("attempt"), dict):
            doc["attempt"] = sorted(doc["attempt"])
        return json.dumps(doc)

    return [
        Outcome(o.code, "\n".join(line(t) for t in o.stdout.split("\n")), o.stderr)
        for o in outcomes
    ]


def test_fast_path_and_typer_path_behave_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_cli = make_cli(monkeypatch)
    results: dict[str, list[Outcome]] = {"fast": [], "typer": []}
    for args in SCRIPT:
        assert fast.parse(["--now", "t", *args]) is not None, args
        results["fast"].append(fast_cli(*args, input='{"key":"z"}\n'))
    fast_dump = fast_cli.dump()
    typer_cli: Cli = make_cli(monkeypatch)
    monkeypatch.setattr(fast, "parse", lambda args: None)
    for args in SCRIPT:
        results["typer"].append(typer_cli(*args, input='{"key":"z"}\n'))
    assert _steady(results["fast"]) == _steady(results["typer"])
    assert fast_dump == typer_cli.dump()
    assert [r.code for r in results["fast"]] == [
        0,
        0,
        0,
        2,
        2,
        0,
        0,
        4,
        0,
        7,
        0,
        5,
        0,
        0,
        0,
        0,
        6,
        2,  # an empty key: bad input for every command (docs/design.md §5.2)
        0,
        0,
        0,
        1,
        2,
        0,
        0,
        2,
        2,  # --give-up-after without --wait
        2,  # nor --drain
        0,
        8,
        6,
        3,
    ]
    stderr = [r.stderr for r in results["fast"][-3:]]
    assert stderr == [
        "ledger: admitting c2 would close a cycle: c2 → c1 → c2\n",
        "ledger: record is not claimed (a is failed)\n",
        "ledger: key has no record: nope\n",
    ]


HOT = [
    ["admit", "a"],
    ["admit", "b", "--task", '{"x": [1, 2]}', "--needs", "a"],
    ["claim", "a", "--owner", "w", "--lease", "1m"],
    ["renew", "a", "--owner", "w", "--fence", "1", "--lease", "1m"],
    ["release", "a", "--owner", "w", "--fence", "1"],
    ["claim", "--next", "--owner", "w", "--lease", "1m"],
    ["complete", "a", "--owner", "w", "--fence", "2"],
    ["--json", "claim", "b", "--owner", "w", "--lease", "1m"],
    ["takeover", "b", "--owner", "v", "--lease", "1m", "--now", "2099-01-01T00:00:00Z"],
    ["complete", "b", "--owner", "v", "--fence", "2", "--failed", "--json"],
]

PROBE = """
import io, sys
from ledger_cli.cli import app
codes = []
for args in eval(sys.argv[1]):  # a repr: the probe itself imports no json (nor re)
    out, sys.stdout = sys.stdout, io.StringIO()
    try:
        store = ["--store", sys.argv[2]] if sys.argv[2] else []  # "": the default store
        codes.append(app.run([*store, *args]))
    finally:
        sys.stdout = out
wanted = set(eval(sys.argv[3]))  # a package, or a module by its full name
heavy = sorted(m for m in sys.modules if m in wanted or m.split(".")[0] in wanted)
print(repr({"codes": codes, "heavy": heavy}))
"""


HEAVY = [
    # The hot commands bypass typer and rich (their import is most of a cold
    # start); filelock is imported only when a held lock must be waited for.
    # Standard-library modules are imported plainly wherever they are needed,
    # except dataclasses, which imports inspect (and ast, dis, tokenize): the
    # hot path's records are typing.NamedTuples (CONTRIBUTING, "Start-up").
    *("typer", "rich", "click", "platformdirs", "filelock"),
    *("dataclasses", "inspect"),
]


@pytest.mark.parametrize("given", [True, False], ids=["--store", "default-store"])
def test_hot_commands_import_neither_typer_nor_rich(tmp_path: Path, given: bool) -> None:
    """With `--store` and with the default store in the user data directory
    (found without platformdirs on Linux), in a fresh process."""
    if not given and sys.platform != "linux":
        pytest.skip("elsewhere platformdirs finds the user data directory")
    store = str(tmp_path / "store") if given else ""
    res = subprocess.run(
        [sys.executable, "-c", PROBE, repr(HOT), store, repr(HEAVY)],
        capture_output=True,
        text=True,
        env=subprocess_env(XDG_DATA_HOME=str(tmp_path / "data")),
        check=True,
    )
    doc = ast.literal_eval(res.stdout)
    assert doc["codes"] == [0] * len(HOT), res.stderr
    assert doc["heavy"] == []
    if not given:
        assert (tmp_path / "data" / "ledger_cli" / "store" / "records").is_dir()


LIFE = [  # a task's life as benchmarks/bench_startup.py times it, one command a process
    ["admit", "k"],
    ["claim", "k", "--owner", "a", "--lease", "5m"],
    ["renew", "k", "--owner", "a", "--fence", "1", "--lease", "5m"],
    ["release", "k", "--owner", "a", "--fence", "1"],
    ["claim", "k", "--owner", "a", "--lease", "5m"],
    ["takeover", "k", "--owner", "b", "--lease", "5m", "--now", "2099-01-01T00:00:00Z"],
    ["complete", "k", "--owner", "b", "--fence", "3"],
]

UNCALLED = [
    # What none of these commands calls is not imported (docs/design.md §5.1):
    # `log --follow`'s reader, the outage handling of `--next --wait`, and
    # doctor's check and repair of live/.
    "ledger_cli.stores.jsonfile.historyfollow",
    "ledger_cli.stores.jsonfile.liveview",
    "ledger_cli.cli.outage",
]


def test_a_task_life_imports_nothing_it_does_not_call(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    env = subprocess_env()
    # Not the store's first write, which builds its indexes.
    subprocess.run(
        [sys.executable, "-m", "ledger_cli", "--store", store, "admit", "x"], env=env, check=True
    )
    res = subprocess.run(
        [sys.executable, "-c", PROBE, repr(LIFE), store, repr([*HEAVY, *UNCALLED])],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    doc = ast.literal_eval(res.stdout)
    assert doc["codes"] == [0] * len(LIFE), res.stderr
    assert doc["heavy"] == []


COMPILE_PROBE = """
import builtins, io, sys
evals = []
real = builtins.compile
def counting(source, filename, mode, *args, **kwargs):
    if mode == "eval":  # a ForwardRef's, not a module's source ("exec")
        evals.append(str(source))
    return real(source, filename, mode, *args, **kwargs)
builtins.compile = counting
from ledger_cli.cli import app
for args in eval(sys.argv[1]):
    out, sys.stdout = sys.stdout, io.StringIO()
    try:
        app.run(["--store", sys.argv[2], *args])
    finally:
        sys.stdout = out
print(repr(evals))
"""


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_hot_commands_compile_no_annotation(tmp_path: Path, kind: str) -> None:
    """A NamedTuple with string annotations compiles each (a `ForwardRef`),
    and a process's first `compile()` is slow: the hot path's NamedTuples have
    evaluated annotations (CONTRIBUTING, "Start-up"), on either local store."""
    store = str(tmp_path / "store") if kind == "json" else f"sqlite:///{tmp_path}/store.db"
    res = subprocess.run(
        [sys.executable, "-c", COMPILE_PROBE, repr(HOT), store],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
    )
    assert ast.literal_eval(res.stdout) == []
