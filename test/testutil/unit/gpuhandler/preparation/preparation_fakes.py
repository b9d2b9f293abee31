"""A node for the preparation tests: the real pipelines and preparer over a simulated GPU host.

:func:`node` builds what the gpu-handler builds (through :class:`PreparationContainer`, with the
API-facing providers overridden): the NVIDIA preparer over the simulated NVML, whose driver state
lives in a folder as on the e2e nodes, the checkpoint and CDI folder in temporary folders, and
claims and offers served from memory. Claims are built like the scheduler's allocations.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from dependency_injector import providers
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1Device,
    V1DeviceAllocationConfiguration,
    V1DeviceAllocationResult,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1Pod,
    V1ResourceClaimConsumerReference,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture, MockType

from api.gpu.v1alpha1 import ComputeDomain
from pkg.backends import BackendOptions, VendorPlugin
from pkg.backends.driver_files import DriverRootOptions
from pkg.backends.nvidia.imex_host import ImexChannelNodes
from pkg.backends.simulated.backend import SIMULATED_NVIDIA, SimulatedBackend
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.backends.simulated.driver_memory import CardRecord
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.devcluster.driverroot import DriverRoot, Layout, build_driver_root
from pkg.devcluster.gpuhost import SimulatedGpuHost
from pkg.domain.names import DRIVER
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation import crash, metrics
from pkg.gpuhandler.preparation.driver import GpuDriver
from pkg.gpuhandler.preparation.kinds import DeviceKind
from pkg.gpuhandler.preparation.setup import PluginSettings, PreparationContainer
from pkg.gpuhandler.preparation.startup import StartupReport, reconcile_at_startup
from testutil.k8s_fields import name_of, uid_of

ROOT = Path(__file__).resolve().parents[5]
FIXTURES = ROOT / "test" / "fixtures" / "sysfs"
NODE = "node-a"
POOL = f"gpus/{NODE}"
A30 = "0000:3b:00.0"
A30_B = "0000:d8:00.0"


class Killed(BaseException):
    """SIGKILL as a test sees it: no ``except Exception`` runs, so nothing rolls back."""


def _killed(where: str) -> None:
    raise Killed(where)


def kill_at(n: Node, monkeypatch: pytest.MonkeyPatch, where: str, claim: ClaimRef) -> None:
    """Runs the pipeline ``where`` names (``<pipeline>:<point>:<before|after>``, as
    ``GPU_HANDLER_CRASH_AT``) for ``claim`` through a fresh instance, which dies there."""
    monkeypatch.setenv(crash.CRASH_AT_ENV, where)
    monkeypatch.setattr(crash, "die", _killed)
    doomed = n.another_instance()  # reads the variable when it builds its Prepare and Unprepare
    call = doomed.driver.prepare if where.startswith("prepare:") else doomed.driver.unprepare
    with pytest.raises(Killed) as killed:
        call([claim])
    assert str(killed.value) == where  # the point exists and was passed
    monkeypatch.delenv(crash.CRASH_AT_ENV)


def prepare_failures(reason: str) -> float:
    """``gpu_dra_prepare_failures_total`` for ``reason``, over every device type and vendor."""
    return sum(
        sample.value
        for metric in metrics.prepare_failures.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["reason"] == reason
    )


def attrs(**values: Any) -> dict[str, V1DeviceAttribute]:
    out = {}
    for key, value in values.items():
        kind = "int" if isinstance(value, int) else "string"
        out[f"gpu.deckhouse.io/{key}"] = V1DeviceAttribute(**{kind: value})
    return out


def mig_offer(card: str, *, profile: int = 14, start: int, size: int = 1) -> V1Device:
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    return V1Device(
        name=f"{base}-mig-{profile}-{start}",
        attributes=attrs(
            deviceType="MIG", pciAddress=card, profileID=profile, placementStart=start, placementSize=size
        ),
    )


def whole_offer(card: str, *, sharing: str = "Exclusive", memory: str = "24Gi") -> V1Device:
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    suffix = {"Exclusive": "", "TimeSlicing": "-ts", "MPS": "-mps"}[sharing]
    capacity = {"memory": V1DeviceCapacity(value=memory)}
    if sharing != "Exclusive":
        capacity["sharePercent"] = V1DeviceCapacity(value="100")
    return V1Device(
        name=base + suffix,
        attributes=attrs(deviceType="Physical", pciAddress=card, sharingStrategy=sharing),
        capacity=capacity,
    )


@dataclass
class Claims:
    """The API server's claims, by namespace/name."""

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
        devices: Sequence[V1Device],
        *,
        config: Mapping[str, Any] | None = None,
        pool: str = POOL,
        consumed: Mapping[str, str] | None = None,
        reserved_for: Sequence[V1Pod] = (),
        annotations: Mapping[str, str] | None = None,
    ) -> ClaimRef:
        """Allocates ``devices`` to a new claim; ``consumed`` makes each result a share (its own
        share ID, the capacity it consumed), as the scheduler allocates shared offers."""
        uid = str(uuid.uuid4())
        configs = []
        if config is not None:
            opaque = V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=dict(config))
            configs.append(
                V1DeviceAllocationConfiguration(source="FromClaim", opaque=opaque, requests=["gpu"])
            )
        claim = ResourceV1ResourceClaim(
            metadata=V1ObjectMeta(
                name=name, namespace="team", uid=uid, annotations=dict(annotations) if annotations else None
            ),
            status=V1ResourceClaimStatus(
                reserved_for=[
                    V1ResourceClaimConsumerReference(resource="pods", name=name_of(p), uid=uid_of(p))
                    for p in reserved_for
                ]
                or None,
                allocation=V1AllocationResult(
                    devices=V1DeviceAllocationResult(
                        results=[
                            V1DeviceRequestAllocationResult(
                                request="gpu",
                                driver=DRIVER,
                                pool=pool,
                                device=d.name,
                                share_id=str(uuid.uuid4()) if consumed is not None else None,
                                consumed_capacity=dict(consumed) if consumed is not None else None,
                            )
                            for d in devices
                        ],
                        config=configs,
                    )
                ),
            ),
        )
        self.by_name[("team", name)] = claim
        return ClaimRef(namespace="team", name=name, uid=uid)

    def delete(self, ref: ClaimRef) -> None:
        self.by_name.pop((ref.namespace, ref.name), None)


