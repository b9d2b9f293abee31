"""The checks the hardware tier makes of ``gpu-handler offers`` against NVML, held to simulated
cards: they pass where offers and NVML agree, and name each difference when they do not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from kubernetes.client import V1Counter, V1DeviceCounterConsumption

from pkg.backends.nvidia.nvml_port import MIG_ENABLED
from pkg.backends.nvidia.profiles import model_for_pci_device
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.gpuhandler.offline import OfflineRequest, compute_offers, render_yaml
from pkg.hardwaretier.nvml_facts import CardFacts, read_facts
from pkg.hardwaretier.offer_checks import (
    OffersOutput,
    attribute,
    fact_mismatches,
    mig_table_mismatches,
    parse_offers,
    slice_rule_violations,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
H100 = "0000:18:00.0"
L4 = "0000:ce:00.0"
BUG = "(a bug in the offer model, not a server error)"


def offers_of(scenario: str) -> OffersOutput:
    """What ``gpu-handler offers`` prints for the scenario, read back as the tier reads it."""
    request = OfflineRequest(node_name="node-a", sysfs_root=FIXTURES / scenario, backend="simulated-nvidia")
    return parse_offers(render_yaml(request, compute_offers(request)))


def facts_of(scenario: str, address: str) -> CardFacts:
    return read_facts(SimulatedNvml(node_name="node-a", sysfs_root=FIXTURES / scenario), address)


@pytest.fixture(scope="module")
def h100() -> tuple[OffersOutput, CardFacts]:
    return offers_of("h100-sxm"), facts_of("h100-sxm", H100)


def test_the_yaml_reads_back_into_gpus_and_slices(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, _ = h100

    assert len(offers.gpus) == 2
    assert {rs.spec.pool.name for rs in offers.slices} == {"gpus/node-a"}
    exclusive = offers.exclusive_offer(H100)
    assert exclusive is not None
    assert exclusive.name == "gpu-0000-18-00-0"
    assert offers.pci_device_id(H100) == "2330"
    assert offers.condition(H100, "HardwareHealthy") == "True"


def test_a_document_of_another_kind_is_named() -> None:
    with pytest.raises(ValueError, match="printed a 'ConfigMap' document"):
        parse_offers("---\nkind: ConfigMap\n")


def test_agreeing_offers_and_nvml_show_no_difference(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, facts = h100
    model = model_for_pci_device("2330")
    assert model is not None

    assert facts.profiles, "the simulated H100 reports its MIG profiles with MIG disabled, as R550+ does"
    assert slice_rule_violations(offers.slices) == []
    assert fact_mismatches(facts, offers) == []
    assert mig_table_mismatches(facts, model) == []


def test_a_card_without_mig_has_no_mig_offers_and_no_difference() -> None:
    offers, facts = offers_of("h100-and-l4"), facts_of("h100-and-l4", L4)

    assert facts.mig_mode is None
    assert facts.profiles == ()
    assert fact_mismatches(facts, offers) == []


def test_a_different_identity_is_named_with_the_offer_and_the_gpu(
    h100: tuple[OffersOutput, CardFacts],
) -> None:
    offers, facts = h100
    other = dataclasses.replace(facts, uuid="GPU-00000000-0000-0000-0000-000000000000", memory_mib=1024)

    problems = fact_mismatches(other, offers)

    assert f"card {H100}: PhysicalGPU node-a-0-10de-2330 has memoryMiB 81559, NVML says 1024" in problems
    assert (
        f"card {H100}: offer gpu-0000-18-00-0 has uuid {facts.uuid!r}, NVML says {other.uuid!r}" in problems
    )
    assert f"card {H100}: offer gpu-0000-18-00-0 has memory '81559Mi', NVML says 1Gi" in problems


def test_a_mig_mode_nvml_does_not_report_is_named(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, facts = h100

    problems = fact_mismatches(dataclasses.replace(facts, mig_mode=MIG_ENABLED), offers)

    assert problems == [
        f"card {H100}: PhysicalGPU node-a-0-10de-2330 has mig.mode 'Disabled', NVML says 'Enabled'"
    ]


def test_placements_nvml_reports_and_offers_lack_are_named_both_ways(
    h100: tuple[OffersOutput, CardFacts],
) -> None:
    offers, facts = h100
    first, *rest = facts.profiles
    moved = dataclasses.replace(first, placements=((*first.placements[1:], (7, 1))))

    problems = fact_mismatches(dataclasses.replace(facts, profiles=(moved, *rest)), offers)

    assert problems == [
        f"card {H100}: NVML has profile 1g.10gb (ID 19) at 7+1, no offer has it",
        f"card {H100}: offer gpu-0000-18-00-0-mig-19-0 (profile 19 at 0+1) is no placement NVML reports",
    ]


def test_a_wrong_table_row_is_named(h100: tuple[OffersOutput, CardFacts]) -> None:
    _, facts = h100
    model = model_for_pci_device("2330")
    assert model is not None
    first, *rest = model.profiles
    wrong = dataclasses.replace(first, info=dataclasses.replace(first.info, memory_mib=1))

    problems = mig_table_mismatches(facts, dataclasses.replace(model, profiles=(wrong, *rest[:-1])))

    where = f"card {H100} ({model.key}, PCI device 2330)"
    assert problems == [
        f"{where}: NVML reports profile 7g.80gb (ID 0), the table lacks it",
        f"{where}: profile ID 19: memory_mib is 9984 in NVML, 1 in the table",
    ]


def test_slices_a_scheduler_could_not_use_are_named(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, _ = h100
    devices = offers.slices[1].model_copy(deep=True)
    device = (devices.spec.devices or [])[0]
    device.consumes_counters = [
        V1DeviceCounterConsumption(
            counter_set="gpu-0000-00-00-0", counters={"memory": V1Counter(value="1Gi")}
        ),
        V1DeviceCounterConsumption(
            counter_set="gpu-0000-18-00-0",
            counters={"memory": V1Counter(value="1Ti"), "gold": V1Counter(value="1")},
        ),
    ]

    problems = slice_rule_violations([offers.slices[0], devices])

    assert problems == [
        f"device {device.name}: consumes from counter set gpu-0000-00-00-0, which no slice has",
        f"device {device.name}: consumes 1Ti of gpu-0000-18-00-0/memory, more than it holds",
        f"device {device.name}: counter gold is not in set gpu-0000-18-00-0",
    ]


def test_a_slice_over_the_api_limits_is_named(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, _ = h100
    devices = offers.slices[1].model_copy(deep=True)
    devices.spec.devices = (devices.spec.devices or []) * 3

    problems = slice_rule_violations([offers.slices[0], devices])

    assert problems == [f"ResourceSlice gpu-node-a-devices-00: 168 devices, at most 64 {BUG}"]


def test_attributes_are_read_whatever_their_type(h100: tuple[OffersOutput, CardFacts]) -> None:
    offers, _ = h100
    device = offers.devices_of(H100)[0]

    assert attribute(device, "pciAddress") == H100
    assert attribute(device, "ccMajor") == 9
    assert attribute(device, "driverVersion") == "580.76.5"
    assert attribute(device, "noSuchAttribute") is None
