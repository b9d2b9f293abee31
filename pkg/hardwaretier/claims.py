"""A claim prepared by the gpu-handler's real preparation pipeline, with no API server.

The kubelet plugin's Prepare (:mod:`pkg.gpuhandler.preparation`) reads two things from the API
server: the ResourceClaim with its allocation, and the published offer each allocated device
names. Everything else is the node's own: the checkpoint, the node lock, the device kinds, the
vendor's preparer working on the card, the CDI specs. :class:`PreparationNode` builds the
:class:`~pkg.gpuhandler.preparation.setup.PreparationContainer` as gpu-handler builds it and
overrides only the API-facing providers: claims are allocated here, in memory, the way the
scheduler allocates them; offers come from the slices ``gpu-handler offers`` printed for this
node; events and the ``DriverFilesReady`` state go to the log (:class:`LoggedDriverFiles`). So
the answer — the claim's CDI device IDs and the base spec's, which Prepare writes into the same
CDI folder from the driver root the backend was given — is the one the kubelet would get on this
node.

The checkpoint, the node lock and the CDI folder live under a work folder of the caller's, never
in the kubelet's or the runtime's folders: a run leaves nothing a kubelet or gpu-handler on the
node would read.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dependency_injector import providers
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1Device,
    V1DeviceAllocationConfiguration,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1Pod,
    V1ResourceClaimStatus,
    V1ResourceSlice,
)

from api.gpu.v1alpha1 import ComputeDomain
from pkg.backends import VendorBackend
from pkg.domain.names import DRIVER
from pkg.dra.model.slices import pool_name
from pkg.framework.client import NotFoundError
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.driver import GpuDriver
from pkg.gpuhandler.preparation.driver_files_status import DriverFilesFinding
from pkg.gpuhandler.preparation.setup import PluginSettings, PreparationContainer

logger = logging.getLogger(__name__)

NAMESPACE: Final = "hardware-tier"
REQUEST: Final = "gpu"


class PrepareFailedError(RuntimeError):
    """The pipeline answered the claim with an error (its message, which names the claim)."""


def capabilities_config(capabilities: Sequence[str]) -> dict[str, Any]:
    """A device's opaque config (``GpuConfig``) asking for exactly these driver capabilities."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GpuConfig",
        "driverCapabilities": list(capabilities),
    }


