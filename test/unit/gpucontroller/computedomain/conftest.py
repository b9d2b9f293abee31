"""The domains, reconcile states and the recording API the compute-domain controller's tests use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from testutil.compute_domains import UID, RecordingApi

from api.gpu.v1alpha1 import ComputeDomain, ComputeDomainSettings, ComputeDomainStatus
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState, Ensemble
from pkg.gpucontroller.imexensemble.settings import DaemonSettings

SETTINGS = ComputeDomainSettings(
    image="imex:1", command=["python", "-m", "pkg.backends.simulated.imex_daemon"], privileged=False
)


@pytest.fixture
def api() -> RecordingApi:
    return RecordingApi()


@pytest.fixture
def domain() -> Callable[..., ComputeDomain]:
    """``domain(name="job", uid=UID, status=None, **spec)``: a domain in namespace ``team``."""

    def make(
        name: str = "job", uid: str = UID, status: ComputeDomainStatus | None = None, **spec: Any
    ) -> ComputeDomain:
        made = ComputeDomain.from_api_dict(
            {
                "metadata": {"name": name, "namespace": "team", "uid": uid, "generation": 1},
                "spec": {"channel": {"resourceClaimTemplate": {"name": f"{name}-channel"}}, **spec},
            }
        )
        made.status = status
        return made

    return make


@pytest.fixture
def state() -> Callable[..., ComputeDomainState]:
    """``state(domain, **fields)``: a fetched reconcile state with empty caches unless given."""

    def make(domain: ComputeDomain, **fields: Any) -> ComputeDomainState:
        resource = Resource(
            Request(name=str(domain.metadata.name), namespace="team"),
            getter=lambda _r: domain,
            writer=None,  # type: ignore[arg-type]  # steps never write the domain themselves
            status_type=ComputeDomainStatus,
        )
        resource.fetch()
        defaults: dict[str, Any] = {
            "daemons": DaemonSettings(SETTINGS),
            "components_namespace": "gpu-system",
            "device_class": None,
            "template": None,
            "claims": (),
            "cliques": {},
            "ensemble": Ensemble(),
            "live_domains": frozenset({str(domain.metadata.uid)}),
            "channels_in_use": frozenset(),
        }
        return ComputeDomainState(resource=resource, **(defaults | fields))

    return make
