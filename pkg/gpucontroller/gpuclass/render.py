"""A GPUClass as a DRA DeviceClass of the same name.

The selector is one CEL expression in the Kubernetes form
(docs/architecture.md#cel-selectors-in-the-kubernetes-form): attributes are read by domain, then name
(``device.attributes["gpu.deckhouse.io"].deviceType``), capacities likewise. Its clauses, joined by ``&&``:

* ``device.driver == "gpu.deckhouse.io"``: our devices only;
* ``deviceType``; for Physical also ``sharingStrategy`` (each Physical card is offered once per
  strategy), for MIG the ``migProfile``;
* for Physical, ``!has(...vmOnly)``: a card under NVIDIA's vGPU manager runs no CUDA on the host,
  so its whole-card offer is kept for VMs (passthrough) and a Physical class, which containers ask
  for, must not hand it out. Its other offers are vGPUs only (no MIG, no shares), so no other
  device type needs the clause; a VGPU class selects exactly those cards' vGPUs;
* the vendor (``Nvidia`` → ``nvidia``, as the attribute spells it) and the selector's
  ``gpu.deckhouse.io/vendor`` and ``gpu.deckhouse.io/device`` labels, which every offer carries as
  the attributes ``vendor`` and ``device``;
* ``minMemory`` as ``device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity(...)) >= 0``:
  a MIG offer's memory is its partition's, a shared offer's the whole card's;
* ``minComputeCapability`` as ``ccMajor``/``ccMinor``, guarded with ``has()``: a card NVML has not
  described has no such attributes, and a missing key is an error that aborts the scheduler's pass;
* ``names`` as the cards' UUIDs: a device carries its card's ``uuid``, never the PhysicalGPU's
  name or its node, so each named card is looked up and its UUID (known once gpu-handler has read
  the card) listed. A named card not read yet is not in the list; the class is re-rendered when
  its UUID appears.

String literals are quoted for CEL (backslash and double quote escaped); every value has passed
the API's patterns before it gets here, so the quoting is a second line, not the only one.

The DeviceClass also carries ``extendedResourceName`` (``gpu.deckhouse.io/<class>`` unless the
class names one, KEP-5004: a Pod asks with one line of ``resources.limits``) and, as opaque
configuration for our driver, a :class:`~api.gpu.v1alpha1.GpuConfig` with the class's sharing policy
and driver capabilities, which the kubelet plugin reads from every allocation of the class (a
claim's own config for the request replaces it whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kubernetes.client import (
    V1CELDeviceSelector,
    V1DeviceClass,
    V1DeviceClassConfiguration,
    V1DeviceClassSpec,
    V1DeviceSelector,
    V1OpaqueDeviceConfiguration,
)

from api.gpu.v1alpha1 import (
    API_VERSION,
    GPU_CLASS_KIND,
    GPU_CONFIG_KIND,
    LABEL_DEVICE,
    LABEL_VENDOR,
    DeviceType,
    GPUClass,
    GpuConfig,
    Sharing,
    SharingStrategy,
)
from pkg.domain.kinds import GPU_CLASS
from pkg.domain.names import DOMAIN, DRIVER
from pkg.framework.client.builtin_kinds import DEVICE_CLASS
from pkg.framework.reconcile.resource_builder import ResourceBuilder
from pkg.gpucontroller.names import LABEL_MANAGED_BY, MANAGED_BY

ATTRS: Final = f'device.attributes["{DOMAIN}"]'
CAPACITY: Final = f'device.capacity["{DOMAIN}"]'
_QUALIFIED_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def cel_string(value: str) -> str:
    """A CEL string literal of ``value``."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def default_extended_resource_name(class_name: str) -> str | None:
    """``gpu.deckhouse.io/<class>``, or ``None`` when the class name cannot be the name part of a
    qualified name (at most 63 characters)."""
    return f"{DOMAIN}/{class_name}" if _QUALIFIED_NAME_PART.match(class_name) else None


