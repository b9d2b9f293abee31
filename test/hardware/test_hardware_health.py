"""The NVIDIA backend's health signals work against the real driver: the event source registers
every card for the health events it supports, and the probe passes on a healthy card.

Read-only: registering for events and waiting on them changes nothing on the card.
"""

from __future__ import annotations

import time

from pkg.backends import VendorBackend
from pkg.backends.backend import VerdictStatus
from pkg.hardwaretier.offer_checks import OffersOutput


def test_the_health_event_source_registers_every_card(backend: VendorBackend, cards: list[str]) -> None:
    source = backend.health_events(cards)
    try:
        started = time.monotonic()
        events = source.wait(2.0)  # registers on first use; raises BackendError if it cannot
        waited = time.monotonic() - started
    finally:
        source.close()
    assert {event.address for event in events} <= set(cards), events
    # No event in the window: the wait blocked for it (NVML's timeout), it did not fail fast.
    assert events or waited >= 1.0, f"the wait returned after {waited:.2f}s without an event"


def test_the_health_probe_passes(backend: VendorBackend, offers: OffersOutput, cards: list[str]) -> None:
    for address in cards:
        gpu = offers.gpu_at(address)
        assert gpu is not None, address
        verdict = backend.health(gpu)
        assert verdict.status is VerdictStatus.TRUE, f"card {address}: {verdict}"
