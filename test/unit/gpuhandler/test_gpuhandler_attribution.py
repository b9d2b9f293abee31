"""One attribution pass joins the cards' processes with containers, Pods and prepared claims; the
sample feeds the metrics and, within bounded writes, the claims' status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import (
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodResourceClaimStatus,
    V1PodSpec,
    V1PodStatus,
)
from prometheus_client import CollectorRegistry, generate_latest

from api.gpu.v1alpha1 import UsageFigures
from pkg.backends.backend import BackendError
from pkg.backends.usage import CardUsage, ProcessUsage
from pkg.gpuhandler.attribution.metrics import AttributionCollector
from pkg.gpuhandler.attribution.sampler import ATTRIBUTED, CAPPED, UNATTRIBUTED, Sampler, UsageSample
from pkg.gpuhandler.attribution.usage_feed import UsageFeed, device_usage
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord, PreparePhase
from pkg.gpuhandler.preparation.kinds.mig import MigRecord
from pkg.gpuhandler.preparation.services import DeviceKey
from pkg.hardware.cgroups import ProcessCgroup

CARD, OTHER = "0000:3b:00.0", "0000:86:00.0"
CARD_UUID, OTHER_UUID, MIG_UUID = "GPU-aaaa", "GPU-bbbb", "MIG-cccc"
NAMES = {CARD: "node-a-0000-3b-00-0", OTHER: "node-a-0000-86-00-0"}


def cid(n: int) -> str:
    return f"{n:064x}"


def pod(
    name: str, uid: str, containers: dict[str, int], *, claims: list[str], generated: tuple[str, ...] = ()
) -> V1Pod:
    return V1Pod(
        metadata=V1ObjectMeta(name=name, namespace="team", uid=uid),
        spec=V1PodSpec(
            containers=[],
            resource_claims=[V1PodResourceClaim(name=c, resource_claim_name=c) for c in claims],
        ),
        status=V1PodStatus(
            container_statuses=[
                V1ContainerStatus(
                    name=n,
                    container_id=f"containerd://{cid(i)}",
                    image="i",
                    image_id="",
                    ready=True,
                    restart_count=0,
                )
                for n, i in containers.items()
            ],
            resource_claim_statuses=[
                V1PodResourceClaimStatus(name="t", resource_claim_name=g) for g in generated
            ],
        ),
    )


def claim(name: str, uid: str, *devices: DeviceRecord) -> ClaimRecord:
    return ClaimRecord(
        uid=uid, namespace="team", name=name, state=PreparePhase.PREPARE_COMPLETED, devices=list(devices)
    )


def share(device: str, share_id: str) -> DeviceRecord:
    return DeviceRecord(pool="node-a", device=device, card=CARD, device_type="Physical", share_id=share_id)


def mig_device() -> DeviceRecord:
    mig = MigRecord(
        profile_id=14, placement_start=0, placement_size=1, gpu_instance=1, compute_instance=0, uuid=MIG_UUID
    )
    return DeviceRecord(pool="node-a", device="gpu-1-mig-1g", card=OTHER, device_type="MIG", mig=mig)


PODS = [
    pod("trainer", "u-1", {"main": 1, "sidecar": 2}, claims=["shared-a"]),
    pod("server", "u-2", {"main": 3}, claims=[], generated=("shared-b",)),
    pod("mig-user", "u-3", {"main": 4}, claims=["mig"]),
]
CLAIMS = [
    claim("shared-a", "c-1", share("gpu-0-share", "s1")),
    claim("shared-b", "c-2", share("gpu-0-share", "s2")),
    claim("mig", "c-3", mig_device()),
    claim("idle", "c-4", share("gpu-0-share", "s3")),
]
CGROUPS = {
    101: ProcessCgroup(path="/k8s.io/1", container_id=cid(1), pod_uid=None),
    102: ProcessCgroup(path="/k8s.io/1", container_id=cid(1), pod_uid=None),
    103: ProcessCgroup(path="/k8s.io/2", container_id=cid(2), pod_uid=None),
    104: ProcessCgroup(path="/kubepods/podu-2/x", container_id=None, pod_uid="u-2"),
    105: ProcessCgroup(path="/system.slice/host.service", container_id=None, pod_uid=None),
    106: ProcessCgroup(path="/k8s.io/4", container_id=cid(4), pod_uid=None),
}


class Energy:
    def __init__(self) -> None:
        self.mj = {CARD: 1_000_000, OTHER: 0}

    def usage(self, address: str) -> CardUsage:
        if address == CARD:
            processes = [
                ProcessUsage(pid=101, device_uuid=CARD_UUID, memory_bytes=1 << 30, sm_percent=30),
                ProcessUsage(pid=102, device_uuid=CARD_UUID, memory_bytes=1 << 30, sm_percent=10),
                ProcessUsage(pid=103, device_uuid=CARD_UUID, memory_bytes=None, sm_percent=0),
                ProcessUsage(pid=104, device_uuid=CARD_UUID, memory_bytes=2 << 30, sm_percent=40),
                ProcessUsage(pid=105, device_uuid=CARD_UUID, memory_bytes=5 << 20, sm_percent=20),
            ]
            return CardUsage(
                address=CARD, uuid=CARD_UUID, energy_mj=self.mj[CARD], processes=tuple(processes)
            )
        mig = ProcessUsage(pid=106, device_uuid=MIG_UUID, memory_bytes=3 << 20, sm_percent=None)
        return CardUsage(address=OTHER, uuid=OTHER_UUID, energy_mj=None, processes=(mig,))


def sampler(energy: Energy, *, max_series: int = 1000, pods: list[V1Pod] = PODS) -> Sampler:
    return Sampler(
        read_usage=energy.usage,
        cards=lambda: NAMES,
        prepared=lambda: CLAIMS,
        pods=lambda: pods,
        cgroup=CGROUPS.get,
        now=lambda: datetime(2026, 11, 26, 12, 0, tzinfo=UTC),
        max_series=max_series,
    )


def rows_by(sample: UsageSample) -> dict[tuple[str, str, str], Any]:
    return {(r.key.pod, r.key.container, r.key.claim): r for r in sample.rows}


def test_processes_are_summed_per_container_and_joined_with_the_claim_their_pod_holds() -> None:
    sample = sampler(Energy()).sample()
    rows = rows_by(sample)

    main = rows[("trainer", "main", "shared-a")]
    assert (main.processes, main.memory_bytes, main.sm_percent) == (2, 2 << 30, 40)
    assert main.key.physicalgpu == NAMES[CARD]
    assert main.key.attribution == ATTRIBUTED
    assert rows[("trainer", "sidecar", "shared-a")].memory_bytes is None  # NVML gave no figure
    # the Pod found by its UID alone: container unknown; its claim by the generated name
    assert rows[("server", "", "shared-b")].memory_bytes == 2 << 30
    mig = rows[("mig-user", "main", "mig")]
    assert (mig.key.uuid, mig.sm_percent) == (MIG_UUID, None)


def test_a_process_of_no_pod_is_reported_as_such_never_dropped() -> None:
    rows = rows_by(sampler(Energy()).sample())

    host = rows[("", "", "")]
    assert host.key.attribution == UNATTRIBUTED
    assert (host.key.uuid, host.memory_bytes) == (CARD_UUID, 5 << 20)


def test_every_prepared_device_is_there_idle_ones_too() -> None:
    sample = sampler(Energy()).sample()

    devices = {d.claim: d for d in sample.devices}
    assert set(devices) == {"shared-a", "shared-b", "mig", "idle"}
    assert devices["mig"].uuid == MIG_UUID
    assert sample.rows_of(devices["idle"]) == []
    assert [r.key.container for r in sample.rows_of(devices["shared-a"])] == ["main", "sidecar"]


def test_energy_is_shared_by_sm_share_between_passes() -> None:
    energy = Energy()
    s = sampler(energy)
    first = rows_by(s.sample())
    energy.mj[CARD] += 100_000  # 100 J on the card
    second = rows_by(s.sample())

    assert all(r.energy_joules == 0 for r in first.values())  # no previous reading yet
    # SM shares on the card: trainer/main 40, sidecar 0, server 40, host 20 (of 100)
    assert second[("trainer", "main", "shared-a")].energy_joules == pytest.approx(40.0)
    assert second[("server", "", "shared-b")].energy_joules == pytest.approx(40.0)
    assert second[("", "", "")].energy_joules == pytest.approx(20.0)
    assert second[("mig-user", "main", "mig")].energy_joules == 0  # that card has no counter


def test_a_row_that_ends_takes_its_energy_total_with_it() -> None:
    energy = Energy()
    s = sampler(energy)
    s.sample()
    energy.mj[CARD] += 100_000
    s.sample()
    gone = sampler(energy, pods=PODS[1:])  # the trainer Pod is gone: its processes are unattributed
    gone._energy = s._energy  # the same running totals
    energy.mj[CARD] += 100_000
    rows = rows_by(gone.sample())

    assert ("trainer", "main", "shared-a") not in rows
    assert rows[("server", "", "shared-b")].energy_joules == pytest.approx(80.0)


def test_rows_over_the_cap_are_folded_per_device() -> None:
    sample = sampler(Energy(), max_series=3).sample()

    assert len(sample.rows) <= 3
    capped = [r for r in sample.rows if r.key.attribution == CAPPED]
    assert capped
    assert sample.folded >= 3
    total = sum(r.processes for r in sample.rows)
    assert total == 6  # every process still counted


def test_a_card_that_cannot_be_read_is_named_and_the_others_go_on() -> None:
    energy = Energy()

    def read(address: str) -> CardUsage:
        if address == OTHER:
            raise BackendError(address=OTHER, reason="NvmlGpuIsLost", message="fell off the bus")
        return energy.usage(address)

    s = Sampler(
        read_usage=read,
        cards=lambda: NAMES,
        prepared=lambda: CLAIMS,
        pods=lambda: PODS,
        cgroup=CGROUPS.get,
        now=lambda: datetime.now(UTC),
    )
    sample = s.sample()

    assert sample.failed_cards == (OTHER,)
    assert {r.key.uuid for r in sample.rows} == {CARD_UUID}
    # the MIG device's UUID is in the checkpoint: its series stay while its card cannot be read
    assert "mig" in {d.claim for d in sample.devices}


def test_the_collector_exports_rows_and_devices_from_the_snapshot() -> None:
    collector = AttributionCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    assert b"gpu_process_memory_bytes{" not in generate_latest(registry)

    collector.publish(sampler(Energy()).sample())
    text = generate_latest(registry).decode()

    assert (
        'gpu_process_memory_bytes{UUID="GPU-aaaa",attribution="pod",claim="shared-a",container="main",'
        'namespace="team",physicalgpu="node-a-0000-3b-00-0",pod="trainer"} 2.147483648e+09'
    ) in text
    assert (
        'gpu_process_sm_utilization_ratio{UUID="GPU-aaaa",attribution="pod",claim="shared-a",container="main"'
        in text
    )
    assert 'gpu_process_sm_utilization_ratio{UUID="MIG-cccc"' not in text
    assert 'gpu_dra_device_memory_used_bytes{UUID="GPU-aaaa",claim="idle",dra_device="gpu-0-share"' in text
    assert 'gpu_dra_device_processes{UUID="MIG-cccc",claim="mig",dra_device="gpu-1-mig-1g"' in text


def test_the_claims_usage_lists_only_its_own_pods() -> None:
    sample = sampler(Energy()).sample()
    shared_a = next(d for d in sample.devices if d.claim == "shared-a")

    usage = device_usage(sample, shared_a)

    assert [(c.pod, c.container) for c in usage.containers] == [("trainer", "main"), ("trainer", "sidecar")]
    assert usage.memory_used_bytes == 2 << 30
    assert usage.sm_utilization_percent == 40
    assert UsageFigures.from_api_dict(usage.to_api_dict()) == usage


class Book:
    """Records what the feed hands the status book, by claim uid."""

    def __init__(self) -> None:
        self.fed: list[tuple[str, dict[DeviceKey, UsageFigures]]] = []

    def usage(self, uid: str, usages: dict[DeviceKey, UsageFigures]) -> None:
        self.fed.append((uid, usages))


def feed(book: Book, clock: list[float]) -> UsageFeed:
    return UsageFeed(book=book, clock=lambda: clock[0], min_interval=30, refresh=300)


def test_each_claim_is_fed_once_then_only_on_material_change_after_the_interval() -> None:
    book, clock = Book(), [0.0]
    f, energy = feed(book, clock), Energy()
    s = sampler(energy)
    f.write(s.sample())
    assert sorted(uid for uid, _ in book.fed) == ["c-1", "c-2", "c-3", "c-4"]
    usages = next(u for uid, u in book.fed if uid == "c-1")
    assert list(usages) == [DeviceKey("node-a", "gpu-0-share", "s1")]

    book.fed.clear()
    clock[0] = 40.0
    f.write(s.sample())  # nothing changed materially
    assert book.fed == []
    clock[0] = 400.0
    f.write(s.sample())  # the refresh period passed
    assert len(book.fed) == 4
