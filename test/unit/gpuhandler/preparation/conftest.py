"""Every test's MPS daemons are real detached processes: none may outlive its test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pkg.backends.simulated.sharing import stop_simulated_daemons


@pytest.fixture(autouse=True)
def _no_daemon_left_behind(tmp_path: Path) -> Iterator[None]:
    yield
    stop_simulated_daemons(tmp_path)
