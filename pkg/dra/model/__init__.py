"""The DRA model of our devices: a card as the vendor backends describe it, the offers made of it,
the ResourceSlices that publish them, the attribute names and API limits they keep to, and the IDs
the allocator names devices by. (``pkg.domain``, one layer down, holds the names every component
shares about our own CRD objects.)"""

from pkg.dra.model.allocation import DeviceID, PoolID, Unschedulable, UnschedulableKind

__all__ = ["DeviceID", "PoolID", "Unschedulable", "UnschedulableKind"]
