"""Ensemble states and a recording API for the ensemble controller's tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from testutil.compute_domains import CLIQUE_A, RecordingEnsembleApi

from api.gpu.v1alpha1 import ComputeDomainSettings
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.settings import DaemonSettings

SETTINGS = ComputeDomainSettings(
    image="imex:1", command=["python", "-m", "pkg.backends.simulated.imex_daemon"], privileged=False
)


@pytest.fixture
def api() -> RecordingEnsembleApi:
    return RecordingEnsembleApi()


@pytest.fixture
def state() -> Callable[..., EnsembleState]:
    """``state(**fields)``: clique A, one pinned domain, settings, no nodes or objects unless given."""

    def make(**fields: Any) -> EnsembleState:
        defaults: dict[str, Any] = {
            "clique": CLIQUE_A,
            "domains": ("team/job",),
            "nodes": frozenset(),
            "daemons": DaemonSettings(SETTINGS),
            "namespace": "gpu-system",
            "pods": (),
            "config_map": None,
        }
        return EnsembleState(**(defaults | fields))

    return make
