"""Small builders of ResourceSlices, DeviceClasses and ResourceClaims for allocator tests.

Everything is built from the kubernetes client's models. ``a30_pool`` publishes one A30 the way
our publisher does (1.35+ layout: one counter slice, one device slice): the Physical offer and
optional time-slicing/MPS offers consume every counter; MIG offers consume their memory slices.
"""

from __future__ import annotations

import itertools

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1CapacityRequestPolicy,
    V1CapacityRequestPolicyRange,
    V1CapacityRequirements,
    V1CELDeviceSelector,
    V1Counter,
    V1CounterSet,
    V1Device,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceClass,
    V1DeviceClassConfiguration,
    V1DeviceClassSpec,
    V1DeviceConstraint,
    V1DeviceCounterConsumption,
    V1DeviceRequest,
    V1DeviceSelector,
    V1DeviceSubRequest,
    V1ExactDeviceRequest,
    V1Node,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)

from pkg.dra.allocator import AllocationInputs, Allocator, Explanation, FirstFit, Unschedulable, explain
from testutil.k8s_fields import allocation_results

DRIVER = "gpu.deckhouse.io"
_uids = itertools.count(1)

# A30: 4 memory slices of 6Gi; MIG placements per profile: (start, size in slices).
A30_PROFILES = {"1g": [(0, 1), (1, 1), (2, 1), (3, 1)], "2g": [(0, 2), (2, 2)], "4g": [(0, 4)]}


def attr(value: str | int | bool) -> V1DeviceAttribute:
    if isinstance(value, bool):
        return V1DeviceAttribute(bool=value)
    if isinstance(value, int):
        return V1DeviceAttribute(int=value)
    return V1DeviceAttribute(string=value)


def device(
    name: str,
    *,
    attributes: dict[str, str | int | bool] | None = None,
    capacity: dict[str, str | V1DeviceCapacity] | None = None,
    consumes: dict[str, dict[str, str]] | None = None,
    shared: bool = False,
) -> V1Device:
    return V1Device(
        name=name,
        attributes={k: attr(v) for k, v in (attributes or {}).items()} or None,
        capacity={
            k: v if isinstance(v, V1DeviceCapacity) else V1DeviceCapacity(value=v)
            for k, v in (capacity or {}).items()
        }
        or None,
        consumes_counters=[
            V1DeviceCounterConsumption(counter_set=s, counters={k: V1Counter(value=v) for k, v in c.items()})
            for s, c in (consumes or {}).items()
        ]
        or None,
        allow_multiple_allocations=True if shared else None,
    )


def share_percent() -> V1DeviceCapacity:
    return V1DeviceCapacity(
        value="100",
        request_policy=V1CapacityRequestPolicy(
            default="100", valid_range=V1CapacityRequestPolicyRange(min="1", max="100", step="1")
        ),
    )


def shared_memory() -> V1DeviceCapacity:
    return V1DeviceCapacity(
        value="24Gi",
        request_policy=V1CapacityRequestPolicy(
            default="0", valid_range=V1CapacityRequestPolicyRange(min="0")
        ),
    )


def resource_slice(
    name: str,
    *,
    pool: str,
    node: str | None = "node-a",
    devices: list[V1Device] | None = None,
    counters: dict[str, dict[str, str]] | None = None,
    generation: int = 1,
    count: int = 1,
    driver: str = DRIVER,
) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name=name, resource_version="1"),
        spec=V1ResourceSliceSpec(
            driver=driver,
            pool=V1ResourcePool(name=pool, generation=generation, resource_slice_count=count),
            node_name=node,
            all_nodes=True if node is None else None,
            devices=devices,
            shared_counters=[
                V1CounterSet(name=s, counters={k: V1Counter(value=v) for k, v in c.items()})
                for s, c in (counters or {}).items()
            ]
            or None,
        ),
    )


def a30_pool(
    node: str = "node-a",
    *,
    card: str = "gpu-0000-02-00-0",
    profiles: tuple[str, ...] = ("1g", "2g", "4g"),
    sharing: tuple[str, ...] = (),
    generation: int = 1,
) -> list[V1ResourceSlice]:
    """One A30 as a counter slice plus a device slice (smallest offers first)."""
    everything = {"memory": "24Gi"} | {f"memory-slice-{i}": "1" for i in range(4)} | {"multiprocessors": "56"}
    base: dict[str, str | int | bool] = {
        "vendor": "nvidia",
        "device": "a30-pcie",
        "pciAddress": "0000:02:00.0",
    }
    devices = []
    for profile in profiles:
        for start, size in A30_PROFILES[profile]:
            use = {"memory": f"{6 * size}Gi", "multiprocessors": str(14 * size)}
            use |= {f"memory-slice-{i}": "1" for i in range(start, start + size)}
            devices.append(
                device(
                    f"{card}-mig-{profile}-{start}",
                    attributes=base | {"deviceType": "MIG", "migProfile": profile},
                    capacity={"memory": f"{6 * size}Gi"},
                    consumes={card: use},
                )
            )
    devices.append(
        device(
            f"{card}-physical",
            attributes=base | {"deviceType": "Physical"},
            capacity={"memory": "24Gi"},
            consumes={card: everything},
        )
    )
    for strategy in sharing:
        devices.append(
            device(
                f"{card}-{strategy}",
                attributes=base | {"deviceType": "Physical", "sharing": strategy},
                # A shared device's capacities are all consumable: without a policy every share would
                # take the whole 24Gi, so memory defaults to 0 per share.
                capacity={"memory": shared_memory(), "sharePercent": share_percent()},
                consumes={card: everything},
                shared=True,
            )
        )
    pool = f"gpus-{node}-{card}"
    return [
        resource_slice(
            f"{pool}-counters",
            pool=pool,
            node=node,
            counters={card: everything},
            generation=generation,
            count=2,
        ),
        resource_slice(
            f"{pool}-devices", pool=pool, node=node, devices=devices, generation=generation, count=2
        ),
    ]


