"""Makes ``alloc_builders`` (the slice/class/claim builders beside this file) importable, and
counts CEL evaluations for the tests that assert how often selectors really run.

pytest runs with ``--import-mode=importlib``, which does not put test folders on ``sys.path``;
the allocator tests share one builder module, so this folder is added once, here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pkg.dra.allocator import CelEnvironment
from pkg.dra.allocator.cel_env import CompiledSelector, DeviceInput

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def cel_evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every CEL evaluation from now on, by expression (how often the engine really ran)."""
    calls: list[str] = []
    original = CelEnvironment.matches

    def counting(self: CelEnvironment, selector: CompiledSelector, device: DeviceInput) -> bool:
        calls.append(selector.expression)
        return original(self, selector, device)

    monkeypatch.setattr(CelEnvironment, "matches", counting)
    return calls
