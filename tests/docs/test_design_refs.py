"""Every `docs/design.md §N` the repository cites names a section of docs/design.md
(and its quoted title, when one is given, is that section's title), every bare
`§N` resolves there too, and nothing cites the contract's old home outside the
repository (SPEC.md, spec/engine.md, the Go package's seed documentation)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
SCANNED_DIRS = ("ledger_cli", "tests", "docs", "benchmarks", "completions", ".ci")
SKIPPED_PARTS = frozenset({"__pycache__", ".mypy_cache", ".ruff_cache"})

HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)*)\.? (.+?)\s*$", re.MULTILINE)
CITATION = re.compile(r'(?:docs/)?design\.md\s+§(\d+(?:\.\d+)*)(?:\s+"([^"]*)")?')
SECTION_SIGN = re.compile(r"§(\d+(?:\.\d+)*)")
OUTSIDE = re.compile(r"\bSPEC\b|SPEC\.md|spec/engine\.md|seed/0|/work/shared")
"""The spellings of a reference to the contract's files outside the repository."""


def _sections(text: str) -> dict[str, str]:
    """Section number -> title, from the `## N. Title` / `### N.M Title` headings."""
    sections: dict[str, str] = {}
    for number, title in HEADING.findall(text):
        assert number not in sections, f"design.md numbers §{number} twice"
        sections[number] = title
    return sections


def _scanned() -> list[tuple[Path, str]]:
    """Every text file of the repository's own tree (the top level's files and
    SCANNED_DIRS), with its text; binary files (the gzipped traces) are skipped."""
    paths = [path for path in sorted(ROOT.iterdir()) if path.is_file()]
    for top in SCANNED_DIRS:
        paths.extend(
            path
            for path in sorted((ROOT / top).rglob("*"))
            if path.is_file() and not SKIPPED_PARTS.intersection(path.parts)
        )
    texts = []
    for path in paths:
        try:
            texts.append((path, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue
    return texts


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _problems(path: Path, text: str, sections: dict[str, str]) -> list[str]:
    """What is wrong with the citations in one file's text."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    problems = []
    for match in CITATION.finditer(text):
        number, title = match.group(1), match.group(2)
        line = _line(text, match.start())
        if number not in sections:
            problems.append(f"{where}:{line}: design.md has no §{number}")
        elif title is not None and " ".join(title.split()) != sections[number]:
            problems.append(
                f'{where}:{line}: §{number} is "{sections[number]}", cited as "{title}"'
            )
    for match in SECTION_SIGN.finditer(text):
        if match.group(1) not in sections:
            problems.append(f"{where}:{_line(text, match.start())}: §{match.group(1)} is nowhere")
    for match in OUTSIDE.finditer(text):
        problems.append(
            f"{where}:{_line(text, match.start())}: cites {match.group(0)!r}, "
            "outside the repository; cite docs/design.md instead"
        )
    return problems


def test_design_numbers_its_sections() -> None:
    sections = _sections(DESIGN.read_text(encoding="utf-8"))
    assert {"1", "2", "2.1", "3", "3.2", "4", "4.4", "5", "5.4", "8"} <= set(sections)
    assert sections["5.4"] == "Short lock holds"


def test_every_citation_names_a_section_and_nothing_leads_outside() -> None:
    sections = _sections(DESIGN.read_text(encoding="utf-8"))
    problems: list[str] = []
    cited = 0
    for path, text in _scanned():
        if path == Path(__file__).resolve():
            continue  # its bad citations are the checks' own test cases
        cited += len(CITATION.findall(text))
        problems.extend(_problems(path, text, sections))
    assert not problems, "\n".join(problems)
    assert cited > 100  # the scan found the code's citations, not an empty tree


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("see docs/design.md §42", "no §42"),
        ('see docs/design.md §5.4 "Long lock holds"', 'cited as "Long lock holds"'),
        ("(docs/design.md §4, §77)", "§77 is nowhere"),
        ("the contract (SPEC §4) says", "outside the repository"),
        ("see spec/engine.md for the walk", "outside the repository"),
    ],
)
def test_the_check_catches_a_bad_citation(text: str, complaint: str, tmp_path: Path) -> None:
    sections = _sections(DESIGN.read_text(encoding="utf-8"))
    problems = _problems(tmp_path / "x.py", text, sections)
    assert any(complaint in problem for problem in problems), problems


def test_a_good_citation_passes(tmp_path: Path) -> None:
    sections = _sections(DESIGN.read_text(encoding="utf-8"))
    text = 'docs/design.md §5.4 "Short\n  lock holds" and design.md §2.11, departure 3'
    assert _problems(tmp_path / "x.py", text, sections) == []
