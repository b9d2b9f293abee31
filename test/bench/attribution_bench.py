"""Per-Pod attribution on a full node: what one pass and one scrape cost, and the series cap at work.

In-process: the vendor library's answer is synthetic (8 cards, each shared by Pods whose containers
run several processes), the cgroup reads are real file reads from a ``/proc``-shaped tree on disk,
and the Pods, prepared claims and collector are the production ones. Printed: the pass time (mean
and worst of 50) and a scrape's time and size at 110 Pods (the kubelet's default Pod limit) with 4
processes per container, and a node beyond the cap (5,000 processes) where rows fold into
``attribution="capped"`` ones so the series stay at the cap.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes.client import (
    V1ContainerStatus,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1PodStatus,
)
from prometheus_client import CollectorRegistry, generate_latest

from pkg.backends.usage import CardUsage, ProcessUsage
from pkg.gpuhandler.attribution.metrics import AttributionCollector
from pkg.gpuhandler.attribution.sampler import Sampler
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord, PreparePhase
from pkg.hardware.cgroups import read_cgroup

CARDS = 8
PASSES = 50
QUICK_PASSES = 3


def node(proc: Path, *, pods: int, containers: int, processes: int) -> tuple[Sampler, int]:
    """A node whose ``pods`` Pods share the cards round-robin; returns the sampler and the PIDs."""
    cards = {f"0000:{i:02x}:00.0": f"node-{i}" for i in range(CARDS)}
    addresses = sorted(cards)
    pod_objects, claims = [], []
    usage: dict[str, list[ProcessUsage]] = {a: [] for a in addresses}
    pid = 1000
    for p in range(pods):
        card = addresses[p % CARDS]
        claim = f"claim-{p}"
        statuses = []
        for c in range(containers):
            container_id = f"{p:032x}{c:032x}"
            runtime_id = f"containerd://{container_id}"
            statuses.append(
                V1ContainerStatus(
                    name=f"c{c}", container_id=runtime_id, image="i", image_id="", ready=True, restart_count=0
                )
            )
            for _ in range(processes):
                pid += 1
                folder = proc / str(pid)
                folder.mkdir()
                (folder / "cgroup").write_text(
                    f"0::/kubepods.slice/pod{p}.slice/cri-containerd-{container_id}.scope\n"
                )
                usage[card].append(
                    ProcessUsage(pid=pid, device_uuid=f"GPU-{card}", memory_bytes=1 << 28, sm_percent=1)
                )
        pod_objects.append(
            V1Pod(
                metadata=V1ObjectMeta(name=f"pod-{p}", namespace="team", uid=f"uid-{p}"),
                spec=V1PodSpec(
                    containers=[], resource_claims=[V1PodResourceClaim(name="g", resource_claim_name=claim)]
                ),
                status=V1PodStatus(container_statuses=statuses),
            )
        )
        device = DeviceRecord(
            pool="node", device=f"gpu-{p % CARDS}-ts", card=card, device_type="Physical", share_id=str(p)
        )
        record = ClaimRecord(uid=f"c-{p}", namespace="team", name=claim, state=PreparePhase.PREPARE_COMPLETED)
        record.devices = [device]
        claims.append(record)
    energy = [0]

    def read(address: str) -> CardUsage:
        energy[0] += 1000
        return CardUsage(
            address=address, uuid=f"GPU-{address}", energy_mj=energy[0], processes=tuple(usage[address])
        )

    sampler = Sampler(
        read_usage=read,
        cards=lambda: cards,
        prepared=lambda: claims,
        pods=lambda: pod_objects,
        cgroup=lambda pid: read_cgroup(proc, pid),
        now=lambda: datetime.now(UTC),
    )
    return sampler, pid - 1000


def measure(label: str, *, pods: int, containers: int, processes: int, passes: int = PASSES) -> None:
    with tempfile.TemporaryDirectory() as folder:
        sampler, pids = node(Path(folder), pods=pods, containers=containers, processes=processes)
        times = []
        sample = sampler.sample()
        for _ in range(passes):
            began = time.perf_counter()
            sample = sampler.sample()
            times.append(time.perf_counter() - began)
    collector = AttributionCollector()
    registry = CollectorRegistry()
    registry.register(collector)
    collector.publish(sample)
    began = time.perf_counter()
    text = generate_latest(registry)
    scrape = time.perf_counter() - began
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    print(
        f"  {label:<34} {pids:>6} processes  pass {statistics.mean(times) * 1000:7.1f} ms mean "
        f"{max(times) * 1000:7.1f} ms worst  scrape {scrape * 1000:6.1f} ms {len(text) / 1024:7.0f} KiB "
        f"{series:>6} series  rows {len(sample.rows):>5} (folded {sample.folded})"
    )


def main(*, quick: bool = False) -> None:
    passes = QUICK_PASSES if quick else PASSES
    print(
        f"per-Pod attribution: a pass over {CARDS} cards (cgroups read from disk), a scrape of its sample"
        f" ({passes} passes)"
    )
    measure("110 Pods x 1 container x 4", pods=110, containers=1, processes=4, passes=passes)
    measure("110 Pods x 4 containers x 4", pods=110, containers=4, processes=4, passes=passes)
    measure("300 Pods x 4 x 4 (over the cap)", pods=300, containers=4, processes=4, passes=passes)


if __name__ == "__main__":
    main()
