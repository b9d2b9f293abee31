"""The driver tells the claim's device status each call's outcome, through its port: the record of
a prepared claim (fresh or the recorded answer), a failure's reason and the devices as far as the
call knew them (none when it never read the claim), and the removal on Unprepare."""

from __future__ import annotations

from pathlib import Path

import pytest
from dependency_injector import providers
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.preparation.preparation_fakes import A30, POOL, Node, mig_offer, node

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.services import DeviceKey, DeviceStatusReports


@pytest.fixture
def reports(mocker: MockerFixture) -> MockType:
    mock: MockType = mocker.Mock(spec=DeviceStatusReports)
    return mock


@pytest.fixture
def n(mocker: MockerFixture, tmp_path: Path, reports: MockType) -> Node:
    built = node(mocker, tmp_path)
    built.container.status.override(providers.Object(reports))
    return built


def test_a_prepared_claim_is_reported_with_its_record_also_when_answered_from_it(
    n: Node, reports: MockType
) -> None:
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    n.driver.prepare([claim])  # the kubelet's retry: the recorded answer
    assert reports.prepared.call_count == 2
    record = reports.prepared.call_args.args[0]
    assert (record.uid, [d.device for d in record.devices]) == (claim.uid, [offer.name])
    reports.failed.assert_not_called()


def test_a_failed_prepare_is_reported_with_its_reason_and_planned_devices(n: Node, reports: MockType) -> None:
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    first = n.claims.allocate("first", [offer])
    second = n.claims.allocate("second", [offer])  # two allocators raced for one MIG placement
    n.driver.prepare([first])
    n.driver.prepare([second])
    reports.failed.assert_called_once()
    (ref, devices), kwargs = reports.failed.call_args
    assert ref == second
    assert devices == [DeviceKey(POOL, offer.name, None)]
    assert kwargs["reason"] == "DoubleAllocation"
    assert kwargs["message"]


def test_a_claim_never_read_reports_no_devices(n: Node, reports: MockType) -> None:
    ghost = ClaimRef(namespace="team", name="ghost", uid="2d5a1f4e-0000-4000-8000-000000000001")
    n.driver.prepare([ghost])
    (ref, devices), kwargs = reports.failed.call_args
    assert (ref, devices, kwargs["reason"]) == (ghost, None, "ClaimNotFound")


def test_unprepare_reports_the_removal(n: Node, reports: MockType) -> None:
    [offer] = n.offers.publish(mig_offer(A30, start=3))
    claim = n.claims.allocate("train", [offer])
    n.driver.prepare([claim])
    n.driver.unprepare([claim])
    reports.unprepared.assert_called_once_with(claim)
