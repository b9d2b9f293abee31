"""Small builders of Nodes, ResourceSlices and DeviceClasses for integration tests.

They build what a kubelet-less test cluster needs to schedule against: a Ready Node with capacity,
and a pool in the layout the API server's version wants (``read_server_version(kube).layout``):
one counter slice plus one device slice on 1.35+, one device slice holding its counter set on 1.34.
The publisher of the gpu-handler builds the real slices; these builders stay minimal on purpose.
"""

from __future__ import annotations

from kubernetes.client import (
    V1CELDeviceSelector,
    V1Counter,
    V1CounterSet,
    V1Device,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceCounterConsumption,
    V1DeviceSelector,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)

from pkg.devcluster.nodes import create_ready_node
from pkg.dra.model.slices import Layout

DRIVER = "gpu.deckhouse.io"

__all__ = ["DRIVER", "a30_mig_pool", "create_ready_node", "device_class"]


def a30_mig_pool(node: str, *, layout: Layout, generation: int = 1) -> tuple[V1ResourceSlice, ...]:
    """An A30 card's pool: four 1g MIG offers and the full card, in the server's ``layout``.

    :attr:`Layout.SEPARATE` (1.35+): a counter slice ``<node>-gpus-counters`` and a device slice
    ``<node>-gpus-0``; :attr:`Layout.INLINE` (1.34): the device slice alone, holding the counter set.
    """
    card = "gpu-0000-02-00-0"
    separate = layout is Layout.SEPARATE
    pool = V1ResourcePool(
        name=f"gpus/{node}", generation=generation, resource_slice_count=2 if separate else 1
    )
    counters = {"memory": V1Counter(value="24Gi")}
    counters |= {f"memory-slice-{i}": V1Counter(value="1") for i in range(4)}
    counter_set = V1CounterSet(name=card, counters=counters)
    devices = [
        V1Device(
            name=f"{card}-mig-14-{start}",
            attributes={
                f"{DRIVER}/deviceType": V1DeviceAttribute(string="MIG"),
                f"{DRIVER}/migProfile": V1DeviceAttribute(string="1g.6gb"),
            },
            capacity={f"{DRIVER}/memory": V1DeviceCapacity(value="5949Mi")},
            consumes_counters=[
                V1DeviceCounterConsumption(
                    counter_set=card,
                    counters={
                        "memory": V1Counter(value="6Gi"),
                        f"memory-slice-{start}": V1Counter(value="1"),
                    },
                )
            ],
        )
        for start in range(4)
    ]
    devices.append(
        V1Device(
            name=card,
            attributes={f"{DRIVER}/deviceType": V1DeviceAttribute(string="Physical")},
            capacity={f"{DRIVER}/memory": V1DeviceCapacity(value="24Gi")},
            consumes_counters=[V1DeviceCounterConsumption(counter_set=card, counters=dict(counters))],
        )
    )
    device_slice = V1ResourceSlice(
        metadata=V1ObjectMeta(name=f"{node}-gpus-0"),
        spec=V1ResourceSliceSpec(
            driver=DRIVER,
            pool=pool,
            node_name=node,
            devices=devices,
            shared_counters=None if separate else [counter_set],
        ),
    )
    if not separate:
        return (device_slice,)
    counter_slice = V1ResourceSlice(
        metadata=V1ObjectMeta(name=f"{node}-gpus-counters"),
        spec=V1ResourceSliceSpec(driver=DRIVER, pool=pool, node_name=node, shared_counters=[counter_set]),
    )
    return counter_slice, device_slice


def device_class(name: str, *, cel: str, extended_resource_name: str | None = None) -> V1DeviceClass:
    return V1DeviceClass(
        metadata=V1ObjectMeta(name=name),
        spec=V1DeviceClassSpec(
            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=cel))],
            extended_resource_name=extended_resource_name,
        ),
    )
