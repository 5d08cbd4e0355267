"""typer's private names go through `ledger_cli/cli/typer_compat.py` only, and each
one is still where that module expects it in the installed typer.

When a typer release moves one of them, these tests fail naming the path that
moved (rather than a command failing somewhere at run time).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import typer

from ledger_cli.cli import typer_compat

PACKAGE = Path(typer_compat.__file__).resolve().parent.parent

# (module, attribute path) of every private or undocumented name typer_compat uses.
PRIVATE = [
    ("typer._click", "Context"),
    ("typer._click", "Parameter"),
    ("typer._click", "Command"),
    ("typer._click", "exceptions.ClickException"),
    ("typer._click", "core.ParameterSource.COMMANDLINE"),
    ("typer._click", "shell_completion.CompletionItem"),
    ("typer._click", "shell_completion.add_completion_class"),
    ("typer._click", "shell_completion.get_completion_class"),
    ("typer._click", "shell_completion.ShellComplete.get_completions"),
    ("typer._click", "shell_completion._resolve_context"),
    ("typer._click", "shell_completion._resolve_incomplete"),
    ("typer._completion_classes", "BashComplete.complete"),
    ("typer._completion_classes", "ZshComplete.complete"),
    ("typer._completion_classes", "FishComplete.complete"),
    ("typer._completion_shared", "_get_shell_name"),
    ("typer.core", "TyperCommand"),
    ("typer.core", "TyperGroup"),
    ("typer.main", "get_command"),
    ("typer.main", "Typer.__init__"),  # sets registered_commands (checked below)
]


def _version() -> tuple[int, int]:
    major, minor = typer.__version__.split(".")[:2]
    return int(major), int(minor)


def test_the_installed_typer_is_a_supported_line() -> None:
    assert _version() in typer_compat.SUPPORTED, (
        f"typer {typer.__version__} is not a line typer_compat was checked against "
        f"{typer_compat.SUPPORTED}: run these tests and the CLI tests with it, then add it "
        "(and widen the pin in pyproject.toml)"
    )


@pytest.mark.parametrize(("module", "path"), PRIVATE, ids=[f"{m}.{p}" for m, p in PRIVATE])
def test_each_private_name_is_where_typer_compat_expects_it(module: str, path: str) -> None:
    try:
        obj: object = importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"typer {typer.__version__} has no module {module}: {exc}")
    for part in path.split("."):
        if not hasattr(obj, part):
            pytest.fail(f"typer {typer.__version__} moved {module}.{path}: no {part!r}")
        obj = getattr(obj, part)


def test_registered_commands_is_the_apps_list() -> None:
    app = typer.Typer()
    app.command("one")(lambda: None)
    assert [c.name for c in typer_compat.registered_commands(app)] == ["one"]


def test_the_names_behave_as_the_cli_uses_them() -> None:
    from ledger_cli.cli.declarations import build_cli
    from ledger_cli.cli.shell_completion import COMPLETE_VAR

    cli = build_cli()
    assert isinstance(cli, typer_compat.Command)
    with pytest.raises(typer_compat.ClickException) as caught:  # a usage error
        cli.main(args=["claim", "k"], prog_name="ledger", standalone_mode=False)
    assert caught.value.exit_code == 2
    assert "--owner" in caught.value.format_message()
    # The app's completion classes are the ones click finds for each shell.
    from typer._click.shell_completion import get_completion_class

    from ledger_cli.cli import completion_shells

    for shell in ("bash", "zsh", "fish"):
        found = get_completion_class(shell)
        assert found is not None and found.__module__ == completion_shells.__name__
    assert COMPLETE_VAR == "_LEDGER_COMPLETE"
    ctx = typer_compat.Context(cli)
    cli.parse_args(ctx, ["--json", "list", "--status", "failed"])
    assert typer_compat.words_left(ctx) == ["list", "--status", "failed"]
    assert typer_compat.ParameterSource.COMMANDLINE.name == "COMMANDLINE"
    assert issubclass(typer_compat.TyperGroup, typer_compat.Command)


def _typer_imports(path: Path) -> list[str]:
    """Every typer/click module a source file imports or names (`typer._x` attributes too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in ("typer", "click")]
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in ("typer", "click"):
                found += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "typer" and node.attr.startswith("_"):
                found.append(f"typer.{node.attr}")
            if node.value.id == "typer" and node.attr in ("core", "main"):
                found.append(f"typer.{node.attr}")
    return found


def _reaches_in(name: str) -> bool:
    """A name beyond typer's documented top level (`typer.Option`, `typer.Typer`, …)."""
    parts = name.split(".")
    if parts[0] == "click":
        return True
    return any(p.startswith("_") for p in parts[1:]) or parts[1:2] in (["core"], ["main"])


def test_only_typer_compat_reaches_into_typer() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "typer_compat.py":
            continue
        beyond = [name for name in _typer_imports(path) if _reaches_in(name)]
        if beyond:
            offenders[str(path.relative_to(PACKAGE))] = beyond
    assert offenders == {}, "import these through ledger_cli/cli/typer_compat.py"
    # The checker itself sees the forms it must catch.
    assert all(map(_reaches_in, ("typer._click.Context", "typer.core.TyperGroup", "click")))
    assert not any(map(_reaches_in, ("typer", "typer.Option", "typer.Context")))
