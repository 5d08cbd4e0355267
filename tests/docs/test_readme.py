"""The README's first lines are the commands a fresh machine runs; CI runs the second."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("```sh")
    end = lines.index("```", start + 1)
    return lines[start + 1 : end]


def test_readme_opens_with_the_demo_and_the_test_command() -> None:
    demo, tests = _readme_commands()
    assert demo.endswith("ledger demo")
    assert "pytest" in tests
    assert (ROOT / "README.md").read_text(encoding="utf-8").index("```sh") < 200


def test_ci_runs_exactly_the_readme_test_command() -> None:
    _, tests = _readme_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert tests in ci


def test_public_names_resolve() -> None:
    import ledger_cli

    for name in ledger_cli.__all__:
        assert getattr(ledger_cli, name) is not None, name
