"""The Names table of docs/architecture.md names only code that exists, and each concept once.

The table's last column ("in code") says where a concept lives. Every backticked text in it is
checked by one rule, decided by the characters it is made of:

* a dotted path that starts with ``pkg.`` or ``api.`` must resolve: its longest prefix that
  imports (``importlib``) is the module, and every name after that is an attribute of what came
  before (a class, a function, a constant, a submodule). A class member is also found among the
  annotations of the class and its bases, so a dataclass or pydantic field counts;
* a bare identifier (``SharingStrategy``) must be defined somewhere under ``pkg/`` or ``api/``: a
  class, a function, or a name assigned at module level or in a class body, read with ``ast``
  (an import defines nothing, and neither does a function's local variable);
* a text holding a character that cannot be in a dotted path of ASCII identifiers (a space,
  ``/``, ``:``, ``-``, ``<``, ...) is a value, a path or a label, not a Python name
  (``deviceType: Physical``, ``internal/service``, ``gpu-0000-02-00-0``), and is skipped;
* any other text, made only of letters, digits, ``_`` and ``.``, is an offender: a dotted path
  into something other than ``pkg`` or ``api`` (``os.path``), or a malformed one (``pkg..x``).

A concept (the first column, without its bold) may have one row only, compared without case; and a
name may mean one concept only: a Python name (the last part of a reference checked above) is
listed in one row, so no two rows claim the same class, module or field.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
HEADING = "## Names"
PACKAGES = ("pkg", "api")
# The table has some forty rows; far fewer means the parser lost its way (and would pass).
MIN_ROWS = 30

_PATH_CHARACTERS = re.compile(r"[A-Za-z0-9_.]+")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED_PATH = re.compile(rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})*")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    """One row of the table: where it is (``line``, 1-based), its concept and its code references."""

    line: int
    name: str
    references: tuple[str, ...]


def names_table(text: str) -> list[Row]:
    """The rows of the first table under the ``## Names`` heading (its header and rule left out);
    ValueError when there is no such heading, or a row has not three cells."""
    lines = text.splitlines()
    if HEADING not in lines:
        raise ValueError(f"no heading {HEADING!r}")
    start = lines.index(HEADING) + 1
    rows: list[Row] = []
    header_seen = False
    for number, line in enumerate(lines[start:], start=start + 1):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if header_seen:
                break
            continue
        cells = _cells(line)
        if len(cells) != 3:
            raise ValueError(f"line {number}: {len(cells)} cells, not 3: {line}")
        if not header_seen:
            header_seen = True
            continue
        if all(set(cell) <= set("-: ") for cell in cells):
            continue  # the rule under the header
        rows.append(Row(number, name=cells[0].strip("*").strip(), references=tuple(_CODE.findall(cells[2]))))
    return rows


def _cells(line: str) -> list[str]:
    """The cells of a table line; a ``|`` inside backticks belongs to its cell."""
    cells: list[str] = []
    current: list[str] = []
    in_code = False
    for char in line.strip():
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    return [cell.strip() for cell in cells[1:-1]]


def _assigned(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assigned(element)
    elif isinstance(target, ast.Starred):
        yield from _assigned(target.value)


def _defined(body: Iterable[ast.stmt]) -> Iterator[str]:
    """The names a module or class body defines; class bodies and the blocks of ``if``, ``try``
    and ``with`` are entered, function bodies are not."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield node.name
            yield from _defined(node.body)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from _assigned(target)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            yield from _assigned(node.target)
        elif isinstance(node, ast.If):
            yield from _defined([*node.body, *node.orelse])
        elif isinstance(node, ast.Try | ast.TryStar):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            yield from _defined([*node.body, *handlers, *node.orelse, *node.finalbody])
        elif isinstance(node, ast.With):
            yield from _defined(node.body)


@functools.cache
def defined_names(root: Path = ROOT) -> frozenset[str]:
    """Every name a module or class under ``root/pkg`` and ``root/api`` defines."""
    names: set[str] = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            names.update(_defined(ast.parse(path.read_text(), filename=str(path)).body))
    return frozenset(names)


def _resolve(parts: list[str]) -> str | None:
    """Why the dotted path ``parts`` names nothing, or None when it names a module or attribute."""
    end = len(parts)
    while True:
        name = ".".join(parts[:end])
        try:
            found: object = importlib.import_module(name)
            break
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if end > 1 and (name == missing or name.startswith(missing + ".")):
                end -= 1  # this prefix is no module; a shorter one may be
                continue
            return f"importing {name} failed: {exc}"
        except Exception as exc:  # the module exists but does not import: as bad as missing
            return f"importing {name} failed: {exc!r}"
    for position in range(end, len(parts)):
        attribute = parts[position]
        if hasattr(found, attribute):
            found = getattr(found, attribute)
            continue
        owner = ".".join(parts[:position])
        last = position == len(parts) - 1
        if last and isinstance(found, type) and any(_annotates(k, attribute) for k in found.__mro__):
            return None  # a field declared by annotation only (a dataclass's, a pydantic model's)
        return f"{owner} has no attribute {attribute}"
    return None


def _annotates(cls: type, attribute: str) -> bool:
    """Whether ``cls`` itself declares ``attribute`` by an annotation."""
    return attribute in vars(cls).get("__annotations__", {})