@dataclass
class Pods:
    """The API server's Pods, by namespace/name."""

    by_name: dict[tuple[str, str], V1Pod] = field(default_factory=dict)

    def get(self, namespace: str, name: str) -> V1Pod:
        try:
            return self.by_name[(namespace, name)]
        except KeyError:
            raise NotFoundError(
                status=404, reason="NotFound", message=f"pods {namespace}/{name} not found"
            ) from None

    def add(self, name: str, annotations: Mapping[str, str] | None = None) -> V1Pod:
        pod = V1Pod(
            metadata=V1ObjectMeta(
                name=name, namespace="team", uid=str(uuid.uuid4()), annotations=dict(annotations or {})
            )
        )
        self.by_name[("team", name)] = pod
        return pod


@dataclass
class Offers:
    devices: dict[str, V1Device] = field(default_factory=dict)

    def device(self, pool: str, name: str) -> V1Device | None:
        return self.devices.get(name) if pool == POOL else None

    def publish(self, *devices: V1Device) -> list[V1Device]:
        for device in devices:
            self.devices[device.name] = device
        return list(devices)


@dataclass
class Domains:
    """The API server's ComputeDomains, by namespace/name."""

    by_name: dict[tuple[str, str], ComputeDomain] = field(default_factory=dict)

    def get(self, namespace: str, name: str) -> ComputeDomain:
        try:
            return self.by_name[(namespace, name)]
        except KeyError:
            raise NotFoundError(
                status=404, reason="NotFound", message=f"computedomains {namespace}/{name} not found"
            ) from None

    def add(self, domain: ComputeDomain) -> ComputeDomain:
        self.by_name[(str(domain.metadata.namespace), str(domain.metadata.name))] = domain
        return domain


def regular_file_mknod(path: Path, major: int, minor: int) -> None:
    """A channel "device node" any user can make: a file naming its numbers."""
    path.write_text(f"{major}:{minor}")


@dataclass
class Node:
    """One simulated node's preparation, built from the real container."""

    host: SimulatedGpuHost
    container: PreparationContainer
    claims: Claims
    offers: Offers
    events: MockType
    cards_changed: list[str]
    pods: Pods
    mocker: MockerFixture  # the test's, for another instance's API stand-ins
    plugin: VendorPlugin = SIMULATED_NVIDIA
    extra_kinds: Sequence[DeviceKind] = ()
    domains: Domains = field(default_factory=Domains)

    @property
    def mps_root(self) -> Path:
        return self.container.settings().mps_root

    @property
    def driver(self) -> GpuDriver:
        return self.container.driver()

    @property
    def backend(self) -> SimulatedBackend:
        backend = self.container.backend()
        assert isinstance(backend, SimulatedBackend)
        return backend

    def card_state(self, card: str) -> CardRecord:
        """What the simulated driver holds for ``card``: its GPU instances and MIG mode, read
        where NVML would refuse (it lists no instances without MIG mode)."""
        nvml = self.backend._nvml
        assert isinstance(nvml, SimulatedNvml)
        return nvml.state.card(card)

    def reconcile(self, cards: Sequence[str] = (A30, A30_B)) -> StartupReport:
        """Start-up reconciliation as gpu-handler runs it, over this node's cards."""
        c = self.container
        return reconcile_at_startup(
            store=c.store(),
            claims=c.claims(),
            release=c.record_release(),
            kinds=c.kinds(),
            cdi=c.cdi(),
            cards=lambda: list(cards),
        )

    def another_instance(self) -> Node:
        """A second gpu-handler on the same node (a rolling update): shared files, own objects."""
        return node(
            self.mocker,
            self.host.base.parent,
            claims=self.claims,
            offers=self.offers,
            pods=self.pods,
            existing_host=self.host,
            kubelet_root=self.container.settings().kubelet_root,
            plugin=self.plugin,
            extra_kinds=self.extra_kinds,
            domains=self.domains,
        )