def device_class(
    name: str, *expressions: str, config: list[dict[str, object]] | None = None
) -> V1DeviceClass:
    return V1DeviceClass(
        metadata=V1ObjectMeta(name=name),
        spec=V1DeviceClassSpec(
            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=e)) for e in expressions] or None,
            config=[
                V1DeviceClassConfiguration(opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=p))
                for p in config or ()
            ]
            or None,
        ),
    )


def mig_class(profile: str | None = None, name: str | None = None) -> V1DeviceClass:
    expr = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].deviceType == "MIG"'
    if profile:
        expr += f' && device.attributes["{DRIVER}"].migProfile == "{profile}"'
    return device_class(name or f"mig-{profile or 'any'}", expr)


def physical_class(sharing: str | None = None, name: str | None = None) -> V1DeviceClass:
    expr = f'device.attributes["{DRIVER}"].deviceType == "Physical"'
    expr += f" && device.allowMultipleAllocations == {'true' if sharing else 'false'}"
    if sharing:
        expr += f' && device.attributes["{DRIVER}"].sharing == "{sharing}"'
    return device_class(name or f"physical-{sharing or 'exclusive'}", expr)


def exact(
    name: str,
    cls: str,
    *,
    count: int | None = None,
    all_devices: bool = False,
    selectors: tuple[str, ...] = (),
    admin: bool | None = None,
    capacity: dict[str, str] | None = None,
) -> V1DeviceRequest:
    return V1DeviceRequest(
        name=name,
        exactly=V1ExactDeviceRequest(
            device_class_name=cls,
            allocation_mode="All" if all_devices else "ExactCount",
            count=None if all_devices else count or 1,
            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=e)) for e in selectors] or None,
            admin_access=admin,
            capacity=V1CapacityRequirements(requests=capacity) if capacity else None,
        ),
    )


def first_available(name: str, *subs: tuple[str, str]) -> V1DeviceRequest:
    return V1DeviceRequest(
        name=name,
        first_available=[
            V1DeviceSubRequest(name=sub, device_class_name=cls, allocation_mode="ExactCount", count=1)
            for sub, cls in subs
        ],
    )


def claim(
    name: str,
    *requests: V1DeviceRequest,
    namespace: str = "default",
    constraints: list[V1DeviceConstraint] | None = None,
    config: list[tuple[list[str] | None, dict[str, object]]] | None = None,
) -> ResourceV1ResourceClaim:
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace=namespace, uid=f"uid-{next(_uids)}"),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(
                requests=list(requests),
                constraints=constraints,
                config=[
                    V1DeviceClaimConfiguration(
                        requests=r, opaque=V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=p)
                    )
                    for r, p in config or ()
                ]
                or None,
            )
        ),
    )


def with_allocation(c: ResourceV1ResourceClaim, result: V1AllocationResult) -> ResourceV1ResourceClaim:
    c.status = V1ResourceClaimStatus(allocation=result)
    return c


def node(name: str = "node-a", labels: dict[str, str] | None = None) -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name=name, labels=labels))


NODE_A = node()


def allocated(result: V1AllocationResult | Unschedulable) -> V1AllocationResult:
    """``result``, which the test expects to be an allocation."""
    assert isinstance(result, V1AllocationResult), result
    return result


def devices_of(result: V1AllocationResult | Unschedulable) -> list[str]:
    return [r.device for r in allocation_results(allocated(result))]


class Cluster:
    """Slices, classes and allocated claims; ``allocate`` records successful allocations."""

    def __init__(
        self, slices: list[V1ResourceSlice], classes: list[V1DeviceClass], *, first_fit: bool = False
    ):
        self.slices = slices
        self.classes = classes
        self.claims: list[ResourceV1ResourceClaim] = []
        shares = (f"share-{i}" for i in itertools.count(1))
        self.allocator = Allocator(strategy=FirstFit() if first_fit else None, share_id=lambda: next(shares))

    def allocate(
        self,
        c: ResourceV1ResourceClaim,
        *,
        node: V1Node | None = NODE_A,
        namespace_labels: dict[str, str] | None = None,
    ) -> V1AllocationResult | Unschedulable:
        """Allocates ``c`` on ``node`` (default node-a; None: any one node)."""
        result = self.allocator.allocate(
            c,
            slices=self.slices,
            classes=self.classes,
            allocated_claims=self.claims,
            namespace_labels=namespace_labels,
            node=node,
        )
        if isinstance(result, V1AllocationResult):
            self.claims.append(with_allocation(c, result))
        return result

    def take(self, profile_class: str, count: int = 1) -> list[str]:
        """Allocate one claim for ``count`` devices of a class; returns the device names."""
        result = self.allocate(claim(f"c{len(self.claims)}", exact("r", profile_class, count=count)))
        assert isinstance(result, V1AllocationResult), result
        return devices_of(result)


def explained(
    c: ResourceV1ResourceClaim,
    *,
    slices: list[V1ResourceSlice],
    classes: list[V1DeviceClass],
    allocated_claims: list[ResourceV1ResourceClaim],
    allocator: Allocator | None = None,
) -> Explanation:
    """Allocates ``c`` once, as the explain CLI does, and explains that attempt."""
    allocator = allocator or Allocator()
    inputs = AllocationInputs.of(slices=slices, classes=classes, allocated_claims=allocated_claims)
    return explain(allocator.attempt(c, inputs), allocator=allocator)
