"""Decisions are serial, writes are not: a claim's writes run outside the decision lock, and the
devices they write stay reserved for the next decisions until the write lands or fails."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pytest_mock import MockerFixture
from testutil.k8s_fields import allocation_of, name_of
from testutil.unit.dra.allocator.alloc_builders import a30_pool, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import Env, our_mig_class

from pkg.dra.allocator import AllocationInputs
from pkg.dracontroller.internal.service.claim_writer import planned
from pkg.framework.client import ApiError
from pkg.framework.reconcile.contract import Result


def one_card_one_device(mocker: MockerFixture) -> Env:
    """One A30 offering only its whole-card 4g instance: two claims cannot both have it."""
    return Env(mocker, a30_pool(profiles=("4g",)), [our_mig_class("4g")])


def device_of(e: Env, c: Any) -> str | None:
    stored = e.stored(c)
    if stored.status is None or stored.status.allocation is None:
        return None
    return allocation_of(stored).devices.results[0].device  # type: ignore[union-attr,index]


def test_next_decision_runs_while_a_write_is_on_the_wire_and_sees_its_devices_taken(
    mocker: MockerFixture,
) -> None:
    e = one_card_one_device(mocker)
    first, second = (e.add(claim(name, exact("gpu", "mig-4g"))) for name in ("first", "second"))
    outcomes: list[Result] = []

    def another_worker_decides() -> None:
        if outcomes or len(e.api.writes) != 1:  # once, between the first claim's two writes
            return
        e.sync()  # the watch even delivers our metadata patch (no allocation yet) meanwhile
        worker = threading.Thread(target=lambda: outcomes.append(e.reconcile(second)))
        worker.start()
        worker.join(timeout=10)
        assert not worker.is_alive(), "the second decision waited for the first claim's write"

    e.api.on_write.append(another_worker_decides)
    assert e.reconcile(first) == Result()
    assert outcomes == [Result(requeue=True)]  # no capacity: the first claim's reservation holds the card
    assert device_of(e, first) == "gpu-0000-02-00-0-mig-4g-0"
    assert device_of(e, second) is None
    assert e.in_flight.reserved() == 0


def test_failed_write_frees_the_reservation_and_is_retried(mocker: MockerFixture) -> None:
    e = one_card_one_device(mocker)
    first, second = (e.add(claim(name, exact("gpu", "mig-4g"))) for name in ("first", "second"))
    e.api.fail_next.append(ApiError(status=503, reason="ServiceUnavailable", message="etcd leader changed"))
    with pytest.raises(ApiError):  # the controller requeues it with the claim's backoff
        e.reconcile(first)
    assert e.in_flight.reserved() == 0
    assert e.reconcile(second) == Result()
    assert device_of(e, second) == "gpu-0000-02-00-0-mig-4g-0"


def test_claim_deleted_before_its_write_frees_the_reservation(mocker: MockerFixture) -> None:
    e = one_card_one_device(mocker)
    first, second = (e.add(claim(name, exact("gpu", "mig-4g"))) for name in ("first", "second"))
    del e.api.objects["default/first"]  # gone from the server, still in the cache
    e.reconcile(first)
    assert e.in_flight.reserved() == 0
    assert e.reconcile(second) == Result()
    assert device_of(e, second) == "gpu-0000-02-00-0-mig-4g-0"


def test_reservation_is_served_whatever_the_cache_shows_until_settled(mocker: MockerFixture) -> None:
    e = one_card_one_device(mocker)
    cached = e.add(claim("c", exact("gpu", "mig-4g")))
    other = e.add(claim("other", exact("gpu", "mig-4g")))
    attempt = e.allocator.attempt(other, _inputs(e))
    reservation = planned(cached, attempt.outcome)  # type: ignore[arg-type]
    e.in_flight.reserve(reservation)
    assert e.in_flight.resolve(cached) is reservation
    assert [name_of(c) for c in e.cache_reader.allocated_claims()] == ["c"]
    e.in_flight.settle(planned(cached, attempt.outcome))  # type: ignore[arg-type]  # not this one
    assert e.in_flight.resolve(cached) is reservation
    e.in_flight.settle(reservation)
    assert e.in_flight.resolve(cached) is cached
    assert cached.status is None  # the cached claim itself was never touched


def _inputs(e: Env) -> AllocationInputs:
    return AllocationInputs(
        slices=tuple(e.cache_reader.slices()), classes=e.cache_reader.classes(), allocated_claims=(),
        namespace_labels={},
    )  # fmt: skip