def extended_resource_name(gpu_class: GPUClass) -> str | None:
    return gpu_class.spec.extended_resource_name or default_extended_resource_name(
        str(gpu_class.metadata.name)
    )


def selector_expression(gpu_class: GPUClass, uuids: Sequence[str] | None) -> str:
    """The CEL selector of the class; ``uuids`` are the named cards' (``None``: no ``names``)."""
    spec = gpu_class.spec
    clauses = [f"device.driver == {cel_string(DRIVER)}"]
    clauses.append(f"{ATTRS}.deviceType == {cel_string(spec.device_type.value)}")
    if spec.device_type is DeviceType.MIG:
        profile = spec.nvidia.mig.profile if spec.nvidia and spec.nvidia.mig else ""
        clauses.append(f"{ATTRS}.migProfile == {cel_string(profile)}")
    else:
        strategy = spec.sharing.strategy if spec.sharing else SharingStrategy.EXCLUSIVE
        clauses.append(f"{ATTRS}.sharingStrategy == {cel_string(strategy.value)}")
    if spec.device_type is DeviceType.PHYSICAL:
        clauses.append(f"!has({ATTRS}.vmOnly)")
    labels = spec.selector.match_labels if spec.selector and spec.selector.match_labels else {}
    vendors = dict.fromkeys(
        [spec.vendor.value.lower(), *([labels[LABEL_VENDOR]] if LABEL_VENDOR in labels else [])]
    )
    clauses += [f"{ATTRS}.vendor == {cel_string(vendor)}" for vendor in vendors]
    if LABEL_DEVICE in labels:
        clauses.append(f"{ATTRS}.device == {cel_string(labels[LABEL_DEVICE])}")
    requirements = spec.requirements
    if requirements and requirements.min_memory:
        clauses.append(f"{CAPACITY}.memory.compareTo(quantity({cel_string(requirements.min_memory)})) >= 0")
    if requirements and requirements.min_compute_capability:
        major, minor = (int(part) for part in requirements.min_compute_capability.split("."))
        clauses.append(
            f"has({ATTRS}.ccMajor) && ({ATTRS}.ccMajor > {major} || ({ATTRS}.ccMajor == {major}"
            f" && has({ATTRS}.ccMinor) && {ATTRS}.ccMinor >= {minor}))"
        )
    if uuids is not None:
        listed = ", ".join(cel_string(uuid) for uuid in uuids)
        clauses.append(f"has({ATTRS}.uuid) && {ATTRS}.uuid in [{listed}]")
    return " && ".join(clauses)


def device_class(
    gpu_class: GPUClass, *, uuids: Sequence[str] | None, extended_resource: str
) -> V1DeviceClass:
    """The DeviceClass generated from ``gpu_class`` (same name, controlled by it)."""
    name = str(gpu_class.metadata.name)
    parameters = GpuConfig(
        api_version=API_VERSION,
        kind=GPU_CONFIG_KIND,
        sharing=gpu_class.spec.sharing or Sharing(),
        driver_capabilities=gpu_class.spec.driver_capabilities,
    )
    return V1DeviceClass(
        api_version="resource.k8s.io/v1",
        kind="DeviceClass",
        metadata=(
            ResourceBuilder(name, kind=DEVICE_CLASS)
            .labels({LABEL_MANAGED_BY: MANAGED_BY})
            .controlled_by(gpu_class, GPU_CLASS)
            .meta()
        ),
        spec=V1DeviceClassSpec(
            selectors=[
                V1DeviceSelector(cel=V1CELDeviceSelector(expression=selector_expression(gpu_class, uuids)))
            ],
            config=[
                V1DeviceClassConfiguration(
                    opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=parameters.to_api_dict())
                )
            ],
            extended_resource_name=extended_resource,
        ),
    )


def owned_by(existing: V1DeviceClass, gpu_class: GPUClass) -> bool:
    """Whether ``existing`` was generated from this very GPUClass (its uid, not only its name)."""
    owners = existing.metadata.owner_references if existing.metadata else None
    return any(o.kind == GPU_CLASS_KIND and o.uid == gpu_class.metadata.uid for o in owners or [])
