"""What a VM launcher reads about a passed-through card or a vGPU: device metadata and the QEMU
hook input.

Two files per VFIO claim (the metadata alone for a claim of vGPUs only), under
``<plugin data dir>/vm/<claim UID>/`` on the host, bind-mounted read-only into the claim's
containers through CDI (:func:`vm_mounts`):

* **Device metadata** (KEP-5304, ``metadata.resource.k8s.io/v1alpha1`` ``DeviceMetadata``), one
  file per request, with each device's published attributes plus the standard
  ``resource.kubernetes.io/pciBusID`` of a passed-through card, or ``mdevUUID`` of a vGPU — what
  KubeVirt's virt-launcher turns into a ``<hostdev>`` (VEP 10). It appears at the protocol's path,
  ``/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/gpu.deckhouse.io-metadata.json``
  (``resourceclaimtemplates/<podClaimName>/...`` for a claim made from a template, which also gets
  ``podClaimName``), and at VEP 10's path,
  ``/var/run/dra-device-attributes/gpu.deckhouse.io/<claim>/metadata.json``.
* **QEMU hook input** (``gpu.deckhouse.io/v1alpha1`` ``VfioHookInput``, for a libvirt QEMU hook) at
  ``/var/run/gpu.deckhouse.io/vfio/<claim>.json``: which card (``pciBusID``), which IOMMU group
  and ``/dev/vfio`` node, every function bound with it and the driver it goes back to, and what
  the hook does on teardown (``onRelease: KeepBound`` — nothing: gpu-handler gives the functions
  back at NodeUnprepareResources, after the VM's Pod is gone). docs/vfio.md has the format.

Both are written atomically before the CDI spec that mounts them, and removed by Unprepare; files
of claims the checkpoint does not know are removed at start-up.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim, V1Device, V1DeviceAttribute, V1ObjectMeta

from pkg.backends.preparation import Mount
from pkg.domain.names import DRIVER
from pkg.gpuhandler.preparation.atomic_file import write_atomically
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.claim_ref import checked_label, checked_subdomain, checked_uid
from pkg.gpuhandler.preparation.kinds.vm.records import vfio_of, vgpu_of

PCI_BUS_ID: Final = "resource.kubernetes.io/pciBusID"
MDEV_UUID: Final = "mdevUUID"  # VEP 10's name for a vGPU's mdev, not yet standardised
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
METADATA_API_VERSION: Final = "metadata.resource.k8s.io/v1alpha1"
HOOK_API_VERSION: Final = "gpu.deckhouse.io/v1alpha1"
METADATA_ROOT: Final = "/var/run/kubernetes.io/dra-device-attributes"
VEP10_METADATA_ROOT: Final = "/var/run/dra-device-attributes"
HOOK_ROOT: Final = f"/var/run/{DRIVER}/vfio"
ON_RELEASE: Final = "KeepBound"
_READ_ONLY: Final = ("ro", "nosuid", "nodev", "bind")
_UID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def metadata_document(
    claim: ResourceV1ResourceClaim, request: str, devices: Sequence[tuple[DeviceRecord, V1Device | None]]
) -> dict[str, Any]:
    """The ``DeviceMetadata`` of one request of ``claim`` (KEP-5304)."""
    meta = claim.metadata or V1ObjectMeta()
    document: dict[str, Any] = {
        "apiVersion": METADATA_API_VERSION,
        "kind": "DeviceMetadata",
        "metadata": {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid, "generation": 1},
    }
    if pod_claim := _pod_claim_name(claim):
        document["podClaimName"] = pod_claim
    entries = []
    for record, offer in devices:
        attributes = {
            name: _attribute(value) for name, value in sorted(((offer and offer.attributes) or {}).items())
        }
        if (vgpu := vgpu_of(record)) is not None:  # a vGPU is handed over by its mdev, never by the card
            attributes[MDEV_UUID] = {"string": vgpu.mdev_uuid}
        else:
            attributes[PCI_BUS_ID] = {"string": record.card}
        entries.append(
            {"driver": DRIVER, "pool": record.pool, "name": record.device, "attributes": attributes}
        )
    document["requests"] = [{"name": request, "devices": entries}]
    return document


@dataclass(frozen=True)
class MetadataDevice:
    """One device of a ``DeviceMetadata`` document, as a VM launcher reads it: the passed-through
    card's ``pciBusID`` or the vGPU's ``mdevUUID`` (``None`` where the device has none)."""

    request: str
    driver: str
    pool: str
    name: str
    pci_bus_id: str | None
    mdev_uuid: str | None


def read_device_metadata(text: str | bytes) -> list[MetadataDevice]:
    """The devices of a KEP-5304 ``DeviceMetadata`` document (what :func:`metadata_document`
    writes); ``ValueError`` for anything else, so a reader never mistakes another file for it."""
    document = json.loads(text)
    if not isinstance(document, dict) or (document.get("apiVersion"), document.get("kind")) != (
        METADATA_API_VERSION,
        "DeviceMetadata",
    ):
        raise ValueError(f"not a {METADATA_API_VERSION} DeviceMetadata document")
    found = []
    for request in document.get("requests") or []:
        for device in request.get("devices") or []:
            attributes = device.get("attributes") or {}
            found.append(
                MetadataDevice(
                    request=str(request.get("name", "")),
                    driver=str(device.get("driver", "")),
                    pool=str(device.get("pool", "")),
                    name=str(device.get("name", "")),
                    pci_bus_id=(attributes.get(PCI_BUS_ID) or {}).get("string"),
                    mdev_uuid=(attributes.get(MDEV_UUID) or {}).get("string"),
                )
            )
    return found


def hook_document(claim: ResourceV1ResourceClaim, devices: Sequence[DeviceRecord]) -> dict[str, Any]:
    """The QEMU hook input of ``claim``: its passed-through cards and what to do with them."""
    meta = claim.metadata or V1ObjectMeta()
    entries = []
    for record in devices:
        vfio = vfio_of(record)
        assert vfio is not None
        entries.append(
            {
                "request": record.requests[0] if record.requests else "",
                "device": record.device,
                "pciBusID": record.card,
                "iommuGroup": vfio.iommu_group,
                "vfioDevice": f"/dev/vfio/{vfio.iommu_group}",
                "functions": [{"address": f.address, "originalDriver": f.driver} for f in vfio.functions],
            }
        )
    return {
        "apiVersion": HOOK_API_VERSION,
        "kind": "VfioHookInput",
        "claim": {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid},
        "devices": entries,
        "onRelease": ON_RELEASE,
    }


def _attribute(value: V1DeviceAttribute) -> dict[str, Any]:
    for kind in ("string", "int", "bool", "version"):
        found = getattr(value, kind)
        if found is not None:
            return {kind: found}
    return {}


def _pod_claim_name(claim: ResourceV1ResourceClaim) -> str | None:
    return ((claim.metadata.annotations if claim.metadata else None) or {}).get(POD_CLAIM_NAME_ANNOTATION)


class VmFiles:
    """The metadata and hook files of VFIO claims, one folder per claim UID under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def claim_folder(self, claim_uid: str) -> Path:
        """The claim's folder; :class:`~claim_ref.InvalidClaimRefError` (a ``ValueError``) for a UID
        not of the API server's form, which could name a folder outside ``folder``."""
        return self.folder / checked_uid(claim_uid)

    def write(
        self,
        claim: ResourceV1ResourceClaim,
        requests: Mapping[str, Sequence[tuple[DeviceRecord, V1Device | None]]],
    ) -> dict[str, tuple[Mount, ...]]:
        """Writes the claim's files; returns the mounts, by the DRA device name that carries them
        (the first device of each request: one mount of a path per container)."""
        meta = claim.metadata or V1ObjectMeta()
        folder = self.claim_folder(checked_uid(meta.uid))
        checked_subdomain(meta.name, "claim name")  # it names paths inside the containers
        pod_claim = _pod_claim_name(claim)
        if pod_claim is not None:
            checked_label(pod_claim, f"annotation {POD_CLAIM_NAME_ANNOTATION}")
        for request in requests:
            for part in request.split("/"):  # a subrequest is <request>/<subrequest>
                checked_label(part, "request name")
        mounts: dict[str, tuple[Mount, ...]] = {}
        hook = folder / "qemu-hook.json"
        records = [r for devices in requests.values() for r, _ in devices if vfio_of(r) is not None]
        if records:  # passed-through cards only: a vGPU needs no hook
            write_atomically(hook, _json(hook_document(claim, records)), mode=0o644, durable=False)
        first = True
        for request, devices in sorted(requests.items()):
            top = request.split("/", 1)[0]  # a subrequest's file sits under its request (KEP-5304)
            host = folder / "metadata" / top / f"{DRIVER}-metadata.json"
            write_atomically(
                host, _json(metadata_document(claim, request, devices)), mode=0o644, durable=False
            )
            where = f"resourceclaimtemplates/{pod_claim}" if pod_claim else f"resourceclaims/{meta.name}"
            found = [
                Mount(str(host), f"{METADATA_ROOT}/{where}/{top}/{DRIVER}-metadata.json", _READ_ONLY),
            ]
            if first:
                found.append(
                    Mount(str(host), f"{VEP10_METADATA_ROOT}/{DRIVER}/{meta.name}/metadata.json", _READ_ONLY)
                )
                if records:
                    found.append(Mount(str(hook), f"{HOOK_ROOT}/{meta.name}.json", _READ_ONLY))
                first = False
            mounts[devices[0][0].device] = tuple(found)
        return mounts

    def remove(self, claim_uid: str) -> bool:
        folder = self.claim_folder(claim_uid)
        if not folder.exists():
            return False
        shutil.rmtree(folder)
        return True

    def remove_all_but(self, keep: Sequence[str]) -> list[str]:
        """Removes the folders of claims not in ``keep``; returns their claim UIDs."""
        if not self.folder.is_dir():
            return []
        removed = [
            p.name for p in self.folder.iterdir() if p.name not in set(keep) and _UID.fullmatch(p.name)
        ]
        for uid in removed:
            self.remove(uid)
        return removed


def _json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, indent=1, sort_keys=True).encode() + b"\n"