@dataclass
class MemoryClaims:
    """The API server's ResourceClaims, as far as Prepare reads them."""

    by_name: dict[tuple[str, str], ResourceV1ResourceClaim] = field(default_factory=dict)

    def get(self, namespace: str, name: str) -> ResourceV1ResourceClaim:
        try:
            return self.by_name[(namespace, name)]
        except KeyError:
            raise NotFoundError(
                status=404, reason="NotFound", message=f"resourceclaims {namespace}/{name} not found"
            ) from None

    def allocate(
        self,
        name: str,
        device: V1Device,
        *,
        pool: str,
        consumed: Mapping[str, str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> ClaimRef:
        """A new claim with ``device`` allocated to its request ``gpu``, as the scheduler writes it;
        ``consumed`` makes it a share (its own share ID, the capacity it consumed)."""
        uid = str(uuid.uuid4())
        configs = []
        if config is not None:
            opaque = V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=dict(config))
            configs.append(
                V1DeviceAllocationConfiguration(source="FromClaim", opaque=opaque, requests=[REQUEST])
            )
        result = V1DeviceRequestAllocationResult(
            request=REQUEST,
            driver=DRIVER,
            pool=pool,
            device=device.name,
            share_id=str(uuid.uuid4()) if consumed is not None else None,
            consumed_capacity=dict(consumed) if consumed is not None else None,
        )
        self.by_name[(NAMESPACE, name)] = ResourceV1ResourceClaim(
            metadata=V1ObjectMeta(name=name, namespace=NAMESPACE, uid=uid),
            status=V1ResourceClaimStatus(
                allocation=V1AllocationResult(
                    devices=V1DeviceAllocationResult(results=[result], config=configs)
                )
            ),
        )
        return ClaimRef(namespace=NAMESPACE, name=name, uid=uid)


class SliceOffers:
    """The offers Prepare looks devices up in: the node's ResourceSlices, by pool and name."""

    def __init__(self, slices: Sequence[V1ResourceSlice]) -> None:
        self._devices = {
            (rs.spec.pool.name, device.name): device for rs in slices for device in rs.spec.devices or []
        }

    def device(self, pool: str, name: str) -> V1Device | None:
        return self._devices.get((pool, name))


class NoPods:
    """No Pod reserves these claims (only a VFIO claim's Pod is read, for its annotation)."""

    def get(self, namespace: str, name: str) -> V1Pod:
        raise NotFoundError(status=404, reason="NotFound", message=f"pods {namespace}/{name} not found")


class NoComputeDomains:
    """No ComputeDomain exists here (no API server): a channel claim is refused as not owned."""

    def get(self, namespace: str, name: str) -> ComputeDomain:
        raise NotFoundError(
            status=404, reason="NotFound", message=f"computedomains {namespace}/{name} not found"
        )


class LoggedEvents:
    """The claim and card events gpu-handler would record, logged instead."""

    def warning(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        logger.warning("claim %s: %s: %s", claim, reason, message)

    def normal(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        logger.info("claim %s: %s: %s", claim, reason, message)

    def card_warning(self, card: str, *, reason: str, message: str) -> None:
        logger.warning("card %s: %s: %s", card, reason, message)


@dataclass
class ChangedCards:
    """Cards whose MIG mode a Prepare or Unprepare changed (gpu-handler re-reads them)."""

    cards: list[str] = field(default_factory=list)

    def changed(self, card: str) -> None:
        self.cards.append(card)


@dataclass
class LoggedDriverFiles:
    """The driver files' finding Prepare reports (gpu-handler's ``DriverFilesReady``), kept and logged."""

    findings: list[DriverFilesFinding] = field(default_factory=list)

    def report(self, finding: DriverFilesFinding) -> None:
        if not self.findings or self.findings[-1] != finding:
            logger.info("driver files: ready=%s %s: %s", finding.ready, finding.reason, finding.message)
        self.findings.append(finding)

    def sync(self) -> None:
        return None


class _NoHealthFeed:
    """The kubelet's health stream is not served here: a change marks a list nobody rebuilds."""

    def __init__(self) -> None:
        self.stale = threading.Event()

    def refresh(self) -> None:
        return None


@dataclass(frozen=True)
class PreparedClaim:
    """A prepared claim and the CDI device IDs its answer holds, in the answer's order."""

    ref: ClaimRef
    cdi_device_ids: tuple[str, ...]


class PreparationNode:
    """This node's Prepare and Unprepare over ``backend``, with files under ``workdir``."""

    def __init__(
        self,
        *,
        backend: VendorBackend,
        node_name: str,
        workdir: Path,
        slices: Sequence[V1ResourceSlice],
        sysfs_root: Path = Path("/sys"),
        dev_root: Path = Path("/dev"),
        proc_root: Path = Path("/proc"),
    ) -> None:
        self.settings = PluginSettings(
            node_name=node_name,
            kubelet_root=workdir / "kubelet",
            instance=str(uuid.uuid4()),
            cdi_dir=workdir / "cdi",
            mps_root=workdir / "mps",
            sysfs_root=sysfs_root,
            dev_root=dev_root,
            proc_root=proc_root,
        )
        self.claims = MemoryClaims()
        self.changed = ChangedCards()
        self.driver_files = LoggedDriverFiles()
        self.container = PreparationContainer(
            settings=self.settings, backend=backend, card_changes=self.changed
        )
        self.container.claims.override(providers.Object(self.claims))
        self.container.offers.override(providers.Object(SliceOffers(slices)))
        self.container.pods.override(providers.Object(NoPods()))
        self.container.domains.override(providers.Object(NoComputeDomains()))
        self.container.events.override(providers.Object(LoggedEvents()))
        self.container.health.override(providers.Object(_NoHealthFeed()))
        self.container.driver_files_status.override(providers.Object(self.driver_files))

    @property
    def cdi_dir(self) -> Path:
        return self.settings.cdi_dir

    @property
    def pool(self) -> str:
        return pool_name(self.settings.node_name)

    @property
    def driver(self) -> GpuDriver:
        driver: GpuDriver = self.container.driver()
        return driver

    def prepare(
        self,
        name: str,
        device: V1Device,
        *,
        consumed: Mapping[str, str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> PreparedClaim:
        """Allocates ``device`` to a new claim ``name`` and prepares it as the kubelet would ask;
        :class:`PrepareFailedError` with the pipeline's answer when it fails."""
        ref = self.claims.allocate(name, device, pool=self.pool, consumed=consumed, config=config)
        outcome = self.driver.prepare([ref])[ref.uid]
        if outcome.error:
            raise PrepareFailedError(f"claim {ref} on device {device.name}: {outcome.error}")
        ids = tuple(i for prepared in outcome.devices for i in prepared.cdi_device_ids)
        return PreparedClaim(ref=ref, cdi_device_ids=ids)

    def unprepare(self, claim: PreparedClaim) -> None:
        """Gives the claim's devices back; raises with the pipeline's answer when it cannot."""
        error = self.driver.unprepare([claim.ref]).get(claim.ref.uid, "no answer for the claim")
        if error:
            raise PrepareFailedError(f"unprepare of claim {claim.ref}: {error}")
