"""The chart tests' fixtures: the ``helm`` binary and the chart rendered with its defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import render

from pkg.devcluster.cluster import default_bin_dir


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary built by ``make tools`` (a test never builds it)."""
    path = default_bin_dir() / "helm"
    assert path.is_file(), f"{path} is missing: run `make tools`"
    return path


@pytest.fixture(scope="module")
def default_docs(helm: Path) -> list[dict[str, Any]]:
    return render(helm)
