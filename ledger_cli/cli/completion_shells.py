"""What `ledger` answers a completion script with (`_LEDGER_COMPLETE=complete_SHELL`),
one class per shell, registered in click's table of shells by `register`
(docs/design.md §6.8; the scripts themselves are in shell_completion.py).

- bash passes COMP_WORDS, COMP_CWORD and COMP_LINE; each candidate comes back
  on a line of its own, quoted as bash must insert it (completion_words.py:
  bash inserts what it is given as it is).
- zsh passes the words before the cursor's (`_LEDGER_COMPLETE_WORDS`, one a
  line, as typed) and the cursor's (`_LEDGER_COMPLETE_WORD`); each candidate
  comes back unquoted, with a tab and the text to list when it has help, and
  `compadd` quotes it as the word's quoting needs.
- fish passes its own unescaped tokens (`commandline -opc`, `commandline -ct
  | string unescape`) in the same two variables; candidates come back as
  `value<TAB>help`, and fish escapes them.

A KEY argument's candidate that starts with `-` would be read as an option:
on a line with no `--` yet, `key_completions` marks it AFTER_DASHES and each
shell puts a `--` of its own before it (bash and zsh insert `-- -dash`; fish,
which escapes a candidate's space, offers `--` and the key at the next TAB).

A script that sets neither variable (installed by an earlier `ledger`, from
typer's templates) gets typer's answer, as before.
"""

from __future__ import annotations

import os

from ledger_cli.cli import completion_words
from ledger_cli.cli import typer_compat as compat
from ledger_cli.cli.escapes import escaped
from ledger_cli.cli.shell_completion import script

WORDS_VAR = "_LEDGER_COMPLETE_WORDS"
WORD_VAR = "_LEDGER_COMPLETE_WORD"
AFTER_DASHES = "after--"
"""The type of a KEY argument's candidate that must follow a `--`."""


def key_completions(
    sc: compat.ShellComplete, args: list[str], incomplete: str
) -> list[compat.CompletionItem]:
    """Click's candidates for the word, and, where a KEY argument is completed on
    a line without `--` (`-d` included, for which click offers only options), its
    keys that start with `-` marked AFTER_DASHES."""
    ctx = compat.resolve_context(sc.cli, sc.ctx_args, sc.prog_name, args)
    obj, word = compat.resolve_incomplete(ctx, list(args), incomplete)
    items: list[compat.CompletionItem] = obj.shell_complete(ctx, word)
    if "--" in args:
        return items
    argument: compat.Parameter | None = None
    if isinstance(obj, compat.Parameter):
        argument = obj if obj.param_type_name == "argument" else None
    elif word.startswith("-"):  # options offered; a KEY may still go here
        argument = next((p for p in ctx.command.get_params(ctx) if _open(ctx, p)), None)
    if argument is None:
        return items
    keys = items if argument is obj else argument.shell_complete(ctx, word)
    dashed = [
        compat.CompletionItem(item.value, type=AFTER_DASHES)
        for item in keys
        if item.type == "plain" and item.value.startswith("-")
    ]
    kept = [item for item in items if not (argument is obj and item.value.startswith("-"))]
    return kept + dashed


def _open(ctx: compat.Context, param: compat.Parameter) -> bool:
    """A KEY argument that can still take a word here (click's own test)."""
    if param.param_type_name != "argument" or param.metavar is None:
        return False
    given = ctx.get_parameter_source(param.name or "") is compat.ParameterSource.COMMANDLINE
    return param.nargs == -1 or not given


def _help(item: compat.CompletionItem) -> str:
    """The item's help on one line, its controls escaped."""
    return escaped(" ".join(str(item.help or "").split()))


def _cword() -> int:
    try:
        return int(os.environ.get("COMP_CWORD", "") or 0)
    except ValueError:
        return 0


