"""Counts CEL evaluations for the tests that assert how often selectors really run."""

from __future__ import annotations

import pytest

from pkg.dra.allocator import CelEnvironment
from pkg.dra.allocator.cel_env import CompiledSelector, DeviceInput


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
