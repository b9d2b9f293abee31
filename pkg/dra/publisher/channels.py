"""A node's IMEX channel devices, and the slices of its pool that hold them.

Each channel ``N`` is a device ``imex-channel-<N>`` with its type, number and NVLink clique as
attributes, so a compute domain's claim selects exactly its own channel in its own clique
(``imexChannel == N && nvlinkDomain == "<clique>"``). ``allowMultipleAllocations`` lets several
Pods of one domain on one node each hold a claim of the same channel. A channel is on no card: it
has no ``pciAddress`` and consumes no counters, so its slices hold up to 128 devices and come
after the cards' slices (``gpu-<node>-channels-NN``) in the same pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kubernetes.client import (
    V1Device,
    V1DeviceAttribute,
    V1OwnerReference,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE, IMEX_CHANNEL_DEVICE_TYPE, IMEX_MAX_CHANNEL
from pkg.domain.names import DOMAIN, DRIVER
from pkg.dra.model.attributes import NVLINK_DOMAIN
from pkg.dra.model.limits import MAX_DEVICES, validate_slice
from pkg.dra.model.slices import pool_name, slice_name_base
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE
from pkg.framework.reconcile.resource_builder import ResourceBuilder

CHANNEL_PREFIX: Final = "imex-channel-"
DEVICE_TYPE_KEY: Final = f"{DOMAIN}/deviceType"
CHANNEL_KEY: Final = f"{DOMAIN}/{COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE}"


def channel_device_name(channel: int) -> str:
    return f"{CHANNEL_PREFIX}{channel}"


def imex_channel_devices(count: int, nvlink_domain: str) -> list[V1Device]:
    """Channels 1..``count`` (0 is never offered: a host's driver may give channel 0 to everyone)."""
    if not 0 <= count <= IMEX_MAX_CHANNEL:
        raise ValueError(f"IMEX channel count {count} is not between 0 and {IMEX_MAX_CHANNEL}")
    return [
        V1Device(
            name=channel_device_name(n),
            attributes={
                DEVICE_TYPE_KEY: V1DeviceAttribute(string=IMEX_CHANNEL_DEVICE_TYPE),
                CHANNEL_KEY: V1DeviceAttribute(int=n),
                NVLINK_DOMAIN: V1DeviceAttribute(string=nvlink_domain),
            },
            allow_multiple_allocations=True,
        )
        for n in range(1, count + 1)
    ]


def channel_slices(
    *,
    node: str,
    channels: Sequence[V1Device],
    generation: int,
    count: int,
    inline: bool,
    owner: V1OwnerReference | None = None,
) -> list[V1ResourceSlice]:
    """The channel slices of the pool, ``count`` being the pool's slice count with them."""
    base = slice_name_base(node)
    groups = [channels[i : i + MAX_DEVICES] for i in range(0, len(channels), MAX_DEVICES)]
    slices = []
    for index, group in enumerate(groups):
        builder = ResourceBuilder(f"{base}-channels-{index:02d}", kind=RESOURCE_SLICE)
        rs = V1ResourceSlice(
            api_version="resource.k8s.io/v1",
            kind="ResourceSlice",
            metadata=(builder.with_owner(owner) if owner else builder).meta(),
            spec=V1ResourceSliceSpec(
                driver=DRIVER,
                node_name=node,
                pool=V1ResourcePool(name=pool_name(node), generation=generation, resource_slice_count=count),
                devices=list(group),
            ),
        )
        validate_slice(rs, inline=inline)
        slices.append(rs)
    return slices


def slices_needed(channels: Sequence[V1Device]) -> int:
    return -(-len(channels) // MAX_DEVICES)
