"""Where a card sits reaches every one of its offers: PCIe root, NUMA node, NVLink domain.

Computed by ``gpu-handler offers`` (the handler's own enrichment chain and offer builder) over the
fixture hosts with the simulated NVML; that the PCIe root and NUMA node equal Kubernetes' own
computation is checked against Kubernetes' helper in
``test/integration/test_pci_topology_kubernetes.py``.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from kubernetes.client import V1Device
from testutil.unit.gpuhandler.gpuhandler_fakes import NODE, SYSFS

from pkg.dra.model.attributes import NUMA_NODE, NVLINK_DOMAIN, PCIE_ROOT
from pkg.dra.model.limits import MAX_ATTRIBUTES_AND_CAPACITIES
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

SCENARIOS = sorted(p.name for p in SYSFS.iterdir() if (p / "bus" / "pci" / "devices").is_dir())
TOPOLOGY = (PCIE_ROOT, NUMA_NODE, NVLINK_DOMAIN)


def offers(scenario: str) -> list[V1Device]:
    result = compute_offers(
        OfflineRequest(node_name=NODE, sysfs_root=SYSFS / scenario, backend="simulated-nvidia")
    )
    return [d for rs in result.slices for d in rs.spec.devices or []]


def topology(device: V1Device) -> dict[str, object]:
    attributes = device.attributes or {}
    found: dict[str, object] = {}
    for name in TOPOLOGY:
        if (value := attributes.get(name)) is not None:
            found[name] = value.string if value.string is not None else value.int
    return found


def by_card(devices: list[V1Device]) -> dict[str, list[dict[str, object]]]:
    cards: dict[str, list[dict[str, object]]] = defaultdict(list)
    for device in devices:
        card = (device.attributes or {})["gpu.deckhouse.io/pciAddress"].string
        cards[str(card)].append(topology(device))
    return cards


def test_every_offer_of_an_hgx_card_says_where_the_card_sits() -> None:
    """Whole card, MIG devices at every placement, time-slicing and MPS shares alike."""
    cards = by_card(offers("hgx-h100"))
    assert len(cards) == 8
    first = cards["0000:18:00.0"]
    assert len(first) > 3  # MIG offers, two shares, the whole card
    assert all(t == first[0] for t in first)
    assert first[0][PCIE_ROOT] == "pci0000:15"  # the root port's bus, not the GPU's own bus 18
    assert first[0][NUMA_NODE] == 0
    assert cards["0000:dd:00.0"][0][NUMA_NODE] == 1
    assert len({t[0][PCIE_ROOT] for t in cards.values()}) == 8  # one GPU (and its NIC) per root


def test_the_eight_hgx_cards_share_one_nvlink_domain() -> None:
    domains = {t[NVLINK_DOMAIN] for card in by_card(offers("hgx-h100")).values() for t in card}
    assert len(domains) == 1


def test_cards_behind_one_pcie_switch_share_its_root_and_have_no_nvlink_domain() -> None:
    cards = by_card(offers("pcie-l4-switches"))
    assert {a: t[0] for a, t in cards.items()} == {
        "0000:4d:00.0": {PCIE_ROOT: "pci0000:4a", NUMA_NODE: 0},
        "0000:4e:00.0": {PCIE_ROOT: "pci0000:4a", NUMA_NODE: 0},
        "0000:cd:00.0": {PCIE_ROOT: "pci0000:ca", NUMA_NODE: 1},
        "0000:ce:00.0": {PCIE_ROOT: "pci0000:ca", NUMA_NODE: 1},
    }


def test_a_card_without_numa_affinity_gets_no_numa_attribute() -> None:
    """The workstation's card says numa_node -1: no attribute rather than a -1 that "matches"."""
    cards = by_card(offers("rtx-workstation"))
    assert cards["0000:65:00.0"][0] == {PCIE_ROOT: "pci0000:65"}


def test_an_sxm_card_on_a_host_without_nvswitches_has_no_nvlink_domain() -> None:
    cards = by_card(offers("h100-and-l4"))
    assert all(NVLINK_DOMAIN not in t for card in cards.values() for t in card)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_offer_exceeds_the_attribute_limit(scenario: str) -> None:
    """The API allows 32 attributes and capacities per device; topology must fit in what is left."""
    for device in offers(scenario):
        used = len(device.attributes or {}) + len(device.capacity or {})
        assert used <= MAX_ATTRIBUTES_AND_CAPACITIES, (device.name, used)
