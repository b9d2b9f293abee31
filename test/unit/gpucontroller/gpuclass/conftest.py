"""The GPUClass and reconcile state the GPUClass controller's step and status tests start from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1DeviceClass

from api.gpu.v1alpha1 import GPUClass, GPUClassStatus
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.gpuclass.internal.state import GPUClassState


@pytest.fixture
def gpu_class() -> Callable[..., GPUClass]:
    """``gpu_class(name="a30", status=None, **spec)``: an Nvidia Physical GPUClass, ``spec`` added."""

    def make(name: str = "a30", status: GPUClassStatus | None = None, **spec: Any) -> GPUClass:
        cls = GPUClass.from_api_dict(
            {
                "metadata": {"name": name, "uid": "u-1", "generation": 1},
                "spec": {"vendor": "Nvidia", "deviceType": "Physical", **spec},
            }
        )
        cls.status = status
        return cls

    return make


@pytest.fixture
def class_state() -> Callable[..., GPUClassState]:
    """``class_state(cls, existing=None, uuids=None, unresolved=())``: a fetched reconcile state,
    as the reconciler hands it to the steps (the steps only read the object and edit its status)."""

    def make(
        cls: GPUClass,
        existing: V1DeviceClass | None = None,
        uuids: tuple[str, ...] | None = None,
        unresolved: tuple[str, ...] = (),
    ) -> GPUClassState:
        resource = Resource(
            Request(name=str(cls.metadata.name)),
            getter=lambda _r: cls,
            writer=None,  # type: ignore[arg-type]  # steps never write the GPUClass themselves
            status_type=GPUClassStatus,
        )
        resource.fetch()
        return GPUClassState(resource=resource, existing=existing, uuids=uuids, unresolved=unresolved)

    return make
