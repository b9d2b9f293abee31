"""The PhysicalGPU and its fetched reconcile resource that the PhysicalGPU controller's step and
state tests start from."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU, PhysicalGPUStatus
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.contract import Request

DELETED_AT = datetime(2026, 11, 21, 11, 0, 0, tzinfo=UTC)


@pytest.fixture
def physical_gpu() -> Callable[..., PhysicalGPU]:
    """``physical_gpu(node="n1", conditions=None, deleting=False)``: card ``n1-0-10de-20b7`` (uid
    ``u1``, generation 3) labelled with ``node`` (none when ``None``), with ``conditions`` in its
    status when given, and a deletion timestamp when ``deleting``."""

    def make(
        *, node: str | None = "n1", conditions: list[V1Condition] | None = None, deleting: bool = False
    ) -> PhysicalGPU:
        return PhysicalGPU(
            metadata=V1ObjectMeta(
                name="n1-0-10de-20b7",
                uid="u1",
                generation=3,
                labels={LABEL_NODE: node} if node else {},
                deletion_timestamp=DELETED_AT if deleting else None,
            ),
            status=PhysicalGPUStatus(conditions=conditions) if conditions is not None else None,
        )

    return make


@pytest.fixture
def gpu_resource(mocker: MockerFixture) -> Callable[[PhysicalGPU], Resource[PhysicalGPU, PhysicalGPUStatus]]:
    """``gpu_resource(gpu)``: the resource a reconcile of ``gpu`` hands its state, fetched."""

    def make(gpu: PhysicalGPU) -> Resource[PhysicalGPU, PhysicalGPUStatus]:
        resource = Resource(
            Request(name=str(gpu.metadata.name)),
            getter=lambda _r: gpu,
            writer=mocker.Mock(),
            status_type=PhysicalGPUStatus,
        )
        resource.fetch()
        return resource

    return make
