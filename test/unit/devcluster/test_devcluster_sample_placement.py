"""The walkthrough's order cannot strand a sample: with the MIG sample placed first, every way the
scheduler may deal the demo's cards out to the other samples runs them all.

The inputs are the demo's: the cards of its fixture hosts as the simulated backend reports them,
their offers as gpu-handler publishes them, and the sample classes' selectors evaluated by our CEL
engine. The scheduler is played as an adversary: each sample, in each order the walkthrough allows,
may take any card whose offers its class selects and that nothing holds yet.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.unit.backends.backend_fakes import physical_gpu

from pkg.backends import BackendOptions
from pkg.backends.simulated.backend import SIMULATED_NVIDIA
from pkg.devcluster.gpuhost import nvidia_cards
from pkg.devcluster.samples import DEMO_NODES, RUNNABLE, SAMPLES_DIR, SCHEDULED_FIRST, SamplePod
from pkg.dra.allocator.cel_env import CelEnvironment, device_input
from pkg.dra.model.offers import CardOffers, Offer, build_offers

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
DRIVER = "gpu.deckhouse.io"


@dataclass(frozen=True)
class DemoCard:
    node: str
    offers: CardOffers

    @property
    def name(self) -> str:
        return f"{self.node}/{self.offers.card.product_name}/{self.offers.card.pci_address}"


def _demo_cards() -> list[DemoCard]:
    cards = []
    for node, fixture in DEMO_NODES.items():
        root = SYSFS / fixture
        backend = SIMULATED_NVIDIA.create(BackendOptions(node_name=node, sysfs_root=root))
        for address in nvidia_cards(root):
            device_id = (root / "bus" / "pci" / "devices" / address / "device").read_text().strip()
            card = backend.offer_inputs(physical_gpu(address, device_id=device_id.removeprefix("0x")))
            cards.append(DemoCard(node, build_offers(card)))
    return cards


def _class_of(sample: SamplePod, classes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The DeviceClass the sample's one request names: by its extended resource, or by the
    deviceClassName of the ResourceClaimTemplate in the same file."""
    documents = [d for d in yaml.safe_load_all(sample.path.read_text()) if d]
    [pod] = [d for d in documents if d["kind"] == "Pod"]
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits") or {}
    if limits:
        [resource] = limits
        [found] = [c for c in classes if c["spec"].get("extendedResourceName") == resource]
        return found
    [template] = [d for d in documents if d["kind"] == "ResourceClaimTemplate"]
    [request] = template["spec"]["spec"]["devices"]["requests"]
    [found] = [c for c in classes if c["metadata"]["name"] == request["exactly"]["deviceClassName"]]
    return found


def _selected(cards: Sequence[DemoCard]) -> dict[str, dict[str, list[Offer]]]:
    """Each runnable sample's file → card name → the card's offers its class selects."""
    env = CelEnvironment()
    classes = [d for d in yaml.safe_load_all((SAMPLES_DIR / "deviceclasses.yaml").read_text()) if d]
    selected: dict[str, dict[str, list[Offer]]] = {}
    for sample in RUNNABLE:
        cls = _class_of(sample, classes)
        selectors = [env.compile(s["cel"]["expression"]) for s in cls["spec"]["selectors"]]
        selected[sample.file] = {
            card.name: [
                o
                for o in card.offers.offers
                if all(env.matches(s, device_input(DRIVER, o.device)) for s in selectors)
            ]
            for card in cards
        }
        selected[sample.file] = {name: offers for name, offers in selected[sample.file].items() if offers}
    return selected


def _takes_every_counter(offer: Offer, card: DemoCard) -> bool:
    everything = set(card.offers.counter_set.counters or {})
    used = {name for use in offer.device.consumes_counters or [] for name in use.counters}
    return used == everything


def _stranded(order: Sequence[str], selected: dict[str, dict[str, list[Offer]]]) -> list[str]:
    """The placements (as 'sample on card, ...') in which a sample of ``order`` finds no free card,
    the scheduler choosing any free card a sample's class selects at each step."""
    failures: list[str] = []

    def place(index: int, taken: dict[str, str]) -> None:
        if index == len(order):
            return
        sample = order[index]
        free = [card for card in selected[sample] if card not in taken.values()]
        if not free:
            dealt = ", ".join(f"{s} on {c}" for s, c in taken.items())
            failures.append(f"{sample} stranded after {dealt}")
        for card in free:
            place(index + 1, {**taken, sample: card})

    place(0, {})
    return failures


@pytest.fixture(scope="module")
def cards() -> list[DemoCard]:
    return _demo_cards()


@pytest.fixture(scope="module")
def selected(cards: list[DemoCard]) -> dict[str, dict[str, list[Offer]]]:
    return _selected(cards)


def test_no_two_samples_can_share_a_card(
    cards: list[DemoCard], selected: dict[str, dict[str, list[Offer]]]
) -> None:
    """What makes 'one card each' exact: on every card two samples could both use, one of them
    takes every counter of the card (a whole card, a share, a passthrough), so the other cannot sit
    beside it."""
    by_name = {card.name: card for card in cards}
    for first, second in itertools.combinations(selected, 2):
        for name in set(selected[first]) & set(selected[second]):
            card = by_name[name]
            assert all(_takes_every_counter(o, card) for o in selected[first][name]) or all(
                _takes_every_counter(o, card) for o in selected[second][name]
            ), f"{first} and {second} could share {name}"


def test_the_walkthrough_order_places_every_sample_however_the_scheduler_deals_the_cards(
    selected: dict[str, dict[str, list[Offer]]],
) -> None:
    assert RUNNABLE[0] == SCHEDULED_FIRST
    rest = [s.file for s in RUNNABLE if s != SCHEDULED_FIRST]
    for order in itertools.permutations(rest):
        assert _stranded([SCHEDULED_FIRST.file, *order], selected) == []


def test_applied_all_at_once_the_mig_sample_can_be_left_without_a_card(
    selected: dict[str, dict[str, list[Offer]]],
) -> None:
    """Why the walkthrough waits: only cards that can cut a MIG device suit the MIG sample, and the
    other container samples can take all of them."""
    mig_cards = set(selected[SCHEDULED_FIRST.file])
    assert sorted(name.split("/")[1] for name in mig_cards) == [
        "NVIDIA A30",
        "NVIDIA A30",
        "NVIDIA H100 80GB HBM3",
    ]
    rest = [s.file for s in RUNNABLE if s != SCHEDULED_FIRST]
    stranded = _stranded([*rest, SCHEDULED_FIRST.file], selected)
    assert any(failure.startswith(f"{SCHEDULED_FIRST.file} stranded") for failure in stranded)
