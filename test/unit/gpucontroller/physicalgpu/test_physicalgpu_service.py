"""The PhysicalGPU controller's delete: exactly this object, and a vanished one is not an error."""

from __future__ import annotations

import pytest
from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import ConflictError, KubeClient, NotFoundError
from pkg.gpucontroller.physicalgpu.internal.service import PhysicalGPUService

GPU = PhysicalGPU(metadata=V1ObjectMeta(name="n1-0000-02-00-0", uid="uid-1"))


def test_delete_is_guarded_by_the_uid(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)

    assert PhysicalGPUService(client).delete(GPU) is True

    client.delete.assert_called_once_with(PHYSICAL_GPU, "n1-0000-02-00-0", uid="uid-1")


def test_an_object_already_gone_is_reported_not_raised(mocker: MockerFixture) -> None:
    client = mocker.create_autospec(KubeClient, instance=True)
    client.delete.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")

    assert PhysicalGPUService(client).delete(GPU) is False


def test_a_successor_with_another_uid_is_not_deleted(mocker: MockerFixture) -> None:
    """The server refuses the uid precondition with 409; the service lets the handler see it."""
    client = mocker.create_autospec(KubeClient, instance=True)
    client.delete.side_effect = ConflictError(
        status=409, reason="Conflict", message="Precondition failed: UID"
    )

    with pytest.raises(ConflictError):
        PhysicalGPUService(client).delete(GPU)
