"""The repository explains itself: no file cites a document it does not contain, and every pointer
into docs/architecture.md names a heading that exists.

The decisions the code relies on are written in docs/architecture.md, in our own words with links
to their public sources; a docstring that needs more than a sentence points at one of its headings
as ``docs/architecture.md#<anchor>``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".tpl", ".toml", ".txt", ".cfg", ".proto", ".sh"}
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    "test-artifacts",
    "dist",
    "build",
    ".mypy_cache",
    ".ruff_cache",
}

# Built from parts so that this file does not match itself.
SECTION = "\u00a7"
OUTSIDE_CITATION = re.compile(
    "|".join(
        [
            r"\b[Ss]pec(ification)?'?s? \(?" + SECTION,  # "spec <section>4.2", "the spec's <section>7.6"
            r"\bDESIGN(\.md)? " + SECTION,
            r"\bDESIGN\.md\b",
            r"\.\./shared/",
            r"\b[Ii]ssues? #?[0-9]+\b(?!\S*github\.com)",  # our tracker's issues: not in the repository
        ]
    )
)


def _text_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):  # symbolic links are not followed (sysfs fixtures loop)
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and not path.is_symlink():
                found.append(path)
    return sorted(found)


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_no_file_cites_a_document_outside_the_repository() -> None:
    offenders = []
    for path in _text_files():
        rel = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if OUTSIDE_CITATION.search(line):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == [], "explain it in our words or point at docs/architecture.md:\n" + "\n".join(
        offenders
    )


def test_the_rule_sees_a_citation() -> None:
    scanned = _text_files()
    assert ROOT / "README.md" in scanned
    assert ROOT / "pkg" / "domain" / "names.py" in scanned
    for cited in (
        f"(spec {SECTION}4.2.1)",
        f"DESIGN {SECTION}7",
        "DESIGN" + ".md",
        "../" + "shared/REAL-NODE.md",
        "before " + "is" + "sue 17",
    ):
        assert OUTSIDE_CITATION.search(cited), cited
    for fine in ("the CDI spec the test wrote", f"RFC 6901 {SECTION}3", "spec.sharing.strategy"):
        assert not OUTSIDE_CITATION.search(fine), fine


def test_every_pointer_into_the_architecture_page_names_a_heading() -> None:
    headings = {
        _anchor(line.lstrip("#")) for line in ARCHITECTURE.read_text().splitlines() if line.startswith("#")
    }
    pointer = re.compile(r"architecture\.md#([a-z0-9-]+)")
    dangling = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            dangling += [
                f"{path.relative_to(ROOT)}:{number}: #{a}" for a in pointer.findall(line) if a not in headings
            ]
    assert dangling == []
