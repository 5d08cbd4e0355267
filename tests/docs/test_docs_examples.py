"""Every command the README and docs/ show is run, and prints what they show.

A ```console block is a transcript: `$ COMMAND` lines, each followed by the
output it prints (stdout and stderr). Each page's console blocks run in order
in one bash session, so a page's later blocks continue from its earlier ones,
in a fresh HOME with `ledger` on PATH, LEDGER_ACTOR=alice and the clock fixed
at LEDGER_NOW (NOW below), into a pipe (so tables are plain text); the home
directory's path is shown as `~`. A command that needs another instant says
so with `--now`.

Every other block showing a `ledger` command (```sh: crontab lines, scripts,
examples that need a real server) is marked `<!-- illustration -->` on the
line before it: it is not run, but every `ledger` invocation in it must name
a real command and only options that command has.

    .venv/bin/python -m tests.docs.test_docs_examples --write   # rewrite the outputs
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cli_support import ROOT, subprocess_env

PAGES = [
    "README.md",
    "CONTRIBUTING.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]
NOW = "2026-11-29T20:16:26Z"
ILLUSTRATION = "<!-- illustration -->"
MARK = "@@ledger-docs-example@@"


class Block:
    def __init__(self, lang: str, start: int, end: int, lines: list[str], marked: bool) -> None:
        self.lang = lang
        self.start = start  # index of the first line inside the fence
        self.end = end  # index of the closing fence
        self.lines = lines
        self.marked = marked


def blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m and m.group(1):
            end = lines.index("```", i + 1)
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            found.append(Block(m.group(1), i + 1, end, lines[i + 1 : end], before == ILLUSTRATION))
            i = end + 1
        else:
            i += 1
    return found


def steps(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"output before the first command: {line!r}"
            out[-1][1].append(line)
    return out


def run_page(page: str) -> list[list[str]]:
    """Run a page's console blocks; the output of each command, in order."""
    commands = [
        cmd
        for b in blocks((ROOT / page).read_text(encoding="utf-8"))
        if _runs(b)
        for cmd, _ in steps(b)
    ]
    if not commands:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bin_dir = home / ".bin"
        bin_dir.mkdir()
        shim = bin_dir / "ledger"
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ledger_cli "$@"\n')
        shim.chmod(0o755)
        script = ["set +e", "cd ~"]
        for cmd in commands:
            script += [f"printf '%s\\n' {MARK}", f"{{ {cmd}\n}} 2>&1"]
        env = subprocess_env(
            HOME=str(home),
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            LEDGER_ACTOR="alice",
            LEDGER_NOW=NOW,
            LEDGER_HOST="build-1",  # the host `ledger run` records in attempts
            NO_COLOR="1",
            COLUMNS="100",
        )
        res = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=home,
        )
    chunks = res.stdout.replace(str(home), "~").split(MARK + "\n")[1:]
    assert len(chunks) == len(commands), res.stderr
    return [[line.rstrip() for line in c.splitlines()] for c in chunks]


def _runs(block: Block) -> bool:
    return block.lang == "console" and not block.marked


@pytest.mark.parametrize("page", PAGES)
def test_console_blocks_print_what_they_show(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    expected = [(cmd, out) for b in blocks(text) if _runs(b) for cmd, out in steps(b)]
    actual = run_page(page)
    for (cmd, want), got in zip(expected, actual, strict=True):
        assert [w.rstrip() for w in want] == got, f"{page}: $ {cmd}"


@pytest.mark.parametrize("page", PAGES)
def test_every_test_the_docs_name_exists(page: str) -> None:
    """`tests/DIR/FILE.py` and `tests/DIR/FILE.py::test_name` (the path may be
    left out, naming the one file of that name under tests/; `name_…` cut
    short; and a following bare `::test_name`, of the same file) name tests
    that exist, so a claim that cites its test cannot outlive it unnoticed."""
    text = (ROOT / page).read_text(encoding="utf-8")
    current: str | None = None
    test_file = r"(?:tests/(?:\w+/)?)?(?:test_\w+|\w+_support)\.py"
    for m in re.finditer(rf"({test_file})?::(\w+)(…)?|({test_file})", text):
        path = m.group(1) or m.group(4)
        if path is not None:
            if not path.startswith("tests/"):
                found = sorted((ROOT / "tests").rglob(path))
                assert len(found) == 1, f"{page}: {path} names {len(found)} files under tests/"
                path = str(found[0].relative_to(ROOT))
            assert (ROOT / path).is_file(), f"{page}: no {path}"
            current = path
        name = m.group(2)
        if name is not None:
            assert current is not None, f"{page}: ::{name} names no file"
            source = (ROOT / current).read_text(encoding="utf-8")
            rest = r"\w*" if m.group(3) else ""  # `test_name_…`: a name cut short
            assert re.search(rf"^def {name}{rest}\(", source, re.M), f"{page}: no {current}::{name}"


def _invocations(line: str) -> list[list[str]]:
    """The argument lists of each `ledger` command on a shell line."""
    line = re.sub(r"\$\((?:[^()]|\([^()]*\))*\)", "X", line.split(" #")[0])  # $(…) is a word
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    found: list[list[str]] = []
    for i, word in enumerate(words):
        if word == "ledger" or word.endswith("/ledger"):
            args: list[str] = []
            for w in words[i + 1 :]:
                if w in ("|", "&&", "||", ";", "--", ")") or w.startswith("|"):
                    break
                args.append(w)
            found.append(args)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_illustrations_name_real_commands_and_options(page: str) -> None:
    from ledger_cli.cli.declarations import build_cli

    group = build_cli()
    text = (ROOT / page).read_text(encoding="utf-8")
    for block in blocks(text):
        if _runs(block) or block.lang in ("text", "python", "json"):
            continue
        if not any(_invocations(line) for line in block.lines):
            continue
        assert block.marked or block.lang == "console", (
            f"{page}:{block.start}: a ```{block.lang} block with ledger commands is neither "
            f"a console transcript nor marked {ILLUSTRATION}"
        )
        for line in block.lines:
            for args in _invocations(line.removeprefix("$ ")):
                name = _command_after_globals(args)
                if name is None:
                    continue
                commands = group.commands  # type: ignore[attr-defined]
                assert name in commands, f"{page}: no command {name!r}: {line}"
                command = commands[name]
                known = {o for p in command.params for o in p.opts} | {"-h", "--help"}
                for w in args:
                    if w.startswith("-") and not re.fullmatch(r"-\d.*", w):
                        assert w.split("=")[0] in known, f"{page}: {name} has no {w}: {line}"


def _command_after_globals(args: list[str]) -> str | None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 1 if args[i] in ("--json", "--version", "-V", "--help", "-h") else 2
    return args[i] if i < len(args) else None


def write() -> None:
    """Rewrite each page's console outputs with what the commands print now."""
    for page in PAGES:
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        actual = iter(run_page(page))
        lines = text.splitlines()
        new: list[str] = []
        i = 0
        runnable = {b.start: b for b in blocks(text) if _runs(b)}
        while i < len(lines):
            block = runnable.get(i)
            if block is None:
                new.append(lines[i])
                i += 1
                continue
            for cmd, _ in steps(block):
                new.append(f"$ {cmd}")
                new.extend(next(actual))
            i = block.end
        path.write_text("\n".join(new) + "\n", encoding="utf-8")
        print(f"wrote {page}")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
