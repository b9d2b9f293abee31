"""Raw ResourceClaims and ResourceSlices as the API server returns them, for the plugin's unit tests."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1ResourceSlice

DRIVER = "gpu.deckhouse.io"


def claim(
    namespace: str,
    name: str,
    *,
    devices: list[tuple[str, str, str | None]] = (),  # type: ignore[assignment]
    pods: tuple[str, ...] = (),
    status_devices: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A claim holding ``devices`` (pool, device, shareID) of our driver, reserved for ``pods``."""
    status: dict[str, Any] = {}
    if devices:
        status["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": DRIVER,
                        "pool": p,
                        "device": d,
                        **({"shareID": s} if s else {}),
                    }
                    for p, d, s in devices
                ]
            }
        }
    if pods:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"} for pod in pods]
    if status_devices is not None:
        status["devices"] = status_devices
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {}, "status": status}


def usage(
    *,
    sampled_at: str = "2026-11-26T12:00:00Z",
    gpu: str = "w1-0-10de-2330",
    containers: list[dict[str, Any]] = (),  # type: ignore[assignment]
    omitted: int | None = None,
    memory: int | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "DeviceUsage",
        "sampledAt": sampled_at,
        "physicalGPU": gpu,
        "uuid": "GPU-1111",
        "memoryUsedBytes": memory if memory is not None else sum(c["memoryBytes"] for c in containers),
        "containers": list(containers),
    }
    if omitted is not None:
        data["containersOmitted"] = omitted
    return data


def container(namespace: str, pod: str, name: str, memory: int, sm: int | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "namespace": namespace,
        "pod": pod,
        "container": name,
        "processes": 1,
        "memoryBytes": memory,
    }
    if sm is not None:
        c["smUtilizationPercent"] = sm
    return c


def device_status(pool: str, device: str, data: Any, share_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"driver": DRIVER, "pool": pool, "device": device, "data": data}
    if share_id:
        entry["shareID"] = share_id
    return entry


def slice_of(node: str, cards: list[str]) -> V1ResourceSlice:
    """A node's slice: per card its exclusive Physical offer, a MIG 1g offer and a TimeSlicing share."""

    def attrs(card: str, **extra: str) -> dict[str, Any]:
        _, domain, bus, device, function = card.split("-")
        base = {
            "pciAddress": f"{domain}:{bus}:{device}.{function}",
            "uuid": f"GPU-{card}",
            "productName": "NVIDIA H100",
        }
        return {f"{DRIVER}/{k}": {"string": v} for k, v in {**base, **extra}.items()}

    devices = []
    for card in cards:
        uses = [{"counterSet": card, "counters": {}}]
        devices += [
            {
                "name": card,
                "attributes": attrs(card, deviceType="Physical", sharingStrategy="Exclusive"),
                "consumesCounters": uses,
            },
            {
                "name": f"{card}-mig-1g.10gb-0",
                "attributes": attrs(card, deviceType="MIG", migProfile="1g.10gb"),
                "consumesCounters": uses,
            },
            {
                "name": f"{card}-ts",
                "attributes": attrs(card, deviceType="Physical", sharingStrategy="TimeSlicing"),
                "consumesCounters": uses,
            },
        ]
    return V1ResourceSlice.model_validate(
        {
            "metadata": {"name": f"{node}-slice"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": f"gpus/{node}", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )
