"""The PhysicalGPUs the node-labels tests label nodes from."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUStatus

MakeCard = Callable[..., PhysicalGPU]


@pytest.fixture
def card() -> MakeCard:
    """``card(vendor="nvidia", ready=None, node="n1")``: a PhysicalGPU on ``node``, with a
    ``DriverReady`` condition of status ``ready`` when given."""

    def make(vendor: str = "nvidia", ready: str | None = None, node: str = "n1") -> PhysicalGPU:
        conditions = (
            [
                V1Condition(
                    type="DriverReady",
                    status=ready,
                    reason="R",
                    message="",
                    last_transition_time="2026-01-01T00:00:00Z",
                )
            ]
            if ready
            else None
        )
        return PhysicalGPU(
            metadata=V1ObjectMeta(name=f"{node}-0", labels={LABEL_NODE: node, LABEL_VENDOR: vendor}),
            status=PhysicalGPUStatus(conditions=conditions),
        )

    return make