def unresolved(reference: str) -> str | None:
    """Why ``reference`` does not name code of ours, or None when it does or is skipped (see the
    module docs for the rule)."""
    if not _PATH_CHARACTERS.fullmatch(reference):
        return None  # a value, a path or a label: not a Python name
    if not _DOTTED_PATH.fullmatch(reference):
        return "not a dotted path of identifiers"
    parts = reference.split(".")
    if len(parts) == 1:
        if reference in defined_names():
            return None
        return "no class, function or assignment of that name under pkg/ or api/"
    if parts[0] not in PACKAGES:
        return f"a dotted path must start with {' or '.join(p + '.' for p in PACKAGES)}"
    return _resolve(parts)


def offenders(rows: Iterable[Row], where: str) -> list[str]:
    """``<where>:<line>: <concept>: `<reference>`: <why>`` for every reference that names nothing."""
    found = []
    for row in rows:
        for reference in row.references:
            why = unresolved(reference)
            if why is not None:
                found.append(f"{where}:{row.line}: {row.name}: `{reference}`: {why}")
    return found


def named_twice(rows: Iterable[Row], where: str) -> list[str]:
    """``<where>:<line>: <concept>`` for every row whose concept an earlier row already names."""
    first: dict[str, int] = {}
    found = []
    for row in rows:
        key = " ".join(row.name.lower().split())
        if key in first:
            found.append(f"{where}:{row.line}: {row.name} (already at line {first[key]})")
        else:
            first[key] = row.line
    return found


def listed_twice(rows: Iterable[Row], where: str) -> list[str]:
    """``<where>:<line>: <concept>: `<reference>``` for every Python name that an earlier row lists
    too; a name is the last part of a reference that is a Python name (values are skipped)."""
    first: dict[str, Row] = {}
    found = []
    for row in rows:
        for reference in dict.fromkeys(row.references):
            if not _DOTTED_PATH.fullmatch(reference):
                continue
            name = reference.rsplit(".", 1)[-1]
            earlier = first.setdefault(name, row)
            if earlier is not row:
                also = f"(also {earlier.name}, line {earlier.line})"
                found.append(f"{where}:{row.line}: {row.name}: `{reference}` {also}")
    return found


def _page() -> tuple[list[Row], str]:
    return names_table(ARCHITECTURE.read_text()), ARCHITECTURE.relative_to(ROOT).as_posix()


def test_every_code_reference_of_the_names_table_exists() -> None:
    rows, where = _page()
    assert len(rows) >= MIN_ROWS, f"{where}: only {len(rows)} rows read from its Names table"
    found = offenders(rows, where)
    assert found == [], "the Names table names code that does not exist:\n" + "\n".join(found)


def test_no_concept_of_the_names_table_is_named_twice() -> None:
    rows, where = _page()
    found = named_twice(rows, where)
    assert found == [], "one concept, one row of the Names table:\n" + "\n".join(found)


def test_no_name_of_the_names_table_stands_for_two_concepts() -> None:
    rows, where = _page()
    found = listed_twice(rows, where)
    assert found == [], "one name, one concept of the Names table:\n" + "\n".join(found)


MADE_UP = """\
# A page

## Names

| name | what it is | in code |
|---|---|---|
| **checkpoint feed** | exists | `pkg.gpuhandler.preparation.checkpoint.CheckpointFeed`, `SharingStrategy` |
| **field** | a pydantic field | `pkg.gpuhandler.preparation.checkpoint.DeviceRecord.pool` |
| **ghost** | a module that does not exist | `pkg.gpuhandler.preparation.ghost.Phantom` |
| **phantom** | an attribute that does not exist | `pkg.framework.steptaker.Pipeline.phantom_member` |
| **bare** | a bare name defined nowhere | `PhantomStrategyOfNoModule` |
| **values** | not code: skipped | `deviceType: Physical`, `internal/service`, `gpu-0000-02-00-0` |
| **stray** | malformed, or outside pkg and api | `pkg..x`, `os.path` |
| **Checkpoint  Feed** | the same concept again | |
| **feed again** | a name listed already, written another way | `CheckpointFeed`, `deviceType: Physical` |

Text after the table.

| **not** | in the table | `pkg.nothing.here` |
"""


def test_the_check_reports_a_made_up_reference_and_a_concept_named_twice() -> None:
    rows = names_table(MADE_UP)
    assert [row.name for row in rows] == [
        "checkpoint feed",
        "field",
        "ghost",
        "phantom",
        "bare",
        "values",
        "stray",
        "Checkpoint  Feed",
        "feed again",
    ]
    assert rows[0].line == 7
    found = offenders(rows, "page.md")
    assert [line.split(": ", 3)[:3] for line in found] == [
        ["page.md:9", "ghost", "`pkg.gpuhandler.preparation.ghost.Phantom`"],
        ["page.md:10", "phantom", "`pkg.framework.steptaker.Pipeline.phantom_member`"],
        ["page.md:11", "bare", "`PhantomStrategyOfNoModule`"],
        ["page.md:13", "stray", "`pkg..x`"],
        ["page.md:13", "stray", "`os.path`"],
    ]
    assert "pkg.gpuhandler.preparation has no attribute ghost" in found[0]
    assert "pkg.framework.steptaker.Pipeline has no attribute phantom_member" in found[1]
    assert named_twice(rows, "page.md") == ["page.md:14: Checkpoint  Feed (already at line 7)"]
    assert listed_twice(rows, "page.md") == [
        "page.md:15: feed again: `CheckpointFeed` (also checkpoint feed, line 7)"
    ]


def test_a_row_that_is_not_three_cells_is_refused() -> None:
    text = "## Names\n\n| name | what it is | in code |\n|---|---|---|\n| **x** | two cells |\n"
    with pytest.raises(ValueError, match="line 5: 2 cells, not 3"):
        names_table(text)
