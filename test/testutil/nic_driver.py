"""A second, minimal DRA driver for the topology tests: the NICs of a fixture host as devices.

Test data, not product code. Real NIC drivers (SR-IOV, RDMA, CNI drivers) publish the standard
``resource.kubernetes.io/pcieRoot`` attribute of their functions; this one publishes every network
or InfiniBand function (PCI class 02xx) of a host tree in one pool ``nics/<node>`` of driver
``nic.test.example``, with the PCIe root and NUMA node computed the Kubernetes way
(:mod:`pkg.hardware.pci_topology`, which the integration tier compares with Kubernetes' helper).
So a claim can ask for a GPU and the NIC beside it with ``matchAttribute`` across two drivers.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes.client import (
    V1CELDeviceSelector,
    V1Device,
    V1DeviceAttribute,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceSelector,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)

from pkg.hardware.pci import scan_pci
from pkg.hardware.pci_topology import SysfsPciTopology

DRIVER = "nic.test.example"
NETWORK_CLASS = "02"  # PCI base class: network controller (Ethernet 0200, InfiniBand 0207)


def nic_slice(node: str, sysfs_root: Path, *, name: str | None = None) -> V1ResourceSlice:
    """The host's NICs as one ResourceSlice of node ``node``."""
    topology = SysfsPciTopology(sysfs_root)
    devices = []
    for fn in scan_pci(sysfs_root).devices:
        if not fn.class_code.startswith(NETWORK_CLASS):
            continue
        where = topology.placement(fn.address)
        attributes = {"resource.kubernetes.io/pciBusID": V1DeviceAttribute(string=fn.address)}
        if where.pcie_root is not None:
            attributes["resource.kubernetes.io/pcieRoot"] = V1DeviceAttribute(string=where.pcie_root)
        if where.numa_node is not None:
            attributes["resource.kubernetes.io/numaNode"] = V1DeviceAttribute(int=where.numa_node)
        device_name = "nic-" + fn.address.replace(":", "-").replace(".", "-")
        devices.append(V1Device(name=device_name, attributes=attributes))
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=name or f"{node}-nics"),
        spec=V1ResourceSliceSpec(
            driver=DRIVER,
            pool=V1ResourcePool(name=f"nics/{node}", generation=1, resource_slice_count=1),
            node_name=node,
            devices=devices,
        ),
    )


def nic_class(name: str = "nic") -> V1DeviceClass:
    return V1DeviceClass(
        metadata=V1ObjectMeta(name=name),
        spec=V1DeviceClassSpec(
            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=f'device.driver == "{DRIVER}"'))]
        ),
    )
