"""What the compute-domain controller writes, rendered from a domain (pure: no API calls).

* the DeviceClass of IMEX channels (one for the cluster);
* a domain's ResourceClaimTemplate: the channel request selects exactly the domain's channel in its
  clique, and with ``spec.devices`` a GPU request constrained to the same clique.

The IMEX daemons are not a domain's: they belong to its clique's ensemble
(:mod:`pkg.gpucontroller.imexensemble`), which every domain of the clique shares.
"""

from __future__ import annotations

from typing import Final

from kubernetes.client import (
    V1CELDeviceSelector,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceConstraint,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1ResourceClaimSpec,
    V1ResourceClaimTemplate,
    V1ResourceClaimTemplateSpec,
)

from api.gpu.v1alpha1 import (
    COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE,
    COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
    IMEX_CHANNEL_DEVICE_TYPE,
    ComputeDomain,
    ComputeDomainChannelConfig,
)
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.reconcile.owner_references import controller_reference
from pkg.gpucontroller.gpuclass.render import cel_string
from pkg.gpucontroller.names import LABEL_MANAGED_BY, LABEL_PART_OF, MANAGED_BY, PART_OF

DRIVER: Final = "gpu.deckhouse.io"
NVLINK_DOMAIN_ATTRIBUTE: Final = "nvlinkDomain"
CHANNEL_REQUEST: Final = "channel"
GPUS_REQUEST: Final = "gpus"
LABEL_DOMAIN_UID: Final = "gpu.deckhouse.io/compute-domain-uid"


def domain_key(domain: ComputeDomain) -> str:
    return f"{domain.metadata.namespace}/{domain.metadata.name}"


def domain_uid(domain: ComputeDomain) -> str:
    return str(domain.metadata.uid)


def channel_device_class() -> V1DeviceClass:
    expression = (
        f"device.driver == {cel_string(DRIVER)} && "
        f'device.attributes["{DRIVER}"].deviceType == {cel_string(IMEX_CHANNEL_DEVICE_TYPE)}'
    )
    return V1DeviceClass(
        api_version="resource.k8s.io/v1",
        kind="DeviceClass",
        metadata=V1ObjectMeta(
            name=COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
            labels={LABEL_MANAGED_BY: MANAGED_BY, LABEL_PART_OF: PART_OF},
        ),
        spec=V1DeviceClassSpec(selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=expression))]),
    )


def channel_selector(channel: int, clique: str) -> str:
    attributes = f'device.attributes["{DRIVER}"]'
    return (
        f"{attributes}.{COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE} == {channel} && "
        f"{attributes}.{NVLINK_DOMAIN_ATTRIBUTE} == {cel_string(clique)}"
    )


def claim_template(domain: ComputeDomain, *, channel: int, clique: str) -> V1ResourceClaimTemplate:
    """The template the job's Pods reference: its claims hold the domain's channel (and GPUs)."""
    config = ComputeDomainChannelConfig(domain=str(domain.metadata.name), domain_uid=domain_uid(domain))
    requests = [
        V1DeviceRequest(
            name=CHANNEL_REQUEST,
            exactly=V1ExactDeviceRequest(
                device_class_name=COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
                allocation_mode="ExactCount",
                count=1,
                selectors=[
                    V1DeviceSelector(cel=V1CELDeviceSelector(expression=channel_selector(channel, clique)))
                ],
            ),
        )
    ]
    constraints = None
    devices = domain.spec.devices
    if devices is not None:
        requests.append(
            V1DeviceRequest(
                name=GPUS_REQUEST,
                exactly=V1ExactDeviceRequest(
                    device_class_name=devices.device_class_name,
                    allocation_mode="ExactCount",
                    count=devices.count,
                ),
            )
        )
        constraints = [
            V1DeviceConstraint(
                requests=[CHANNEL_REQUEST, GPUS_REQUEST],
                match_attribute=f"{DRIVER}/{NVLINK_DOMAIN_ATTRIBUTE}",
            )
        ]
    opaque = V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=config.to_api_dict())
    return V1ResourceClaimTemplate(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
        metadata=V1ObjectMeta(
            name=domain.spec.channel.resource_claim_template.name,
            namespace=domain.metadata.namespace,
            labels={LABEL_MANAGED_BY: MANAGED_BY, LABEL_DOMAIN_UID: domain_uid(domain)},
            owner_references=[controller_reference(domain, COMPUTE_DOMAIN)],
        ),
        spec=V1ResourceClaimTemplateSpec(
            spec=V1ResourceClaimSpec(
                devices=V1DeviceClaim(
                    requests=requests,
                    constraints=constraints,
                    config=[V1DeviceClaimConfiguration(requests=[CHANNEL_REQUEST], opaque=opaque)],
                )
            )
        ),
    )
