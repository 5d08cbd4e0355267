"""No module of the package is over 400 lines, counted by `str.splitlines()`
(CONTRIBUTING.md, "Conventions every change keeps"); the failure lists every
module over it."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ledger_cli"
MAX_LINES = 400


def over_limit(root: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    """Each module over `limit` lines, as `path: lines`, relative to `root`'s parent."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(root.parent)}: {lines}")
    return found


def test_no_module_is_over_the_limit() -> None:
    offenders = over_limit()
    assert not offenders, f"modules over {MAX_LINES} lines: " + ", ".join(offenders)


def test_the_check_catches_a_long_module(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    (package / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert over_limit(package) == [f"pkg/sub/long.py: {MAX_LINES + 1}"]
