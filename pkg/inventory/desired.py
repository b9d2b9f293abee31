"""What the agent wants an object and its Node to look like, and whether they already do.

The agent owns a few fields and nothing else: on a PhysicalGPU the labels node, vendor, device
and pci-address, and in its status ``pciInfo``, ``nodeInfo`` and ``currentState.driverType``
(server-side apply, field manager ``gpu-node-agent``); on its Node the labels in
:data:`NODE_LABEL_KEYS`. Change detection compares only these fields, projected out of the cached
object the same way on both sides, so a condition or capability written by another component
never looks like a difference, and an unchanged card costs no API request.

Filling rules (docs/architecture.md#a-field-without-a-source-is-left-out): a name pci.ids lacks (or one too
long or unprintable to be a name), an os-release field or a kernel release whose source is absent is left out.
Bare metal is always decided: :mod:`pkg.hardware.hostinfo` counts anything short of positive evidence as a VM,
so ``bareMetal`` is always written. A source that exists but could not be read, with no last known
value to stand in (:mod:`pkg.inventory.host_info`), leaves the Node's labels of that source alone
rather than removing them: a failed read is not news about the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol

from api.gpu.v1alpha1 import (
    LABEL_DEVICE,
    LABEL_NODE,
    LABEL_VENDOR,
    CurrentState,
    DriverType,
    NodeInfo,
    OSInfo,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPUStatus,
)
from pkg.hardware.hostinfo import CPU, DMI, KERNEL, OS_RELEASE, HostInfo
from pkg.hardware.labels import normalize_device_model, to_label_value
from pkg.hardware.pci import PciDevice
from pkg.inventory.naming import ADDRESS_LABEL, address_key

LABEL_BAREMETAL: Final = "gpu.deckhouse.io/baremetal"
LABEL_OS_ID: Final = "gpu.deckhouse.io/os.id"
LABEL_OS_VERSION: Final = "gpu.deckhouse.io/os.version"
LABEL_KERNEL_VERSION: Final = "gpu.deckhouse.io/kernel.version"
NODE_LABEL_KEYS: Final = (LABEL_BAREMETAL, LABEL_OS_ID, LABEL_OS_VERSION, LABEL_KERNEL_VERSION)

MAX_PCI_NAME_LENGTH = 256  # the CRD's maxLength of pciInfo names

# currentState fields of vendor state that the CRD allows only with a matching driverType.
_VENDOR_STATE: Final = {"nvidia": DriverType.NVIDIA}


class PciNames(Protocol):
    """Name lookups in pci.ids (:class:`pkg.hardware.pciids.PciIds`); ``None`` when unknown."""

    def vendor_name(self, vendor_id: str) -> str | None: ...

    def device_name(self, vendor_id: str, device_id: str) -> str | None: ...

    def class_name(self, class_code: str) -> str | None: ...


def pci_info(device: PciDevice, names: PciNames) -> PciInfo:
    """``status.pciInfo`` of a device; raises ``ValueError`` for IDs the API would reject."""
    vid, did = device.vendor_id, device.device_id
    return PciInfo(
        address=device.address,
        class_=PciClass(code=device.class_code, name=_name(names.class_name(device.class_code))),
        vendor=PciId(id=vid, name=_name(names.vendor_name(vid))),
        device=PciId(id=did, name=_name(names.device_name(vid, did))),
    )


def _name(name: str | None) -> str | None:
    """A pci.ids name fit for the status, or None: a damaged database is never a reason to fail."""
    if name is None or len(name) > MAX_PCI_NAME_LENGTH or not name.isprintable():
        return None
    return name


def device_label(info: PciInfo) -> str:
    """The ``device`` label: the normalised model name, or the device ID when pci.ids has none."""
    model = normalize_device_model(info.device.name) if info.device.name else ""
    return model or to_label_value(info.device.id)


def node_info(node_name: str, host: HostInfo) -> NodeInfo:
    has_os = any((host.os_id, host.os_version, host.os_name))
    return NodeInfo(
        node_name=node_name,
        os=OSInfo(id=host.os_id, version=host.os_version, name=host.os_name) if has_os else None,
        kernel_release=host.kernel_release,
        bare_metal=host.bare_metal,
    )


def gpu_status(
    *, info: PciInfo | None, node: NodeInfo | None, driver_type: DriverType | None
) -> PhysicalGPUStatus:
    """The agent's part of a PhysicalGPU status: exactly the fields it applies."""
    state = CurrentState(driver_type=driver_type) if driver_type is not None else None
    return PhysicalGPUStatus(pci_info=info, node_info=node, current_state=state)


def owned_status(status: PhysicalGPUStatus | None) -> PhysicalGPUStatus:
    """The agent's fields of a stored status, shaped as :func:`gpu_status` shapes them."""
    if status is None:
        return PhysicalGPUStatus()
    driver = status.current_state.driver_type if status.current_state else None
    node = status.node_info
    if node is not None and node.os is not None and not node.os.to_api_dict():
        node = node.model_copy(update={"os": None})
    return gpu_status(info=status.pci_info, node=node, driver_type=driver)


def status_differs(stored: PhysicalGPUStatus | None, desired: PhysicalGPUStatus) -> bool:
    return owned_status(stored).to_api_dict() != desired.to_api_dict()


def stale_vendor_state(stored: PhysicalGPUStatus | None, desired: PhysicalGPUStatus) -> list[str]:
    """``currentState`` vendor blocks the new driverType makes invalid (the CRD rejects
    ``currentState.nvidia`` unless driverType is Nvidia, so they must go before the apply)."""
    current = stored.current_state if stored else None
    if current is None:
        return []
    driver = desired.current_state.driver_type if desired.current_state else None
    return [key for key, needs in _VENDOR_STATE.items() if getattr(current, key) and driver is not needs]


def gpu_labels(*, node_label: str, vendor: str, device: str, address: str) -> dict[str, str]:
    return {
        LABEL_NODE: node_label,
        LABEL_VENDOR: vendor,
        LABEL_DEVICE: device,
        ADDRESS_LABEL: address_key(address),
    }


def node_labels(host: HostInfo) -> dict[str, str | None]:
    """The Node's agent labels; ``None`` removes a label whose source is absent. A
    source that failed to read, with nothing known to stand in, leaves its labels out: untouched."""

    def value(text: str | None) -> str | None:
        return (to_label_value(text) or None) if text else None

    failed = host.failed_sources()
    labels: dict[str, str | None] = {}
    if not failed & {DMI, CPU}:
        labels[LABEL_BAREMETAL] = "true" if host.bare_metal else "false"
    if OS_RELEASE not in failed:
        labels[LABEL_OS_ID] = value(host.os_id)
        labels[LABEL_OS_VERSION] = value(host.os_version)
    if KERNEL not in failed:
        labels[LABEL_KERNEL_VERSION] = value(host.kernel_release)
    return labels


def label_changes(
    current: Mapping[str, str] | None, desired: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The entries of ``desired`` that ``current`` does not have yet (``None``: remove the label)."""
    labels = current or {}
    return {key: value for key, value in desired.items() if labels.get(key) != value}
