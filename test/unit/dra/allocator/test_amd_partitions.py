"""The AMD samples against the MI300X node's real offers, allocated by our allocator (the
scheduler's rules): partitions of one mode fill a card, another mode goes to another card, and a
whole card is never given next to a partition."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes.client import V1AllocationResult, V1DeviceClass
from testutil.unit.dra.allocator.alloc_builders import Cluster, claim, devices_of, exact

from pkg.dra.model import Unschedulable
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

ROOT = Path(__file__).resolve().parents[4]
SAMPLES = ROOT / "config" / "samples" / "deviceclasses-amd.yaml"


def _cluster() -> Cluster:
    result = compute_offers(
        OfflineRequest(
            node_name="node-a",  # NODE_A, where Cluster.allocate places claims
            sysfs_root=ROOT / "test" / "fixtures" / "sysfs" / "mi300x-x8",
            backend="simulated-amd",
        )
    )
    classes = [V1DeviceClass.model_validate(d) for d in yaml.safe_load_all(SAMPLES.read_text()) if d]
    return Cluster(list(result.slices), classes)


def _card(device: str) -> str:
    return "-".join(device.split("-")[:5])


def _take(cluster: Cluster, cls: str) -> str:
    result = cluster.allocate(claim(f"c{len(cluster.claims)}", exact("r", cls)))
    assert isinstance(result, V1AllocationResult), result
    [device] = devices_of(result)
    return device


def test_eight_cpx_partitions_share_one_card_and_a_qpx_goes_elsewhere() -> None:
    cluster = _cluster()
    cpx = [_take(cluster, "amd-cpx") for _ in range(8)]
    assert len({_card(d) for d in cpx}) == 1
    assert len(set(cpx)) == 8

    qpx = _take(cluster, "amd-qpx")
    assert _card(qpx) != _card(cpx[0])
    whole = _take(cluster, "amd-gpu")
    assert _card(whole) not in {_card(cpx[0]), _card(qpx)}


def test_on_the_last_free_card_one_cpx_partition_excludes_the_whole_card_and_other_modes() -> None:
    cluster = _cluster()
    whole = {_card(_take(cluster, "amd-gpu")) for _ in range(7)}
    last = _card(_take(cluster, "amd-cpx"))
    assert last not in whole

    for cls in ("amd-gpu", "amd-qpx", "amd-dpx"):
        assert isinstance(cluster.allocate(claim(f"no-{cls}", exact("r", cls))), Unschedulable), cls
    assert _card(_take(cluster, "amd-cpx")) == last  # the same mode still fits