class BashComplete(compat.BashComplete):
    def source(self) -> str:
        return script("bash").rstrip("\n")

    def complete(self) -> str:
        line = completion_words.bash_line(
            os.environ.get("COMP_WORDS", ""), _cword(), os.environ.get("COMP_LINE")
        )
        items = self.get_completions(line.args, line.incomplete)
        replies = []
        for item in items:
            if item.type != AFTER_DASHES:
                replies.append(line.reply(item.value))
            elif not (line.kept or line.quote):  # the `--` must start the word
                replies.append("-- " + completion_words.quoted(item.value))
        return "\n".join(replies)

    def get_completions(self, args: list[str], incomplete: str) -> list[compat.CompletionItem]:
        return key_completions(self, args, incomplete)


class _WordsComplete(compat.ShellComplete):
    """zsh and fish: the words from WORDS_VAR and WORD_VAR, `dequote` on those
    the shell passes as typed. A value for `--opt=` comes back whole; each
    shell's `reply` writes the candidates' lines."""

    dequote = False

    def source(self) -> str:
        return script(self.name).rstrip("\n")

    def complete(self) -> str:
        if WORDS_VAR not in os.environ:  # typer's script
            return str(super().complete())
        args, incomplete = self.words()
        items = self.get_completions(args, incomplete)
        plain = [item for item in items if item.type != AFTER_DASHES]
        values = [self.whole(item.value, incomplete) for item in plain]
        lines = self.reply(values, [_help(item) for item in plain])
        dashed = [item.value for item in items if item.type == AFTER_DASHES]
        return "\n".join(lines + (self.after_dashes(dashed, incomplete) if dashed else []))

    def get_completions(self, args: list[str], incomplete: str) -> list[compat.CompletionItem]:
        return key_completions(self, args, incomplete)

    def reply(self, values: list[str], helps: list[str]) -> list[str]:
        """A line for each candidate, given its value and its help (may be "")."""
        raise NotImplementedError

    def after_dashes(self, keys: list[str], incomplete: str) -> list[str]:
        """The lines for KEY candidates that must follow a `--` (AFTER_DASHES)."""
        raise NotImplementedError

    def words(self) -> tuple[list[str], str]:
        before = os.environ[WORDS_VAR].split("\n")[1:]
        word = os.environ.get(WORD_VAR, "")
        if self.dequote:
            before, word = (
                [completion_words.value_of(w) for w in before],
                completion_words.value_of(word),
            )
        return before, word

    @staticmethod
    def whole(value: str, incomplete: str) -> str:
        name, equals, _ = incomplete.partition("=")
        if incomplete.startswith("-") and equals and not value.startswith(name + equals):
            return name + equals + value
        return value


class ZshComplete(_WordsComplete, compat.ZshComplete):
    dequote = True

    def reply(self, values: list[str], helps: list[str]) -> list[str]:
        width = max((len(v) for v in values), default=0)
        return [
            f"{value}\t{value:<{width}}  -- {text}" if text else value
            for value, text in zip(values, helps, strict=True)
        ]

    def after_dashes(self, keys: list[str], incomplete: str) -> list[str]:
        """A tab, then the key: the script adds it with `compadd -P '-- '`."""
        return [f"\t{key}" for key in keys]


class FishComplete(_WordsComplete, compat.FishComplete):
    def reply(self, values: list[str], helps: list[str]) -> list[str]:
        return [
            f"{value}\t{text}" if text else value for value, text in zip(values, helps, strict=True)
        ]

    def after_dashes(self, keys: list[str], incomplete: str) -> list[str]:
        """`--` itself (fish would escape the space of `-- -dash`): the keys
        come at the next TAB, after it."""
        if not "--".startswith(incomplete):
            return []
        shown = ", ".join(escaped(key) for key in keys[:3]) + (", …" if len(keys) > 3 else "")
        return [f"--\tthen the key {shown}" if len(keys) == 1 else f"--\tthen a key: {shown}"]


def register() -> None:
    """Put these classes in click's table (typer's own are put there when its
    completion options are built; the app has none of typer's)."""
    for cls in (BashComplete, ZshComplete, FishComplete):
        compat.add_completion_class(cls, cls.name)