CDI_HOOK: Final = Path("/opt/gpu-control-plane/bin/nvidia-cdi-hook-0123456789ab")


def stand_in_driver() -> DriverRoot:
    """The simulated driver's user space (its version), built once per machine and reused."""
    target = (
        Path(tempfile.gettempdir()) / "gpucp-stand-in-driver" / f"{Layout.VENDOR_FOLDER}-{DRIVER_VERSION}"
    )
    return build_driver_root(target, layout=Layout.VENDOR_FOLDER, version=DRIVER_VERSION)


def node(
    mocker: MockerFixture,
    tmp: Path,
    *,
    fixture: str = "a30-x2",
    claims: Claims | None = None,
    offers: Offers | None = None,
    existing_host: SimulatedGpuHost | None = None,
    boot_id: str = "boot-1",
    driver_state_in_memory: bool = False,
    pods: Pods | None = None,
    kubelet_root: Path | None = None,
    driver_root: DriverRootOptions | None = None,
    plugin: VendorPlugin = SIMULATED_NVIDIA,
    extra_kinds: Sequence[DeviceKind] = (),
    domains: Domains | None = None,
) -> Node:
    """A simulated node's preparation; ``extra_kinds`` are registered after the built-in kinds, the
    way a new kind is added to the composition root's list. ``mocker`` (pytest-mock's fixture)
    makes the API-facing stand-ins: the client, informers, recorder and events."""
    host = existing_host or SimulatedGpuHost.create(tmp / "host", FIXTURES / fixture)
    backend = plugin.create(
        BackendOptions(
            node_name=NODE,
            sysfs_root=host.root,
            dev_root=host.dev,
            proc_root=host.root / "proc",
            state_dir=None if driver_state_in_memory else host.nvml_state,
            driver_root=driver_root or DriverRootOptions(root=stand_in_driver().root, cdi_hook=CDI_HOOK),
        )
    )
    settings = PluginSettings(
        node_name=NODE,
        kubelet_root=kubelet_root or tmp / "kubelet",
        instance=str(uuid.uuid4()),
        cdi_dir=tmp / "cdi",
        mps_root=tmp / "mps",
        lock_timeout=5.0,
        sysfs_root=host.root,
        dev_root=host.dev,
        proc_root=host.root / "proc",
    )
    claims = claims or Claims()
    offers = offers or Offers()
    pods = pods or Pods()
    events: MockType = mocker.MagicMock()
    changed: list[str] = []
    card_changes = mocker.MagicMock()
    card_changes.changed.side_effect = changed.append
    gpus = mocker.MagicMock(spec=SharedInformer)
    gpus.store.list.return_value = []
    domains = domains or Domains()
    container = PreparationContainer(
        settings=settings,
        client=mocker.MagicMock(spec=KubeClient),
        informers=mocker.MagicMock(spec=InformerFactory),
        recorder=mocker.MagicMock(spec=EventRecorderLogger),
        backend=backend,
        gpu_informer=gpus,
        card_changes=card_changes,
    )
    container.claims.override(providers.Object(claims))
    container.offers.override(providers.Object(offers))
    container.events.override(providers.Object(events))
    container.pods.override(providers.Object(pods))
    container.boot_id.override(providers.Object(lambda: boot_id))
    container.domains.override(providers.Object(domains))
    container.channel_nodes.override(
        providers.Object(
            ImexChannelNodes(dev_root=host.dev, proc_root=host.root / "proc", mknod=regular_file_mknod)
        )
    )
    for kind in extra_kinds:
        container.device_kinds.add_args(providers.Object(kind))
    return Node(
        host=host,
        container=container,
        claims=claims,
        offers=offers,
        events=events,
        cards_changed=changed,
        pods=pods,
        mocker=mocker,
        plugin=plugin,
        extra_kinds=extra_kinds,
        domains=domains,
    )
