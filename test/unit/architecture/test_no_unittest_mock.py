"""Tests mock through pytest-mock's ``mocker`` fixture only, never by importing the standard
library's mock module themselves: a patch made through ``mocker`` is undone when its test ends,
and one way to mock reads the same everywhere. Helper modules (fakes, builders, benchmarks) take
the test's ``mocker`` as a parameter; a type annotation names ``pytest_mock.MockType``.

Every ``.py`` file under test/ is read with ``ast``, so an import inside a function counts and a
docstring or comment naming the module does not.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

TEST_ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
# Spelled in parts so that searching the tree for the forbidden imports finds none in this file.
PACKAGE = "unittest"
MODULE = PACKAGE + ".mock"


def _python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):  # links are not followed (the sysfs fixtures loop)
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        found.extend(Path(folder) / name for name in files if name.endswith(".py"))
    return sorted(path for path in found if not path.is_symlink())


def _is_mock_module(name: str | None) -> bool:
    return name is not None and (name == MODULE or name.startswith(MODULE + "."))


def mock_imports(path: Path) -> list[int]:
    """The lines of ``path`` that import the standard library's mock module: ``import`` of it,
    ``from`` it, or the module itself ``from`` its package."""
    lines = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found = any(_is_mock_module(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found = _is_mock_module(node.module) or (
                node.module == PACKAGE and any(alias.name == "mock" for alias in node.names)
            )
        else:
            continue
        if found:
            lines.append(node.lineno)
    return sorted(lines)


def offenders(root: Path) -> list[str]:
    """``file:line`` (relative to ``root``) of every such import under ``root``."""
    return [
        f"{path.relative_to(root).as_posix()}:{line}"
        for path in _python_files(root)
        for line in mock_imports(path)
    ]


def test_no_test_module_imports_the_mock_module_itself() -> None:
    found = offenders(TEST_ROOT)
    assert found == [], (
        f"mock with pytest-mock's mocker fixture (mocker.Mock, mocker.patch, ...), not {MODULE}; "
        "annotate with pytest_mock.MockType; a helper module takes the test's mocker:\n"
        + "\n".join(f"test/{where}" for where in found)
    )


def test_the_check_finds_every_form_and_nothing_else(tmp_path: Path) -> None:
    source = f'''"""A docstring may say: from {MODULE} import MagicMock."""

import {PACKAGE}
import {MODULE}
import {MODULE} as spelled_out
from {MODULE} import MagicMock, patch
from {PACKAGE} import mock
from {PACKAGE} import TestCase, mock as aliased
from {PACKAGE} import TestCase
from pytest_mock import MockerFixture, MockType

# from {MODULE} import call  (a comment)


def helper() -> None:
    from {MODULE} import ANY
'''
    (tmp_path / "deeper").mkdir()
    (tmp_path / "deeper" / "test_hostile.py").write_text(source)
    (tmp_path / "clean.py").write_text("import unittest\nfrom pytest_mock import MockerFixture\n")
    (tmp_path / "notes.txt").write_text(f"import {MODULE}\n")  # not Python: not read
    assert offenders(tmp_path) == [f"deeper/test_hostile.py:{line}" for line in (4, 5, 6, 7, 8, 16)]
