"""Compute-domain objects the unit and integration tests of gpu-controller build alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1ConfigMap,
    V1DeviceClass,
    V1ObjectMeta,
    V1Pod,
    V1ResourceClaimTemplate,
    V1ResourceSlice,
)

from pkg.framework.client import ConflictError
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM, RESOURCE_SLICE

UID = "0b7c2f4e-1111-4222-8333-444455556666"
CLIQUE_A = "7f1d2e3c-aaaa-4bbb-8ccc-000000000001.1"
CLIQUE_B = "7f1d2e3c-aaaa-4bbb-8ccc-000000000001.2"


def channel_claim(
    name: str, node: str, *, uid: str = UID, channel: int = 1, domain: str = "job", allocated: bool = True
) -> ResourceV1ResourceClaim:
    """A claim of the domain's template, allocated the channel on ``node`` (as the scheduler would)."""
    config = {
        "opaque": {
            "driver": "gpu.deckhouse.io",
            "parameters": {
                "apiVersion": "gpu.deckhouse.io/v1alpha1",
                "kind": "ComputeDomainChannelConfig",
                "domain": domain,
                "domainUID": uid,
            },
        },
        "requests": ["channel"],
    }
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "channel"}], "config": [config]}},
    }
    if allocated:
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "channel",
                            "driver": "gpu.deckhouse.io",
                            "pool": f"gpus/{node}",
                            "device": f"imex-channel-{channel}",
                        }
                    ],
                    "config": [{**config, "source": "FromClaim"}],
                }
            }
        }
    return RESOURCE_CLAIM.decode(body)


def channel_pool(node: str, clique: str, *, channels: int = 4, gpus: int = 1) -> V1ResourceSlice:
    """The pool ``gpus/<node>`` as gpu-handler publishes it on a node of an NVLink fabric: channel
    devices ``imex-channel-1..channels`` and whole GPUs, all with the clique's nvlinkDomain."""
    domain_attribute = {"gpu.deckhouse.io/nvlinkDomain": {"string": clique}}
    devices: list[dict[str, Any]] = [
        {
            "name": f"imex-channel-{n}",
            "allowMultipleAllocations": True,
            "attributes": {
                "gpu.deckhouse.io/deviceType": {"string": "ImexChannel"},
                "gpu.deckhouse.io/imexChannel": {"int": n},
                **domain_attribute,
            },
        }
        for n in range(1, channels + 1)
    ]
    devices += [
        {
            "name": f"gpu-{n}",
            "attributes": {"gpu.deckhouse.io/deviceType": {"string": "Physical"}, **domain_attribute},
        }
        for n in range(gpus)
    ]
    return RESOURCE_SLICE.decode(
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": "gpu.deckhouse.io",
                "nodeName": node,
                "pool": {"name": f"gpus/{node}", "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    )


@dataclass
class RecordingEnsembleApi:
    """An EnsembleApi that keeps what was written."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def apply_config_map(self, config_map: V1ConfigMap) -> None:
        self.calls.append(("apply_config_map", config_map))

    def delete_config_map(self, config_map: V1ConfigMap) -> None:
        self.calls.append(("delete_config_map", config_map))

    def create_pod(self, pod: V1Pod) -> None:
        self.calls.append(("create_pod", pod))

    def delete_pod(self, pod: V1Pod) -> None:
        self.calls.append(("delete_pod", pod))

    def made(self, call: str) -> list[Any]:
        return [obj for name, obj in self.calls if name == call]


@dataclass
class RecordingApi(RecordingEnsembleApi):
    """A ComputeDomainApi that keeps what was written (the ensemble's writes as RecordingEnsembleApi
    keeps them); the ledger has a resourceVersion, and a write of a stale one conflicts as the API
    server's would."""

    ledger: V1ConfigMap | None = None

    def apply_device_class(self, device_class: V1DeviceClass) -> None:
        self.calls.append(("apply_device_class", device_class))

    def read_ledger(self) -> V1ConfigMap | None:
        return self.ledger.model_copy(deep=True) if self.ledger is not None else None

    def write_ledger(self, current: V1ConfigMap | None, data: dict[str, str]) -> None:
        stored = self.ledger.metadata.resource_version if self.ledger and self.ledger.metadata else None
        given = current.metadata.resource_version if current and current.metadata else None
        if stored != given:
            raise ConflictError(status=409, reason="Conflict", message="the ledger changed")
        version = str(int(stored or 0) + 1)
        self.ledger = V1ConfigMap(metadata=V1ObjectMeta(name="ledger", resource_version=version), data=data)
        self.calls.append(("write_ledger", data))

    def apply_template(self, template: V1ResourceClaimTemplate) -> None:
        self.calls.append(("apply_template", template))
