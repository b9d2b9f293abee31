"""What ``gpu-handler offers`` computes on this node agrees with NVML and with the API's rules.

Read-only: NVML is asked, nothing is changed. The MIG table check compares the profiles NVML
reports (drivers from R550 report them with MIG disabled) with the built-in table of the card's
PCI device ID, which the backend falls back to when NVML cannot answer.
"""

from __future__ import annotations

import subprocess

import pytest

from pkg.backends.nvidia.profiles import model_for_pci_device
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.offer_checks import (
    OffersOutput,
    fact_mismatches,
    mig_table_mismatches,
    slice_rule_violations,
)


def test_offers_runs_cleanly_on_this_node(offers_run: subprocess.CompletedProcess[str]) -> None:
    assert offers_run.returncode == 0, offers_run.stderr
    assert "Failed:" not in offers_run.stdout


def test_nvml_sees_exactly_the_cards_offers_found(gpu_present: int, cards: list[str]) -> None:
    assert gpu_present == len(cards), f"NVML sees {gpu_present} cards, gpu-handler offers found {cards}"


def test_every_card_is_offered_and_healthy(offers: OffersOutput, cards: list[str]) -> None:
    for address in cards:
        assert offers.exclusive_offer(address) is not None, f"card {address} has no exclusive offer"
        assert offers.condition(address, "HardwareHealthy") == "True", f"card {address}"


def test_the_slices_break_no_rule(offers: OffersOutput) -> None:
    assert offers.slices, "no ResourceSlice was computed"
    assert slice_rule_violations(offers.slices) == []


def test_the_offers_say_what_nvml_says(offers: OffersOutput, facts: dict[str, CardFacts]) -> None:
    problems = [problem for card_facts in facts.values() for problem in fact_mismatches(card_facts, offers)]
    assert problems == []


def test_the_mig_table_matches_what_nvml_reports(offers: OffersOutput, facts: dict[str, CardFacts]) -> None:
    checked = []
    for address, card_facts in facts.items():
        device_id = offers.pci_device_id(address)
        model = model_for_pci_device(device_id) if device_id else None
        if card_facts.mig_mode is None or not card_facts.profiles or model is None:
            continue
        assert mig_table_mismatches(card_facts, model) == []
        checked.append(address)
    if not checked:
        pytest.skip(
            "no card here has MIG profiles reported by NVML and a built-in table (no MIG, a driver "
            "before R550 with MIG disabled, or a model missing from the tables)"
        )
