"""Domain types of the DRA allocator shared by the controller, the explain CLI and the tests."""

from pkg.dra.domain.allocation import DeviceID, PoolID, Unschedulable, UnschedulableKind

__all__ = ["DeviceID", "PoolID", "Unschedulable", "UnschedulableKind"]
