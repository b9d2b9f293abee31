"""No file under test/ edits ``sys.path``: helpers are the packages ``testutil`` and ``bench``
under test/, which pytest's ``pythonpath``, mypy's ``mypy_path`` and the Makefile's ``PYTHONPATH``
put on the search path. A test that inserts a folder of its own brings back bare-name helper
imports, which collide as soon as two folders hold a helper of the same name, and which mypy,
pytest and the benchmarks each resolve differently.

Every file is read as bytes, so code, strings handed to a child interpreter and scripts all count.
"""

from __future__ import annotations

import os
from pathlib import Path

TEST_ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
# Spelled in parts so that this file is not one of the files it looks for.
FORBIDDEN = tuple(("sys.path." + verb).encode() for verb in ("insert", "append"))


def offenders(root: Path) -> list[str]:
    """``file:line`` (relative to ``root``) of every line under ``root`` that edits ``sys.path``."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):  # links are not followed (the sysfs fixtures loop)
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            for number, line in enumerate(path.read_bytes().splitlines(), start=1):
                if any(word in line for word in FORBIDDEN):
                    found.append(f"{path.relative_to(root).as_posix()}:{number}")
    return sorted(found)


def test_no_file_under_test_edits_sys_path() -> None:
    found = offenders(TEST_ROOT)
    assert found == [], (
        "import helpers as testutil.<path> (test/testutil/, docs/testing.md) instead of adding "
        "their folder to the search path:\n" + "\n".join(f"test/{where}" for where in found)
    )


def test_the_check_finds_both_edits_in_any_file(tmp_path: Path) -> None:
    insert, append = (word.decode() for word in FORBIDDEN)
    (tmp_path / "deeper").mkdir()
    (tmp_path / "deeper" / "helper.py").write_text(f"import sys\n{insert}(0, 'x')\n")
    (tmp_path / "bench.py").write_text(f'ENTRY = "import sys; {append}(\\"x\\")"\n')
    (tmp_path / "notes.md").write_text(f"once: `{insert}`\n")
    (tmp_path / "clean.py").write_text("import sys\nprint(sys.path)\n")

    assert offenders(tmp_path) == ["bench.py:1", "deeper/helper.py:2", "notes.md:1"]
