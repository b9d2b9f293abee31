"""A class under pkg/ named ``…State`` or ``…Snapshot`` is a reconcile's state.

*State* means one thing in this project (docs/architecture.md, "Names"): what one reconcile's
handlers work on, a framework ``Snapshot`` (read-only) or ``Scratch`` (filled in chain order). A
lifecycle enum is a phase, a severity a level, a stored hardware fact a record, and a usage pass a
sample; this check keeps a new class from taking the word back. A class is a state when one of
its bases is ``Snapshot`` or ``Scratch``, or a class of ours that is a state; bases are read by
name with ``ast``, so nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ROOTS = frozenset({"Snapshot", "Scratch"})
SUFFIXES = ("State", "Snapshot")


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Subscript):  # Generic[T], Snapshot[...]
        base = base.value
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


def classes(sources: Iterable[tuple[str, str]]) -> Iterator[tuple[str, int, str, frozenset[str]]]:
    """``(where, line, name, base names)`` of every class in the ``(where, text)`` sources."""
    for where, text in sources:
        for node in ast.walk(ast.parse(text, filename=where)):
            if isinstance(node, ast.ClassDef):
                bases = frozenset(b for b in map(_base_name, node.bases) if b is not None)
                yield where, node.lineno, node.name, bases


def misnamed(sources: Iterable[tuple[str, str]]) -> list[str]:
    """``<where>:<line>: <class>`` for every class named like a state that is none."""
    found = list(classes(sources))
    states = set(ROOTS)
    grew = True
    while grew:  # a state's subclass is a state, however deep
        grew = False
        for _, _, name, bases in found:
            if name not in states and bases & states:
                states.add(name)
                grew = True
    return [
        f"{where}:{line}: {name}"
        for where, line, name, bases in found
        if name.endswith(SUFFIXES) and name not in ROOTS and not bases & states
    ]


def _pkg_sources() -> list[tuple[str, str]]:
    return [
        (path.relative_to(ROOT).as_posix(), path.read_text()) for path in sorted((ROOT / "pkg").rglob("*.py"))
    ]


def test_every_class_named_like_a_state_is_a_reconcile_state() -> None:
    found = misnamed(_pkg_sources())
    assert found == [], (
        "a class named ...State or ...Snapshot that is no Snapshot or Scratch "
        "(name it for what it is: ...Phase, ...Level, ...Record, ...Sample):\n" + "\n".join(found)
    )


def test_the_check_finds_a_state_that_is_none_and_accepts_a_subclass_of_a_state() -> None:
    sources = [
        (
            "a.py",
            "class Snapshot: ...\n"
            "class Base(Snapshot): ...\n"
            "class DeepState(Base): ...\n"
            "class ScratchState(reconcile.Scratch): ...\n"
            "class PrepareState(enum.StrEnum): ...\n"
            "class UsageSnapshot: ...\n"
            "class Stateless: ...\n",
        )
    ]
    assert misnamed(sources) == ["a.py:5: PrepareState", "a.py:6: UsageSnapshot"]
