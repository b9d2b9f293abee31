"""``kubectl gpu top`` reads the usage in both shapes a gpu-handler writes: the current
DeviceStatusData (identity at the top, usage nested, absent until sampled) and the DeviceUsage of
an earlier release, so top works while the nodes are upgraded."""

from __future__ import annotations

from typing import Any

from testutil.unit.app.kubectlgpu.kubectl_gpu_objects import container, device_status, usage

from pkg.app.kubectlgpu.usage import device_samples

POOL = "gpus/w1"


def current(old: dict[str, Any], *, sampled: bool = True) -> dict[str, Any]:
    """The DeviceStatusData a current gpu-handler writes for the same figures as ``old``."""
    data: dict[str, Any] = {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "DeviceStatusData",
        "deviceType": "Physical",
        "physicalGPU": old["physicalGPU"],
        "uuid": old["uuid"],
        "pciBusID": "0000:3b:00.0",
    }
    if sampled:
        data["usage"] = {
            k: v for k, v in old.items() if k not in {"apiVersion", "kind", "physicalGPU", "uuid"}
        }
    return data


def claim_with(data: Any) -> dict[str, Any]:
    return {"status": {"devices": [device_status(POOL, "gpu-a", data)]}}


def test_the_current_and_the_earlier_shape_read_the_same() -> None:
    old = usage(containers=[container("ml", "p", "c", 5, 40)], omitted=2, memory=9)
    [earlier] = device_samples(claim_with(old))
    [now] = device_samples(claim_with(current(old)))
    assert earlier.problem is None
    assert now.problem is None
    assert now.usage == earlier.usage
    assert now.usage is not None
    assert now.usage.containers_omitted == 2


def test_identity_without_usage_yet_is_not_sampled_rather_than_malformed() -> None:
    [sample] = device_samples(claim_with(current(usage(), sampled=False)))
    assert (sample.usage, sample.problem) == (None, None)


def test_a_malformed_current_entry_names_its_kind_and_field() -> None:
    data = current(usage())
    data["usage"]["memoryUsedBytes"] = "lots"
    [sample] = device_samples(claim_with(data))
    assert sample.usage is None
    assert sample.problem is not None
    assert sample.problem.startswith("malformed DeviceStatusData: usage.memoryUsedBytes")
