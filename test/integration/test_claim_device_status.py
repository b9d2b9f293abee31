"""The claim's device status against a real API server: the status book's entry for our device is
written Ready=False with the failure's reason, then Ready=True with its identity and usage, then
removed — while another driver's entry, written by another field manager, survives every write."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from api.gpu.v1alpha1 import DeviceStatusData, UsageFigures
from pkg.domain.names import DRIVER
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.gpuhandler.attribution.claim_status import ClaimStatusWriter
from pkg.gpuhandler.attribution.status_book import DeviceIdentity, DeviceStatusBook
from pkg.gpuhandler.attribution.status_loop import DeviceStatusLoop
from pkg.gpuhandler.preparation.services import DeviceKey

pytestmark = pytest.mark.dra_api

POOL = "gpus/node-a"
OTHER = "net.example.com"
KEY = DeviceKey(POOL, "gpu-0")
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def allocated_claim(kube: KubeClient, namespace: str) -> str:
    """A claim allocated one of our devices and one of another driver's, whose entry that driver wrote."""
    spec = {
        "devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                {"name": "nic", "exactly": {"deviceClassName": "nic"}},
            ]
        }
    }
    created = kube.create(
        RESOURCE_CLAIM,
        RESOURCE_CLAIM.decode({"metadata": {"name": "c1", "namespace": namespace}, "spec": spec}),
    )
    assert created.metadata is not None
    status = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": POOL, "device": "gpu-0"},
                    {"request": "nic", "driver": OTHER, "pool": "nics", "device": "nic-0"},
                ]
            }
        },
        "devices": [
            {"driver": OTHER, "pool": "nics", "device": "nic-0", "data": {"mac": "02:00:00:00:00:01"}}
        ],
    }
    kube.update_status(
        RESOURCE_CLAIM, RESOURCE_CLAIM.decode({**RESOURCE_CLAIM.encode(created), "status": status})
    )
    return str(created.metadata.uid)


def entries(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    raw = RESOURCE_CLAIM.encode(kube.get(RESOURCE_CLAIM, "c1", namespace))
    return {e["driver"]: e for e in (raw.get("status") or {}).get("devices") or []}


def test_our_entry_goes_from_failed_to_ready_to_removed_beside_another_drivers(
    kube: KubeClient, namespace: str
) -> None:
    uid = allocated_claim(kube, namespace)
    book = DeviceStatusBook(verdicts=dict, now=lambda: T0)
    loop = DeviceStatusLoop(book=book, writer=ClaimStatusWriter(client=kube, pool=POOL, clock=time.monotonic))

    book.failed(
        namespace=namespace, name="c1", uid=uid, devices=None, reason="NodeLockTimeout", message="waited"
    )
    loop.step()  # reads the allocation: our one device
    loop.step()
    found = entries(kube, namespace)
    [ready] = found[DRIVER]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "NodeLockTimeout")
    assert found[OTHER]["data"] == {"mac": "02:00:00:00:00:01"}

    identity = DeviceIdentity(
        key=KEY, card="0000:3b:00.0", data=DeviceStatusData(physical_gpu="node-a-0", uuid="GPU-aaaa")
    )
    book.prepared(namespace=namespace, name="c1", uid=uid, devices=[identity])
    book.usage(uid, {KEY: UsageFigures(sampled_at=T0, memory_used_bytes=1 << 30)})
    loop.step()
    found = entries(kube, namespace)
    ours = found[DRIVER]
    assert {c["type"]: c["status"] for c in ours["conditions"]} == {"Ready": "True", "Healthy": "Unknown"}
    assert (ours["data"]["kind"], ours["data"]["uuid"], ours["data"]["usage"]["memoryUsedBytes"]) == (
        "DeviceStatusData",
        "GPU-aaaa",
        1 << 30,
    )
    assert found[OTHER]["data"] == {"mac": "02:00:00:00:00:01"}
    assert book.pending() == []

    book.unprepared(uid=uid)
    loop.step()
    found = entries(kube, namespace)
    assert DRIVER not in found
    assert found[OTHER]["data"] == {"mac": "02:00:00:00:00:01"}
